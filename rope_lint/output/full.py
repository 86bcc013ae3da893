"""`full`, the default on a terminal: each finding as `text` prints it, then the code it points at, as ruff shows it:
the lines of its range beside their numbers, carets under the range, and its fix as the lines it takes out (`-`) and
puts in (`+`). Then `text`'s closing line.

The code is read from the file the finding names, or is the text that came on standard input (`Report.sources`); a
file that cannot be read shows none. It is shown `printable`, tabs as four spaces, so that the carets stay under what
they mark and a line of code cannot move the cursor. The fix
is the finding's edit in the report (`Report.edits`); a fix the report holds no edit of (past the report's limit, or
one that cannot be applied on its own) names the command that shows it instead.
"""

from __future__ import annotations

import bisect
import itertools
from collections import namedtuple

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import Diagnostic
from rope_lint.display import printable
from rope_lint.engine import text_of
from rope_lint.output import Report
from rope_lint.output.colour import BLUE, BOLD, GREEN, RED, Paint, plain
from rope_lint.output.text import FIX_COMMANDS, line, summary
from rope_lint.rules.analysis.context import physical_lines

if TYPE_CHECKING:
    from rope_lint.fix.edits import Replacement

MAX_RANGE_LINES = 6  # a longer range shows its first lines, then `...`


class _Source(namedtuple("_Source", ("text", "lines", "starts"))):
    """A file's text, its lines as Python numbers them, and the offset in the text where each line starts."""

    __slots__ = ()
    text: str
    lines: list[str]
    starts: list[int]


def render(report: Report, paint: Paint = plain, closing: bool = True) -> str:
    edits = report.edits if report.edits is not None else [[] for _ in report.findings]
    parts = []
    path, source = None, None
    for diagnostic, edit in zip(report.findings, edits, strict=True):
        if diagnostic.path != path:  # findings come by path: one file read at a time
            path, source = diagnostic.path, _source(text_of(diagnostic.path, report.sources))
        parts.append(_finding(diagnostic, edit, source, paint))
    return "".join(parts) + (summary(report.findings) + "\n" if closing else "")


def _source(text: str | None) -> _Source | None:
    if text is None:
        return None
    lines = physical_lines(text)
    return _Source(text, lines, list(itertools.accumulate((len(line) for line in lines), initial=0)))


def _finding(diagnostic: Diagnostic, edit: list[Replacement], source: _Source | None, paint: Paint) -> str:
    """The finding's line, its code with carets under the range, and its fix."""
    code = _code(diagnostic, source)
    changes = _changes(edit, source) if source is not None else []
    width = len(str(max((number for number, _ in [*code, *changes] if number), default=0)))

    def gutter(number: int | str = "") -> str:
        return paint(BLUE, f"{number:>{width}} |")

    shown = [line(diagnostic, paint)]
    if code:
        shown.append(gutter())
        for number, text in code:
            if number is None:  # the caret line
                shown.append(f"{gutter()} {paint(f'{BOLD};{RED}', text)}")
            else:
                shown.append(f"{gutter(number)} {text}".rstrip())
        shown.append(gutter())
    fix = diagnostic.fix
    if fix is not None:
        label = f"{' ' * width} = {fix.safety.value} fix"
        if changes:
            shown.append(f"{label}:")
            shown += [
                paint(GREEN if text[0] == "+" else RED, f"{number:>{width}} {text}".rstrip())
                for number, text in changes
            ]
        else:
            shown.append(f"{label}: `{FIX_COMMANDS[fix.safety]} --diff` shows it")
    return "\n".join(shown) + "\n\n"


def _code(diagnostic: Diagnostic, source: _Source | None) -> list[tuple[int | str | None, str]]:
    """The lines of the finding's range, each with its number, and after the first a caret line (number None) under
    the range: to its end, or to the end of the first line when it goes on; `...` (no number) for lines left out."""
    start, end = diagnostic.start, diagnostic.end
    if source is None or not 1 <= start.line <= len(source.lines):
        return []
    last = end.line - 1 if end.line > start.line and end.column == 0 else end.line  # a range up to a line's start
    numbers = range(start.line, min(last, len(source.lines)) + 1)
    first = _content(source.lines[start.line - 1])
    stop = end.column if len(numbers) == 1 else len(first)
    carets = " " * len(_shown(first[: start.column])) + "^" * max(1, len(_shown(first[start.column : stop])))
    code = [(start.line, _shown(first)), (None, carets)]
    code += [(number, _shown(_content(source.lines[number - 1]))) for number in numbers[1:MAX_RANGE_LINES]]
    if len(numbers) > MAX_RANGE_LINES:
        code.append(("", "..."))
    return code


def _changes(edit: list[Replacement], source: _Source) -> list[tuple[int, str]]:
    """The lines the edit takes out (`- `, numbered as in the file) and puts in (`+ `, numbered as in the fixed
    file)."""
    changes = []
    shift = 0  # how many lines the earlier replacements added, less those they took out
    for replacement in edit:
        first = bisect.bisect_right(source.starts, replacement.offset)
        removed = physical_lines(source.text[replacement.offset : replacement.offset + replacement.length])
        added = physical_lines(replacement.text)
        changes += [(first + i, f"- {_shown(_content(text))}") for i, text in enumerate(removed)]
        changes += [(first + shift + i, f"+ {_shown(_content(text))}") for i, text in enumerate(added)]
        shift += len(added) - len(removed)
    return changes


def _content(line: str) -> str:
    """A line without its end."""
    return line.rstrip("\r\n")


def _shown(code: str) -> str:
    """A piece of a line as printed: `printable`, tabs as four spaces. Character by character, so that the pieces of
    a line are as long printed as the line is."""
    return printable(code.replace("\t", "    "))
