"""SARIF 2.1.0, the format code-scanning services (GitHub's among them) take in.

One run, with a `rules` entry for every code reported, a result per finding, and the finding's fix as
replacements where it has one. Columns count code points (`columnKind`), as our positions do, and are 1-based.
Computing a fix's replacements needs LibCST, so it is imported here only when a finding has a fix: a plain
`check` stays free of it.
"""

from __future__ import annotations

import difflib
import itertools
import json
from functools import partial
from pathlib import Path
from urllib.parse import quote

from rope_lint import __version__
from rope_lint.diagnostics import Diagnostic
from rope_lint.engine import map_files, read
from rope_lint.rules import RULES_BY_CODE

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def render(diagnostics: list[Diagnostic]) -> str:
    codes = sorted({d.code for d in diagnostics})
    fixes = _all_fixes(diagnostics)
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
                "results": [_result(d, codes.index(d.code), fixes.get(d, [])) for d in diagnostics],
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
        "defaultConfiguration": {"level": "error"},
    }


def _uri(path: str) -> str:
    """Relative paths stay relative (code scanning resolves them against the checkout); absolute ones are URIs."""
    location = Path(path)
    return location.as_uri() if location.is_absolute() else quote(location.as_posix())


def _result(diagnostic: Diagnostic, rule_index: int, replacements: list[dict[str, object]]) -> dict[str, object]:
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
        "level": "error",
        "message": {"text": diagnostic.message},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(diagnostic.path)}, "region": region}}],
    }
    if diagnostic.fix is not None and replacements:
        result["fixes"] = [
            {
                "description": {"text": f"{diagnostic.fix.safety.value} fix for {diagnostic.code}"},
                "artifactChanges": [{"artifactLocation": {"uri": _uri(diagnostic.path)}, "replacements": replacements}],
                "properties": {"safety": diagnostic.fix.safety.value},
            }
        ]
    return result


def _all_fixes(diagnostics: list[Diagnostic]) -> dict[Diagnostic, list[dict[str, object]]]:
    """Each fixable finding's replacements, files spread over the cores as `check` spreads them: a LibCST parse
    per finding is the slow part of a SARIF run."""
    by_path: dict[str, list[Diagnostic]] = {}
    for diagnostic in diagnostics:
        if diagnostic.fix is not None:
            by_path.setdefault(str(Path(diagnostic.path)), []).append(diagnostic)
    results = map_files(partial(_file_fixes, by_path=by_path), [Path(path) for path in by_path])
    return {
        d: r
        for path, file_results in zip(by_path, results, strict=True)
        for d, r in zip(by_path[path], file_results, strict=True)
    }


def _file_fixes(path: Path, by_path: dict[str, list[Diagnostic]]) -> list[list[dict[str, object]]]:
    """The replacements of each fixable finding in one file: whole lines, addressed by character offset."""
    from rope_lint.fix.apply import UnsafeResultError, apply_fixes

    findings = by_path[str(path)]
    source = read(path)
    if isinstance(source, Diagnostic):
        return [[] for _ in findings]
    before = source.text.splitlines(keepends=True)
    offsets = [0, *itertools.accumulate(len(line) for line in before)]
    results = []
    for diagnostic in findings:
        try:
            after = apply_fixes(source.text, [diagnostic]).text.splitlines(keepends=True)
        except UnsafeResultError:
            results.append([])
            continue
        matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
        results.append(
            [
                {
                    "deletedRegion": {"charOffset": offsets[i1], "charLength": offsets[i2] - offsets[i1]},
                    "insertedContent": {"text": "".join(after[j1:j2])},
                }
                for tag, i1, i2, j1, j2 in matcher.get_opcodes()
                if tag != "equal"
            ]
        )
    return results
