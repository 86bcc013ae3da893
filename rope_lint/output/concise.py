"""One line per finding and nothing else, not even a summary: for scripts and editors that read lines."""

from __future__ import annotations

from rope_lint.diagnostics import Diagnostic
from rope_lint.output.text import line


def render(diagnostics: list[Diagnostic]) -> str:
    return "".join(line(d) + "\n" for d in diagnostics)
