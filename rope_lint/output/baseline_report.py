"""What `rope-lint baseline` prints: on stderr how many findings it wrote where, and on stdout the findings about
the run itself, which a baseline never holds and which must still be seen."""

from __future__ import annotations

from collections import namedtuple

from rope_lint.diagnostics import Diagnostic
from rope_lint.display import printable
from rope_lint.output import counted
from rope_lint.output.text import lines


class BaselineReport(namedtuple("BaselineReport", ("path", "written", "errors"))):
    """A baseline written to `path`, holding `written` findings; `errors` are the findings about the run itself,
    which a baseline never holds."""

    __slots__ = ()
    path: str
    written: int
    errors: list[Diagnostic]


def render(report: BaselineReport) -> str:
    """The standard output of `baseline`."""
    return lines(report.errors)


def written(report: BaselineReport) -> str:
    """The standard error of `baseline`: what it wrote."""
    return f"Wrote {counted(report.written, 'finding')} to {printable(report.path)}.\n"
