"""`path:line:col: CODE [*] message`, one finding a line, as ruff prints them, and a closing line that counts them.
Columns are 1-based. Paths and messages are shown `printable`: a file name cannot break a line or forge one."""

from __future__ import annotations

from rope_lint.diagnostics import Diagnostic, FixSafety
from rope_lint.display import printable
from rope_lint.output import Report, counted


def render(report: Report) -> str:
    return lines(report.findings) + summary(report.findings) + "\n"


def line(diagnostic: Diagnostic) -> str:
    """`[*]` marks a finding that `rope-lint fix` fixes without `--unsafe-fixes`."""
    fix = diagnostic.fix
    marker = " [*]" if fix is not None and fix.safety is FixSafety.SAFE else ""
    start = diagnostic.start
    where = f"{printable(diagnostic.path)}:{start.line}:{start.column + 1}"
    return f"{where}: {diagnostic.code}{marker} {printable(diagnostic.message)}"


def lines(diagnostics: list[Diagnostic]) -> str:
    """The findings, one a line, without a summary."""
    return "".join(line(d) + "\n" for d in diagnostics)


def summary(diagnostics: list[Diagnostic]) -> str:
    """The closing line: how many findings, and how many of them `fix` can fix."""
    if not diagnostics:
        return "All checks passed!"
    safe = sum(1 for d in diagnostics if d.fix is not None and d.fix.safety is FixSafety.SAFE)
    unsafe = sum(1 for d in diagnostics if d.fix is not None and d.fix.safety is FixSafety.UNSAFE)
    parts = []
    if safe:
        parts.append(f"[*] {safe} fixable with `rope-lint fix`")
    if unsafe:
        parts.append(f"{unsafe} more with `rope-lint fix --unsafe-fixes`")
    return f"Found {counted(len(diagnostics), 'finding')}." + (f" {'; '.join(parts)}." if parts else "")
