"""A progress bar on stderr for long runs, shown only to a person: when stderr is a terminal and not `--quiet`.

The engine maps a function over a list of files and returns when all are done, so a run with a bar checks its
files in slices and advances the bar after each; runs without one go straight through in one call.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from rope_lint import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import TextIO, TypeVar

    T = TypeVar("T")
    R = TypeVar("R")

# Runs this short finish before a bar would be worth reading.
MIN_FILES = 200
_SLICES = 20
# Each slice large enough that the engine still spreads it over all cores (its threshold is 48 files).
_MIN_SLICE = 96


class Progress:
    """`[#####-----] done/total files elapsed`, redrawn in place on one line."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total = total
        self.stream = stream
        self.done = 0
        self.started = time.monotonic()

    def advance(self, count: int) -> None:
        self.done += count
        width = 30
        filled = width * self.done // max(self.total, 1)
        elapsed = time.monotonic() - self.started
        bar = "#" * filled + "-" * (width - filled)
        self.stream.write(f"\r[{bar}] {self.done}/{self.total} files {elapsed:.1f}s")
        self.stream.flush()

    def close(self) -> None:
        # Clear the line, so that what follows on stderr starts clean.
        self.stream.write("\r\033[K")
        self.stream.flush()


def wanted(total: int, quiet: bool) -> bool:
    return not quiet and total >= MIN_FILES and sys.stderr.isatty()


def run(items: list[T], work: Callable[[list[T]], list[R]], quiet: bool) -> list[R]:
    """`work(items)`, in slices with a bar when one is wanted; the results in order either way."""
    if not wanted(len(items), quiet):
        return work(items)
    bar = Progress(len(items), sys.stderr)
    size = max(-(-len(items) // _SLICES), _MIN_SLICE)
    results: list[R] = []
    try:
        for begin in range(0, len(items), size):
            chunk = items[begin : begin + size]
            results.extend(work(chunk))
            bar.advance(len(chunk))
    finally:
        bar.close()
    return results
