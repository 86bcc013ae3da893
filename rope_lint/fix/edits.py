"""Each fixable finding's own edit: the replacements that applying its fix alone makes to the file as it is.

A report that shows fixes beside findings (SARIF) needs one edit per finding, not the file that applying them all
gives, so each finding's fix is applied on its own to the file's text. The edit is given as whole lines, addressed
by character offset in that text.
"""

from __future__ import annotations

import difflib
import itertools
from collections import namedtuple
from functools import partial
from pathlib import Path

from rope_lint.diagnostics import Diagnostic
from rope_lint.engine import map_files, text_of
from rope_lint.fix.apply import UnsafeResultError, apply_fixes
from rope_lint.rules.analysis.context import physical_lines


class Replacement(namedtuple("Replacement", ("offset", "length", "text"))):
    """Delete `length` characters at character `offset` of the file's text, and insert `text` there."""

    __slots__ = ()
    offset: int
    length: int
    text: str


def finding_edits(diagnostics: list[Diagnostic], sources: dict[str, str] | None = None) -> list[list[Replacement]]:
    """The replacements of each finding's fix, in the order of `diagnostics`: none for a finding without a fix, in a
    file that cannot be read, or whose fix would leave code that does not parse. A file's text is read, or given by
    path in `sources` (what came on standard input). Files are spread over the cores as `check` spreads them: a
    LibCST parse per finding is the slow part."""
    by_path: dict[str, list[Diagnostic]] = {}
    for diagnostic in diagnostics:
        if diagnostic.fix is not None:
            by_path.setdefault(str(Path(diagnostic.path)), []).append(diagnostic)
    results = map_files(partial(_file_edits, by_path=by_path, sources=sources), [Path(path) for path in by_path])
    edits = {
        d: r
        for path, file_results in zip(by_path, results, strict=True)
        for d, r in zip(by_path[path], file_results, strict=True)
    }
    return [edits.get(d, []) for d in diagnostics]


def _file_edits(
    path: Path, by_path: dict[str, list[Diagnostic]], sources: dict[str, str] | None
) -> list[list[Replacement]]:
    """The replacements of each fixable finding in one file."""
    findings = by_path[str(path)]
    text = text_of(str(path), sources)
    if text is None:
        return [[] for _ in findings]
    before = physical_lines(text)
    offsets = [0, *itertools.accumulate(len(line) for line in before)]
    results = []
    for diagnostic in findings:
        try:
            after = physical_lines(apply_fixes(text, [diagnostic]).text)
        except UnsafeResultError:
            results.append([])
            continue
        matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
        results.append(
            [
                Replacement(offsets[i1], offsets[i2] - offsets[i1], "".join(after[j1:j2]))
                for tag, i1, i2, j1, j2 in matcher.get_opcodes()
                if tag != "equal"
            ]
        )
    return results
