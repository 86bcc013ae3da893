"""GitHub Actions workflow commands, `::error file=…,line=…,col=…,endLine=…,endColumn=…,title=CODE::message`
(`::notice` for an informational rule's finding).

GitHub reads one command a line, so nothing may wrap: values are escaped as the runner expects (`%`, CR and LF
everywhere; `:` and `,` too inside properties), never folded to a terminal width, and the other characters that are
not printable (escape sequences, bytes of a file name that are not UTF-8) as in the text output. Columns are 1-based.
"""

from __future__ import annotations

from rope_lint.diagnostics import Diagnostic
from rope_lint.display import printable
from rope_lint.output import Report
from rope_lint.rules import is_informational


def _data(value: str) -> str:
    return printable(value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _property(value: str) -> str:
    return _data(value).replace(":", "%3A").replace(",", "%2C")


def line(diagnostic: Diagnostic) -> str:
    start, end = diagnostic.start, diagnostic.end
    properties = ",".join(
        f"{key}={_property(str(value))}"
        for key, value in (
            ("file", diagnostic.path),
            ("line", start.line),
            ("col", start.column + 1),
            ("endLine", end.line),
            ("endColumn", end.column + 1),
            ("title", diagnostic.code),
        )
    )
    command = "notice" if is_informational(diagnostic.code) else "error"
    return f"::{command} {properties}::{_data(diagnostic.message)}"


def render(report: Report) -> str:
    return "".join(line(d) + "\n" for d in report.findings)
