"""Times `rope-lint fix` on generated files of growing length, each with a finding every few lines.

    python bench/fix_scaling.py [--lines 10000 100000] [--repeat 1]

Each file repeats a function with two findings: `torch.log(torch.exp(a) + torch.exp(b))` (RPL301) and
`torch.arange(n, dtype=torch.float32)` with an end not proven integral (RPL101, which adds `import math`). The fix
should scale linearly: the table gives the wall time, the findings fixed and the seconds per thousand lines, which
stay about the same from one size to the next when it does. Each run fixes a fresh copy in a temporary folder.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FUNCTION = """
def merge_{index}(a, b, n):
    y = torch.log(torch.exp(a) + torch.exp(b))
    t = torch.arange(n, dtype=torch.float32)
    return y, t
"""


def program(lines: int) -> str:
    """A module of about `lines` lines: `import torch`, then one function of two findings every five lines."""
    parts = ["import torch\n"]
    for index in range((lines - 1) // FUNCTION.count("\n")):
        parts.append(FUNCTION.format(index=index))
    return "".join(parts)


def timed_fix(text: str) -> tuple[float, str]:
    """Wall seconds of `rope-lint fix` on a fresh copy of `text`, and its last line of output."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "generated.py"
        path.write_text(text)
        start = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "rope_lint", "fix", str(path)], capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        compile(path.read_text(), str(path), "exec")
    lines = result.stdout.strip().splitlines()
    return elapsed, lines[-1] if lines else result.stderr.strip()[-200:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=1)
    arguments = parser.parse_args()
    print(f"{'lines':>8} {'seconds':>9} {'s / 1k lines':>13}  result")
    for lines in arguments.lines:
        text = program(lines)
        runs = [timed_fix(text) for _ in range(arguments.repeat)]
        seconds = statistics.median(elapsed for elapsed, _ in runs)
        print(f"{text.count(chr(10)):>8} {seconds:>9.1f} {seconds / lines * 1000:>13.2f}  {runs[-1][1]}", flush=True)


if __name__ == "__main__":
    main()
