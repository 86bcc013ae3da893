"""One line per finding and nothing else, not even a summary: for scripts and editors that read lines."""

from __future__ import annotations

from rope_lint.output import Report
from rope_lint.output.text import lines


def render(report: Report) -> str:
    return lines(report.findings)
