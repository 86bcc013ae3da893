"""`--statistics`: how many findings each code has, most first, as ruff's `--statistics` counts them."""

from __future__ import annotations

from collections import Counter

from rope_lint.diagnostics import Diagnostic, FixSafety
from rope_lint.output import Report


def render(report: Report) -> str:
    return counts(report.findings)


def counts(diagnostics: list[Diagnostic]) -> str:
    """A line per code: its count, `[*]` when every finding of the code has a safe fix (as in the text output), and
    its name."""
    counted = Counter(d.code for d in diagnostics)
    names = {d.code: d.name for d in diagnostics}
    safe = {
        code
        for code in counted
        if all(d.fix is not None and d.fix.safety is FixSafety.SAFE for d in diagnostics if d.code == code)
    }
    width = len(str(max(counted.values(), default=0)))
    rows = sorted(counted.items(), key=lambda item: (-item[1], item[0]))
    return "".join(
        f"{count:>{width}}  {code}  {'[*]' if code in safe else '   '} {names[code]}\n" for code, count in rows
    )
