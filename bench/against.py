"""Times this checkout's `rope-lint check` against another checkout's, interleaved, on transformers 4.37.2 `models/`.

    python bench/against.py OTHER_CHECKOUT [--repeat 15]

Both run as `python -m rope_lint` with their checkout first on PYTHONPATH, so that the start-up is alike; each
repetition runs every row once, in turn. It prints the median wall time of each row and this checkout's ratio to the
other's: a one-file check of `modeling_llama.py`, and a cold (`--no-cache`) check of the whole tree.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from run import REPO, corpus  # bench/run.py, beside this script: `python bench/against.py` puts bench/ on sys.path


def seconds(checkout: Path, arguments: list[str]) -> float:
    environment = {**os.environ, "PYTHONPATH": str(checkout)}
    command = [sys.executable, "-m", "rope_lint", "check", "--quiet", *arguments]
    start = time.perf_counter()
    subprocess.run(command, capture_output=True, env=environment, cwd=checkout)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    models = corpus()
    rows = {"one file": [str(models / "llama" / "modeling_llama.py")], "whole tree, cold": ["--no-cache", str(models)]}
    checkouts = {"this": REPO, "other": args.other.resolve()}
    times = {(row, name): [] for row in rows for name in checkouts}
    for _ in range(args.repeat):
        for row, arguments in rows.items():
            for name, checkout in checkouts.items():
                times[row, name].append(seconds(checkout, arguments))
    print(f"this: {REPO}\nother: {checkouts['other']}\n{args.repeat} runs each, interleaved")
    print(f"{'row':<20} {'this ms':>9} {'other ms':>9} {'this/other':>11}")
    for row in rows:
        this, other = (statistics.median(times[row, name]) * 1000 for name in checkouts)
        print(f"{row:<20} {this:>9.1f} {other:>9.1f} {this / other:>11.3f}")


if __name__ == "__main__":
    main()
