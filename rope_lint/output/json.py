"""A JSON list of findings. Lines are 1-based and columns 1-based, as in the text output. A file name's bytes that are
not UTF-8 are U+FFFD (`lossy`): the output is valid Unicode JSON whatever the names."""

from __future__ import annotations

import json

from rope_lint.diagnostics import Diagnostic
from rope_lint.display import lossy
from rope_lint.output import Report


def as_dict(diagnostic: Diagnostic) -> dict[str, object]:
    return {
        "code": diagnostic.code,
        "name": diagnostic.name,
        "message": lossy(diagnostic.message),
        "path": lossy(diagnostic.path),
        "start": {"line": diagnostic.start.line, "column": diagnostic.start.column + 1},
        "end": {"line": diagnostic.end.line, "column": diagnostic.end.column + 1},
        "fix": None if diagnostic.fix is None else {"available": True, "safety": diagnostic.fix.safety.value},
    }


def render(report: Report) -> str:
    return json.dumps([as_dict(d) for d in report.findings], indent=2) + "\n"
