"""Rewritten code formatted the way the project formats: with ruff and the project's own settings.

Only the regions a fix rewrote are formatted, and only where ruff would have left the original region as it was:
the rest of the file is untouched whatever ruff thinks of it, the project's `ruff format --check` stays as green
as it was, and every copy of a class gets the same result. Without ruff, the fix stays as written.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from rope_lint import ruff


def formatted_like_original(path: Path, original: str, fixed: str) -> str:
    command = ruff.command()
    if command is None or len(fixed) > ruff.LARGEST_TEXT:
        return fixed
    regions = _changed_regions(original.splitlines(keepends=True), fixed.splitlines(keepends=True))
    # From the bottom up, so that formatting a region moves no region still to do.
    for old_first, old_last, new_first, new_last in reversed(regions):
        if _format_range(command, path, original, old_first + 1, old_last) != original:
            continue  # ruff would change the original here: this project does not format like ruff
        formatted = _format_range(command, path, fixed, new_first + 1, new_last)
        if formatted is not None:
            fixed = formatted
    return fixed


def _changed_regions(old: list[str], new: list[str]) -> list[tuple[int, int, int, int]]:
    """(old first, old end, new first, new end) line indexes of each changed region, ends exclusive.

    The common head and tail are set aside first: matching 100,000 alike lines (`x = 1`) costs difflib minutes,
    while a fix changes a few lines in between.
    """
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    matcher = difflib.SequenceMatcher(None, old[head : len(old) - tail], new[head : len(new) - tail], autojunk=False)
    return [
        (head + old_first, head + old_end, head + new_first, head + new_end)
        for tag, old_first, old_end, new_first, new_end in matcher.get_opcodes()
        if tag != "equal" and new_end > new_first and old_end > old_first
    ]


def _format_range(command: list[str], path: Path, text: str, first_line: int, last_line: int) -> str | None:
    # A range `A-B` ends at the start of line B, so the end is the line after the last: `A-A` would format nothing.
    lines = f"{first_line}-{last_line + 1}"
    return ruff.run_on_text(command, ["format", "--quiet", "--range", lines], path, text) or None
