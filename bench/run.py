"""Times rope-lint next to ruff (and TorchFix, Fixit and semgrep when installed) on transformers 4.37.2 `models/`.

    python bench/run.py [--repeat 5] [--corpus PATH]

Each command runs `--repeat` times; the table gives the median wall time, the ratio to ruff's time in the same
run, and the peak memory (max RSS) of one run. Without --corpus, the transformers 4.37.2 wheel is downloaded once into
the git-ignored `.cache/` and unpacked there.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "bench"


def corpus() -> Path:
    target = CACHE / "transformers-4.37.2"
    if not (target / ".complete").exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "transformers==4.37.2", "-d", CACHE],
            check=True,
        )
        with zipfile.ZipFile(next(CACHE.glob("transformers-4.37.2-*.whl"))) as wheel:
            wheel.extractall(target)
        (target / ".complete").touch()
    return target / "transformers" / "models"


def timed(command: list[str], prepare: Callable[[], None] | None = None) -> tuple[float, int]:
    """Wall seconds and peak RSS in KiB (of the process tree's largest process, as GNU time reports it)."""
    if prepare:
        prepare()
    with tempfile.NamedTemporaryFile("r") as report:
        start = time.perf_counter()
        subprocess.run(["/usr/bin/time", "-f", "%M", "-o", report.name, *command], capture_output=True)
        elapsed = time.perf_counter() - start
        return elapsed, int(report.read().split()[-1])


def measure(
    name: str, command: list[str], repeat: int, prepare: Callable[[], None] | None = None
) -> tuple[str, float, int]:
    runs = [timed(command, prepare) for _ in range(repeat)]
    return name, statistics.median(t for t, _ in runs), max(m for _, m in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--corpus", type=Path)
    args = parser.parse_args()
    models = args.corpus or corpus()
    one_file = models / "llama" / "modeling_llama.py"
    rope_lint = [shutil.which("rope-lint")] if shutil.which("rope-lint") else [sys.executable, "-m", "rope_lint"]
    ruff = [shutil.which("ruff") or "ruff", "check", "--select", "E,F", "--no-cache", "--isolated"]
    ruff += ["--output-format", "concise"]
    rows = [
        measure("ruff, whole tree", [*ruff, str(models)], args.repeat),
        measure("rope-lint check, whole tree", [*rope_lint, "check", "--quiet", str(models)], args.repeat),
        measure("ruff, one file", [*ruff, str(one_file)], args.repeat),
        measure("rope-lint check, one file", [*rope_lint, "check", "--quiet", str(one_file)], args.repeat),
    ]
    scratch = Path(tempfile.mkdtemp())

    def fresh_copy() -> None:
        shutil.rmtree(scratch / "models", ignore_errors=True)
        shutil.copytree(models, scratch / "models")

    fix = [*rope_lint, "fix", "--unsafe-fixes", str(scratch / "models")]
    rows.append(measure("rope-lint fix --unsafe-fixes, whole tree", fix, args.repeat, fresh_copy))
    for tool, command in (
        ("torchfix", ["torchfix", str(models)]),
        ("fixit", ["fixit", "lint", str(models)]),
        ("semgrep", ["semgrep", "--quiet", "-e", "torch.arange(..., dtype=torch.float)", "-l", "python", str(models)]),
    ):
        if shutil.which(tool):
            rows.append(measure(f"{tool}, whole tree", command, args.repeat))
    shutil.rmtree(scratch)
    whole, single = rows[0][1], rows[2][1]
    files = len(list(models.rglob("*.py")))
    print(f"corpus: {models} ({files} files), {args.repeat} runs each, {os.cpu_count()} cores")
    print(f"{'command':<44} {'median s':>9} {'x ruff':>7} {'peak MB':>8}")
    for name, seconds, peak in rows:
        base = single if "one file" in name else whole
        print(f"{name:<44} {seconds:>9.3f} {seconds / base:>7.2f} {peak / 1024:>8.0f}")


if __name__ == "__main__":
    main()
