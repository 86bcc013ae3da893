"""`--statistics`: how many findings each code has, most first, as ruff's `--statistics` counts them; and
`--show-fixes`: the same counts for each file, of the findings a fix would fix or has fixed."""

from __future__ import annotations

from collections import Counter

from rope_lint.diagnostics import Diagnostic, FixSafety
from rope_lint.display import printable
from rope_lint.output import Report, counted
from rope_lint.output.text import FIX_COMMANDS


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


def by_file(diagnostics: list[Diagnostic], heading: str) -> str:
    """`heading`, then for each file its findings counted per code, as `counts` counts them: ruff's `--show-fixes`
    list. The heading alone, with a full stop, when there are none."""
    if not diagnostics:
        return f"{heading}.\n"
    by_path: dict[str, list[Diagnostic]] = {}  # in the order of the findings: by path
    for diagnostic in diagnostics:
        by_path.setdefault(diagnostic.path, []).append(diagnostic)
    listed = [
        f"- {printable(path)}:\n" + "".join(f"    {row}" for row in counts(found).splitlines(keepends=True))
        for path, found in by_path.items()
    ]
    return f"{heading}:\n" + "".join(listed)


def would_fix(diagnostics: list[Diagnostic], unsafe: bool) -> str:
    """What `check --show-fixes` adds: the findings that `rope-lint fix` (`fix --unsafe-fixes` with `unsafe`) would
    fix, per file."""
    fixable = [d for d in diagnostics if d.fix is not None and (unsafe or d.fix.safety is FixSafety.SAFE)]
    command = FIX_COMMANDS[FixSafety.UNSAFE if unsafe else FixSafety.SAFE]
    return by_file(fixable, f"Would fix {counted(len(fixable), 'finding')} with `{command}`")
