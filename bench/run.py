"""Times rope-lint next to ruff (and TorchFix, Fixit and semgrep when installed) on transformers 4.37.2 `models/`.

    python bench/run.py [--repeat 5] [--corpus PATH]

Each command runs `--repeat` times, the commands taking turns; the table gives the median wall time, the ratio to
ruff's median in the same run, and the peak memory (max RSS) of the largest process. "cold" is `--no-cache`; "warm"
reads the result cache that an earlier run over the unchanged tree wrote (in `.rope_lint_cache/` of the current
folder's project). Without --corpus, the transformers 4.37.2 wheel is downloaded once into the git-ignored `.cache/`
and unpacked there.
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
from typing import NamedTuple

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


class Row(NamedTuple):
    name: str
    command: list[str]
    baseline: str | None  # the row this one is compared with: ruff's, in the same run
    prepare: Callable[[], None] | None = None


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
    check = [*rope_lint, "check", "--quiet"]
    scratch = Path(tempfile.mkdtemp())
    cache = Path.cwd() / ".rope_lint_cache"

    def fresh_copy() -> None:
        shutil.rmtree(scratch / "models", ignore_errors=True)
        shutil.copytree(models, scratch / "models")

    rows = [
        Row("ruff, whole tree", [*ruff, str(models)], None),
        Row("rope-lint check, whole tree, cold", [*check, "--no-cache", str(models)], "ruff, whole tree"),
        # The cache of the run before holds every file: a run with unchanged files.
        Row("rope-lint check, whole tree, warm", [*check, str(models)], "ruff, whole tree"),
        Row("ruff, one file", [*ruff, str(one_file)], None),
        Row("rope-lint check, one file", [*check, str(one_file)], "ruff, one file"),
        Row("rope-lint fix --unsafe-fixes, whole tree", [*rope_lint, "fix", "--unsafe-fixes", str(scratch / "models")],
            None, fresh_copy),
    ]  # fmt: skip
    for tool, command in (
        ("torchfix", ["torchfix", str(models)]),
        ("fixit", ["fixit", "lint", str(models)]),
        ("semgrep", ["semgrep", "--quiet", "-e", "torch.arange(..., dtype=torch.float)", "-l", "python", str(models)]),
    ):
        if shutil.which(tool):
            rows.append(Row(f"{tool}, whole tree", command, "ruff, whole tree"))
    subprocess.run([*check, str(models)], capture_output=True)  # fills the cache for the warm row
    # Each repetition runs every row once, in turn, so that a machine that slows down mid-run slows every row alike.
    times: dict[str, list[float]] = {row.name: [] for row in rows}
    peaks: dict[str, int] = dict.fromkeys(times, 0)
    for _ in range(args.repeat):
        for row in rows:
            seconds, peak = timed(row.command, row.prepare)
            times[row.name].append(seconds)
            peaks[row.name] = max(peaks[row.name], peak)
    shutil.rmtree(scratch)
    files = len(list(models.rglob("*.py")))
    print(f"corpus: {models} ({files} files), {args.repeat} runs each, {os.cpu_count()} cores")
    print(f"cache: {cache}")
    print(f"{'command':<44} {'median s':>9} {'x ruff':>7} {'peak MB':>8}")
    for row in rows:
        median = statistics.median(times[row.name])
        ratio = f"{median / statistics.median(times[row.baseline]):>7.2f}" if row.baseline else f"{'':>7}"
        print(f"{row.name:<44} {median:>9.3f} {ratio} {peaks[row.name] / 1024:>8.0f}")


if __name__ == "__main__":
    main()
