"""`check --statistics`: how many findings each code has, most first, as ruff's `--statistics` counts them."""

from __future__ import annotations

from collections import Counter

from rope_lint.diagnostics import Diagnostic, FixSafety


def render(diagnostics: list[Diagnostic]) -> str:
    counts = Counter(d.code for d in diagnostics)
    names = {d.code: d.name for d in diagnostics}
    # `[*]` when every finding of the code has a safe fix, as in the text output.
    safe = {
        code
        for code in counts
        if all(d.fix is not None and d.fix.safety is FixSafety.SAFE for d in diagnostics if d.code == code)
    }
    width = len(str(max(counts.values(), default=0)))
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return "".join(
        f"{count:>{width}}  {code}  {'[*]' if code in safe else '   '} {names[code]}\n" for code, count in rows
    )
