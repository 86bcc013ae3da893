"""Rewritten code formatted the way the project formats: with ruff and the project's own settings.

Only the regions a fix rewrote are formatted, and only where ruff would have left the original region as it was:
the rest of the file is untouched whatever ruff thinks of it, the project's `ruff format --check` stays as green
as it was, and every copy of a class gets the same result. Without ruff, the fix stays as written.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
from pathlib import Path

from rope_lint import ruff
from rope_lint.prefilter.candidates import first_line
from rope_lint.rules.analysis.context import physical_lines, statements_holding


def formatted_like_original(
    path: Path,
    original: str,
    fixed: str,
    regions: list[tuple[int, int, int, int]],
    original_diff: str | None = None,
    formatted_with: dict[tuple[int, int], tuple[int, int]] | None = None,
) -> str:
    """`fixed` with its changed `regions` (old first, old end, new first, new end line indexes, ends exclusive)
    formatted by ruff where ruff leaves the original as it is. `original_diff` is ruff's diff of the original, where
    it was asked already (`original_diffs`). `formatted_with` gives, for a region's old lines (old first, old end),
    the lines of the original that formatting them can change at most (`lines_formatted_with`), where known."""
    command = ruff.command()
    regions = [region for region in regions if region[1] > region[0] and region[3] > region[2]]
    if command is None or not regions or len(fixed) > ruff.LARGEST_TEXT:
        return fixed
    # A file that ruff leaves as it is (its diff is empty) gets the whole fixed text formatted at once: ruff changes
    # only the rewritten lines of it, and two runs cost less than two a region, a run each over the whole text.
    diff = original_diff
    if diff is None:
        arguments = ["format", "--quiet", "--diff", "--range", f"1-{len(physical_lines(original)) + 1}"]
        diff = ruff.run_on_text(command, arguments, path, original, allowed=(0, 1))  # 1: the text would change
    if diff == "":
        return _format_range(command, path, fixed, 1, len(physical_lines(fixed))) or fixed
    reformatted, inserted = _changed_lines(diff or "")
    formatted_with = formatted_with or {}
    # From the bottom up, so that formatting a region moves no region still to do; past the first few, the rest stay
    # as the fix wrote them, since each region costs up to two runs over the whole text.
    for old_first, old_last, new_first, new_last in reversed(regions[-_MOST_REGIONS:]):
        # Where ruff would change the original here (a line of the region itself, or else one of the statements
        # around it, which formatting the region formats too), this project does not format like ruff. The region
        # of the original is formatted only where formatting changes the fixed text: most rewritten regions are
        # written as ruff writes them already, and each run costs about 10 ms. Where the whole file's formatting
        # changes none of the lines that formatting the region could change, ruff's answer for the region is known:
        # formatting a range formats its statements as formatting the whole file does.
        if not reformatted.isdisjoint(range(old_first, old_last)):
            continue
        formatted = _format_range(command, path, fixed, new_first + 1, new_last)
        if formatted not in (None, fixed) and (
            _left_alone(formatted_with.get((old_first, old_last)), reformatted, inserted)
            or _format_range(command, path, original, old_first + 1, old_last) == original
        ):
            fixed = formatted
    return fixed


def lines_formatted_with(tree: ast.Module, lines: list[str], first: int, end: int) -> tuple[int, int] | None:
    """The lines (0-based, end exclusive) of the text of `tree` and `lines` that `ruff format --range` of its lines
    `first` to `end` can change at most: the innermost statement that holds them all, its decorators, and the blank and
    comment lines around it, which ruff formats with the statement. None where no statement holds them."""
    innermost = None
    for holding in statements_holding(tree.body, first + 1, end):
        innermost = holding[0]  # on a line of `;` statements, the first: ruff formats that line with it
    if innermost is None:
        return None
    low, high = first_line(innermost) - 1, innermost.end_lineno or innermost.lineno
    while low > 0 and _blank_or_comment(lines[low - 1]):
        low -= 1
    while high < len(lines) and _blank_or_comment(lines[high]):
        high += 1
    return low, high


def _blank_or_comment(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _left_alone(lines: tuple[int, int] | None, changed: set[int], inserted: set[int]) -> bool:
    """Whether a diff that changes the lines `changed` and inserts lines before each of `inserted` leaves the lines
    `lines` (first, end) as they are, with nothing inserted among them or at their edges; False for unknown lines."""
    if lines is None:
        return False
    first, end = lines
    return changed.isdisjoint(range(first, end)) and not any(first <= at <= end for at in inserted)


# Regions formatted one by one in a file that ruff would change elsewhere.
_MOST_REGIONS = 32


def original_diffs(paths: list[str]) -> dict[str, str]:
    """ruff's diff of each file at `paths` (absolute), formatted whole as it is on disk, in one run: what
    `formatted_like_original` asks of an original, for all the files a fix rewrites. A file that ruff leaves as it is
    has an empty diff; none where ruff fails or its output is not read as expected (each file is then asked alone)."""
    command = ruff.command()
    output = ruff.run_on_files(command, ["format", "--quiet", "--diff"], paths, allowed=(0, 1)) if command else None
    if output is None:
        return {}
    diffs = dict.fromkeys(paths, "")
    lines = output.split("\n")
    index = 0
    while index < len(lines):
        if not lines[index]:  # the blank line after each file's diff
            index += 1
            continue
        end = _diff_end(lines, index)
        path = os.path.abspath(lines[index][4:]) if end is not None else None
        if path not in diffs or diffs[path]:
            return {}
        diffs[path] = "\n".join(lines[index:end]) + "\n"
        index = end
    return diffs


def _diff_end(lines: list[str], start: int) -> int | None:
    """Where the unified diff of one file that starts at `lines[start]` ends: past its two header lines and its hunks,
    each as long as its header says (a removed line may itself start with `---`). None where it is not such a diff."""
    if not (lines[start].startswith("--- ") and start + 1 < len(lines) and lines[start + 1].startswith("+++ ")):
        return None
    index = start + 2
    while index < len(lines) and lines[index].startswith("@@ "):
        counts = _HUNK.match(lines[index])
        if counts is None:
            return None
        old, new = (int(count) if count is not None else 1 for count in counts.groups())
        index += 1
        while (old > 0 or new > 0) and index < len(lines):
            line = lines[index]
            if line.startswith(" "):
                old, new = old - 1, new - 1
            elif line.startswith("-"):
                old -= 1
            elif line.startswith("+"):
                new -= 1
            elif not line.startswith("\\"):  # `\ No newline at end of file` counts as neither
                return None
            index += 1
        if old or new:
            return None
        while index < len(lines) and lines[index].startswith("\\"):
            index += 1
    return index


# A hunk's header: `@@ -first[,count] +first[,count] @@`, a count of 1 left out.
_HUNK = re.compile(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def _changed_lines(diff: str) -> tuple[set[int], set[int]]:
    """The indexes of the lines that a unified diff of one text changes or removes (ruff's `format --diff`), and of
    the lines before which it inserts lines (the line count where it inserts at the end)."""
    removed, inserted, index = set(), set(), 0
    for line in diff.split("\n")[2:]:  # below the two lines that name the file; a form feed splits no line
        if line.startswith("@@ "):  # `@@ -first,count +first,count @@`, 1-based
            index = int(line.split()[1][1:].split(",")[0]) - 1
        elif line.startswith("-"):
            removed.add(index)
            index += 1
        elif line.startswith("+"):
            inserted.add(index)
        elif line.startswith(" "):
            index += 1
    return removed, inserted


def changed_regions(old: list[str], new: list[str]) -> list[tuple[int, int, int, int]]:
    """(old first, old end, new first, new end) line indexes of each changed region of two runs of lines, ends
    exclusive. Meant for the lines of one rewritten run of statements: matching lines costs more than linear time."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return [
        (old_first, old_end, new_first, new_end)
        for tag, old_first, old_end, new_first, new_end in matcher.get_opcodes()
        if tag != "equal"
    ]


def _format_range(command: list[str], path: Path, text: str, first: int, last: int) -> str | None:
    # A range `A-B` ends at the start of line B, so the end is the line after the last: `A-A` would format nothing.
    lines = f"{first}-{last + 1}"
    return ruff.run_on_text(command, ["format", "--quiet", "--range", lines], path, text) or None
