"""SARIF 2.1.0, the format code-scanning services (GitHub's among them) take in.

One run, with a `rules` entry for every code reported, a result per finding, and the finding's fix as
replacements where it has one. Columns count code points (`columnKind`), as our positions do, and are 1-based.
A file name that is not UTF-8 keeps its bytes in the URI, percent-encoded, and shows them as U+FFFD in text.
The replacements are the edits the run computed for the report (`Report.edits`, see `rope_lint.fix.edits`): this
module only writes them out.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote

from rope_lint import TYPE_CHECKING, __version__
from rope_lint.diagnostics import Diagnostic
from rope_lint.display import lossy
from rope_lint.output import Report
from rope_lint.rules import RULES_BY_CODE, is_informational

if TYPE_CHECKING:
    from rope_lint.fix.edits import Replacement

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def render(report: Report) -> str:
    diagnostics = report.findings
    codes = sorted({d.code for d in diagnostics})
    edits = report.edits if report.edits is not None else [[] for _ in diagnostics]
    log = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "rope-lint",
                        "version": __version__,
                        "rules": [_rule(c, diagnostics) for c in codes],
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": [_result(d, codes.index(d.code), edit) for d, edit in zip(diagnostics, edits, strict=True)],
            }
        ],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _rule(code: str, diagnostics: list[Diagnostic]) -> dict[str, object]:
    rule = RULES_BY_CODE.get(code)
    if rule is None:  # a finding about the run itself (RPL901-RPL903) has no rule class
        name = next(d.name for d in diagnostics if d.code == code)
        return {"id": code, "name": name, "shortDescription": {"text": name}}
    return {
        "id": code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary()},
        # The documentation is markdown already (`rope-lint rule CODE` prints the same text).
        "help": {"text": rule.documentation(), "markdown": rule.documentation()},
        "defaultConfiguration": {"level": _level(code)},
    }


def _level(code: str) -> str:
    return "note" if is_informational(code) else "error"


def _uri(path: str) -> str:
    """Relative paths stay relative (code scanning resolves them against the checkout); absolute ones are URIs."""
    location = Path(path)
    # Quoted from the name's bytes, as `as_uri` quotes them: a name that is not UTF-8 has surrogates in its text.
    return location.as_uri() if location.is_absolute() else quote(os.fsencode(location.as_posix()))


def _result(diagnostic: Diagnostic, rule_index: int, edit: list[Replacement]) -> dict[str, object]:
    start, end = diagnostic.start, diagnostic.end
    region = {
        "startLine": start.line,
        "startColumn": start.column + 1,
        "endLine": end.line,
        "endColumn": end.column + 1,
    }
    result: dict[str, object] = {
        "ruleId": diagnostic.code,
        "ruleIndex": rule_index,
        "level": _level(diagnostic.code),
        "message": {"text": lossy(diagnostic.message)},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(diagnostic.path)}, "region": region}}],
    }
    if diagnostic.fix is not None and edit:
        replacements = [
            {
                "deletedRegion": {"charOffset": replacement.offset, "charLength": replacement.length},
                "insertedContent": {"text": replacement.text},
            }
            for replacement in edit
        ]
        result["fixes"] = [
            {
                "description": {"text": f"{diagnostic.fix.safety.value} fix for {diagnostic.code}"},
                "artifactChanges": [{"artifactLocation": {"uri": _uri(diagnostic.path)}, "replacements": replacements}],
                "properties": {"safety": diagnostic.fix.safety.value},
            }
        ]
    return result
