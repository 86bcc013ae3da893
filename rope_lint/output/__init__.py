"""Output: a run's report in, the text to print out.

`check` formats are one module each, with a `render(report: Report) -> str` that gives the whole output: findings,
and the format's own summary where it has one (`full` also takes a `paint`, from `colour`, for a terminal).
`statistics` is the `--statistics` view. `fix_report` and `baseline_report` define and print the reports of
`rope-lint fix` and `rope-lint baseline`. Modules are imported on use, so that the formats a run does not ask for
cost it nothing.

The reports are defined in this stage, where the outputs read them; the run layer (`rope_lint.api`) makes them.
"""

from __future__ import annotations

import importlib
from collections import namedtuple
from collections.abc import Callable
from functools import partial

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import ERROR_CODES, Diagnostic

if TYPE_CHECKING:
    from rope_lint.fix.edits import Replacement

FORMATS = ("full", "text", "concise", "json", "sarif", "github")
# The formats that show each finding's own edit, and of how many fixable findings at most (None: all). The run
# computes edits only for them, a LibCST parse per finding: `full`, read by a person, shows the first screenfuls.
WITH_EDITS: dict[str, int | None] = {"sarif": None, "full": 20}
# The formats that colour what they print on a terminal that takes colour; the others never do.
COLOURED = ("full",)
# The formats that close with a line counting the findings, which `--quiet` leaves out.
SUMMARISED = ("full", "text")


class Report(namedtuple("Report", ("findings", "edits", "sources"), defaults=(None, None))):
    """What a check found, in order; and, when asked for, each finding's edit: `edits[i]` is the replacements of
    `findings[i]`'s fix, empty for a finding without one. A SARIF log made without edits offers no fixes. `sources`
    holds, by path, the text of a file that was checked as it came on standard input, which the outputs show in
    place of the file on disk."""

    __slots__ = ()
    findings: list[Diagnostic]
    edits: list[list[Replacement]] | None  # default None
    sources: dict[str, str] | None  # default None

    @property
    def errors(self) -> list[Diagnostic]:
        """The findings about the run itself (RPL9xx): a file that cannot be read or parsed, a rule that failed."""
        return [d for d in self.findings if d.code in ERROR_CODES]


def renderer(output_format: str, colour: bool = False, quiet: bool = False) -> Callable[[Report], str]:
    """The `render` of a format of `FORMATS`, or of `statistics`; in ANSI colour with `colour`, for the formats
    `COLOURED` names; without the closing line of the formats `SUMMARISED` names with `quiet`."""
    render = importlib.import_module(f"rope_lint.output.{output_format}").render
    if quiet and output_format in SUMMARISED:
        render = partial(render, closing=False)
    if colour and output_format in COLOURED:
        from rope_lint.output.colour import ansi

        return partial(render, paint=ansi)
    return render


def counted(number: int, noun: str) -> str:
    """`1 finding`, `3 findings`: a count and its noun, for the closing lines of every report."""
    return f"{number} {noun}{'s' * (number != 1)}"
