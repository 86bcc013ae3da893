"""Times rope-lint next to ruff (and TorchFix, Fixit and semgrep when installed), and its fix and probe, on
transformers: issue 21's rows.

    python bench/run.py [--repeat 5] [--corpus PATH] [--quick]

Each command runs `--repeat` times, the commands taking turns; the table gives the median wall time with the fastest
and the slowest run, the ratio of medians to the row's baseline in the same run (ruff, or for one file the floor of
any Python tool that reads it: `ast.parse` of the file in a fresh interpreter), and the peak memory (max RSS) of the
largest process. "cold" is `--no-cache`; "warm" reads the result cache that an earlier run over the unchanged tree
wrote (in `.rope_lint_cache/` of the current folder's project), and its floor (`bench/warm_floor.py`) does the part
of that work any Python tool must do, with no rope-lint code: the walk, the statuses, the cache's JSON, the package's
fingerprint. The corpora are transformers 4.37.2 `models/` (or `--corpus`) and the whole 5.24.0 package, downloaded
once into the git-ignored `.cache/bench/`; the 5.24.0 package is checked too, cold and warm, next to ruff (a tree
with generated files, whose findings name their origins; its warm row's cache is its own, in a scratch folder); the
probe runs on 5.24.0 installed there with its dependencies (never torch). `--quick` leaves out the 5.24.0 rows, which
take minutes.
"""

from __future__ import annotations

import argparse
import os
import shlex
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


def corpus(version: str = "4.37.2") -> Path:
    """The release's wheel, unpacked: the folder that holds the `transformers` package."""
    target = CACHE / f"transformers-{version}"
    if not (target / ".complete").exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", f"transformers=={version}", "-d", CACHE],
            check=True,
        )
        with zipfile.ZipFile(next(CACHE.glob(f"transformers-{version}-*.whl"))) as wheel:
            wheel.extractall(target)
        (target / ".complete").touch()
    return target


def site(version: str) -> Path:
    """transformers==version with its dependencies in a folder of their own, for the probe to import."""
    target = CACHE / f"site-transformers-{version}"
    if not (target / ".complete").exists():
        shutil.rmtree(target, ignore_errors=True)
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-input", "--target", str(target)]
        subprocess.run([*pip, f"transformers=={version}"], check=True)
        if (target / "torch").exists():
            sys.exit(f"installing transformers=={version} pulled torch into {target}: remove it and retry")
        (target / ".complete").touch()
    return target


def timed(
    command: list[str],
    prepare: Callable[[], None] | None = None,
    environment: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> tuple[float, int]:
    """Wall seconds and peak RSS in KiB (of the process tree's largest process, as GNU time reports it). Exits with
    one line where the command fails (exit 2 or more: an error, or 127 for a command not found), rather than timing its
    failure: a bench run without ruff on its path once gave ruff 2 ms."""
    if prepare:
        prepare()
    with tempfile.NamedTemporaryFile("r") as report:
        start = time.perf_counter()
        env = {**os.environ, **(environment or {})}
        time_it = ["/usr/bin/time", "-f", "%M", "-o", report.name, *command]
        ran = subprocess.run(time_it, capture_output=True, env=env, cwd=cwd)
        elapsed = time.perf_counter() - start
        if ran.returncode > 1:  # 1: findings, or a class over the probe's threshold
            last = (ran.stderr.decode(errors="replace").strip().splitlines() or [""])[-1]
            print(f"bench: {shlex.join(command)} exited {ran.returncode}: {last}", file=sys.stderr)
            sys.exit(2)
        return elapsed, int(report.read().split()[-1])


class Row(NamedTuple):
    name: str
    command: list[str]
    baseline: str | None  # the row this one is compared with, in the same run
    prepare: Callable[[], None] | None = None
    environment: dict[str, str] | None = None  # set for the command, beside the bench's own
    cwd: Path | None = None  # where the command runs, when not in the current folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--quick", action="store_true", help="leave out the rows of the whole 5.24.0 package")
    args = parser.parse_args()
    models = args.corpus or corpus() / "transformers" / "models"
    one_file = models / "llama" / "modeling_llama.py"
    rope_lint = [shutil.which("rope-lint")] if shutil.which("rope-lint") else [sys.executable, "-m", "rope_lint"]
    ruff = [shutil.which("ruff") or "ruff", "check", "--select", "E,F", "--no-cache", "--isolated"]
    ruff += ["--output-format", "concise"]
    check = [*rope_lint, "check", "--quiet"]
    floor = [sys.executable, "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())"]
    scratch = Path(tempfile.mkdtemp())
    cache = Path.cwd() / ".rope_lint_cache"

    def fresh_copy(source: Path, name: str) -> Callable[[], None]:
        def copy() -> None:
            shutil.rmtree(scratch / name, ignore_errors=True)
            shutil.copytree(source, scratch / name)

        return copy

    subprocess.run([*check, str(models)], capture_output=True)  # fills the cache for the warm row
    cache_file = max(cache.glob("check-*.json"), key=lambda path: path.stat().st_mtime)
    rows = [
        Row("ruff, whole tree", [*ruff, str(models)], None),
        Row("rope-lint check, whole tree, cold", [*check, "--no-cache", str(models)], "ruff, whole tree"),
        # The cache of the run before holds every file: a run with unchanged files.
        Row("rope-lint check, whole tree, warm", [*check, str(models)], "ruff, whole tree"),
        # What any Python tool must do for the warm row, with no rope-lint code: the floor under its target.
        Row("python, a warm check's floor (warm_floor.py)", [sys.executable, str(REPO / "bench" / "warm_floor.py"),
            str(models), str(cache_file)], "ruff, whole tree"),
        Row("ruff, one file", [*ruff, str(one_file)], None),
        Row("python ast.parse, one file", [*floor, str(one_file)], None),
        Row("rope-lint check, one file", [*check, str(one_file)], "python ast.parse, one file"),
        Row("rope-lint fix --unsafe-fixes, whole tree", [*rope_lint, "fix", "--unsafe-fixes", str(scratch / "models")],
            None, fresh_copy(models, "models")),
    ]  # fmt: skip
    if not args.quick:
        package = corpus("5.24.0") / "transformers"
        # A folder of its own, whose result cache is not the one the 4.37.2 warm row reads.
        own_cache = scratch / "check-5.24.0"
        own_cache.mkdir()
        subprocess.run([*check, str(package)], capture_output=True, cwd=own_cache)  # fills it for the warm row
        rows += [
            Row("ruff, 5.24.0 package", [*ruff, str(package)], None),
            Row("rope-lint check, 5.24.0 package, cold", [*check, "--no-cache", str(package)], "ruff, 5.24.0 package",
                cwd=own_cache),
            Row("rope-lint check, 5.24.0 package, warm", [*check, str(package)], "ruff, 5.24.0 package", cwd=own_cache),
        ]  # fmt: skip
        fix = [*rope_lint, "fix", "--unsafe-fixes", str(scratch / "transformers")]
        rows.append(Row("rope-lint fix --unsafe-fixes, 5.24.0 package", fix, None, fresh_copy(package, "transformers")))
        probe = [*rope_lint, "probe", "transformers", "--trigger", "fp32,zero-init-bf16,to-bf16", "--allow-unmeasured"]
        environment = {"PYTHONPATH": os.pathsep.join([str(REPO), str(site("5.24.0"))])}
        rows.append(Row("rope-lint probe, 5.24.0, 3 conditions", [*probe, "--output-format", "json"], None, None,
                        environment))  # fmt: skip
    for tool, command in (
        ("torchfix", ["torchfix", str(models)]),
        ("fixit", ["fixit", "lint", str(models)]),
        ("semgrep", ["semgrep", "--quiet", "-e", "torch.arange(..., dtype=torch.float)", "-l", "python", str(models)]),
    ):
        if shutil.which(tool):
            rows.append(Row(f"{tool}, whole tree", command, "ruff, whole tree"))
    # Each repetition runs every row once, in turn, so that a machine that slows down mid-run slows every row alike.
    times: dict[str, list[float]] = {row.name: [] for row in rows}
    peaks: dict[str, int] = dict.fromkeys(times, 0)
    for _ in range(args.repeat):
        for row in rows:
            seconds, peak = timed(row.command, row.prepare, row.environment, row.cwd)
            times[row.name].append(seconds)
            peaks[row.name] = max(peaks[row.name], peak)
    shutil.rmtree(scratch)
    files = len(list(models.rglob("*.py")))
    print(f"corpus: {models} ({files} files), {args.repeat} runs each, {os.cpu_count()} cores")
    print(f"cache: {cache}")
    print(f"{'command':<44} {'median s':>9} {'fastest':>8} {'slowest':>8} {'ratio':>6} {'peak MB':>8}")
    for row in rows:
        median = statistics.median(times[row.name])
        # Three decimals: the warm row's target, 0.12, is its ratio's second decimal.
        ratio = f"{median / statistics.median(times[row.baseline]):>6.3f}" if row.baseline else f"{'':>6}"
        spread = f"{min(times[row.name]):>8.3f} {max(times[row.name]):>8.3f}"
        print(f"{row.name:<44} {median:>9.3f} {spread} {ratio} {peaks[row.name] / 1024:>8.0f}")


if __name__ == "__main__":
    main()
