"""Rewritten code formatted the way the project formats: with ruff and the project's own settings.

Only the regions a fix rewrote are formatted, and only where ruff would have left the original region as it was:
the rest of the file is untouched whatever ruff thinks of it, the project's `ruff format --check` stays as green
as it was, and every copy of a class gets the same result. Without ruff, the fix stays as written.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from rope_lint import ruff
from rope_lint.rules.analysis.context import physical_lines


def formatted_like_original(path: Path, original: str, fixed: str, regions: list[tuple[int, int, int, int]]) -> str:
    """`fixed` with its changed `regions` (old first, old end, new first, new end line indexes, ends exclusive)
    formatted by ruff where ruff leaves the original as it is."""
    command = ruff.command()
    regions = [region for region in regions if region[1] > region[0] and region[3] > region[2]]
    if command is None or not regions or len(fixed) > ruff.LARGEST_TEXT:
        return fixed
    # A file that ruff leaves as it is (its diff is empty) gets the whole fixed text formatted at once: ruff changes
    # only the rewritten lines of it, and two runs cost less than two a region, a run each over the whole text.
    arguments = ["format", "--quiet", "--diff", "--range", f"1-{len(physical_lines(original)) + 1}"]
    diff = ruff.run_on_text(command, arguments, path, original, allowed=(0, 1))  # 1: the text would change
    if diff == "":
        return _format_range(command, path, fixed, 1, len(physical_lines(fixed))) or fixed
    reformatted = _removed_lines(diff or "")
    # From the bottom up, so that formatting a region moves no region still to do; past the first few, the rest stay
    # as the fix wrote them, since each region costs up to two runs over the whole text.
    for old_first, old_last, new_first, new_last in reversed(regions[-_MOST_REGIONS:]):
        # Where ruff would change the original here (a line of the region itself, or else one of the statements
        # around it, which formatting the region formats too), this project does not format like ruff. The region
        # of the original is formatted only where formatting changes the fixed text: most rewritten regions are
        # written as ruff writes them already, and each run costs about 10 ms.
        if not reformatted.isdisjoint(range(old_first, old_last)):
            continue
        formatted = _format_range(command, path, fixed, new_first + 1, new_last)
        if (
            formatted not in (None, fixed)
            and _format_range(command, path, original, old_first + 1, old_last) == original
        ):
            fixed = formatted
    return fixed


# Regions formatted one by one in a file that ruff would change elsewhere.
_MOST_REGIONS = 32


def _removed_lines(diff: str) -> set[int]:
    """The indexes of the lines that a unified diff of one text changes or removes (ruff's `format --diff`)."""
    removed, index = set(), 0
    for line in diff.split("\n")[2:]:  # below the two lines that name the file; a form feed splits no line
        if line.startswith("@@ "):  # `@@ -first,count +first,count @@`, 1-based
            index = int(line.split()[1][1:].split(",")[0]) - 1
        elif line.startswith("-"):
            removed.add(index)
            index += 1
        elif line.startswith(" "):
            index += 1
    return removed


def changed_regions(old: list[str], new: list[str]) -> list[tuple[int, int, int, int]]:
    """(old first, old end, new first, new end) line indexes of each changed region of two runs of lines, ends
    exclusive. Meant for the lines of one rewritten run of statements: matching lines costs more than linear time."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return [
        (old_first, old_end, new_first, new_end)
        for tag, old_first, old_end, new_first, new_end in matcher.get_opcodes()
        if tag != "equal"
    ]


def _format_range(command: list[str], path: Path, text: str, first_line: int, last_line: int) -> str | None:
    # A range `A-B` ends at the start of line B, so the end is the line after the last: `A-A` would format nothing.
    lines = f"{first_line}-{last_line + 1}"
    return ruff.run_on_text(command, ["format", "--quiet", "--range", lines], path, text) or None
