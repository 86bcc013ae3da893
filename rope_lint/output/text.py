"""`path:line:col: CODE [*] message`, one finding a line, as ruff prints them, and a closing line that counts them.
Columns are 1-based. Paths and messages are shown `printable`: a file name cannot break a line or forge one."""

from __future__ import annotations

from rope_lint.diagnostics import Diagnostic, FixSafety
from rope_lint.display import printable
from rope_lint.output import Report, counted
from rope_lint.output.colour import BOLD, CYAN, RED, Paint, plain

# The command that applies a fix of each safety.
FIX_COMMANDS = {FixSafety.SAFE: "rope-lint fix", FixSafety.UNSAFE: "rope-lint fix --unsafe-fixes"}


def render(report: Report, closing: bool = True) -> str:
    """The findings, and with `closing` the line that counts them (`--quiet` prints the findings alone, as ruff's)."""
    return lines(report.findings) + (summary(report.findings) + "\n" if closing else "")


def line(diagnostic: Diagnostic, paint: Paint = plain) -> str:
    """`[*]` marks a finding that `rope-lint fix` fixes without `--unsafe-fixes`. `paint` colours the parts (the
    `full` output on a terminal)."""
    fix = diagnostic.fix
    marker = f" {paint(CYAN, '[*]')}" if fix is not None and fix.safety is FixSafety.SAFE else ""
    start = diagnostic.start
    where = f"{paint(BOLD, printable(diagnostic.path))}:{start.line}:{start.column + 1}"
    return f"{where}: {paint(f'{BOLD};{RED}', diagnostic.code)}{marker} {printable(diagnostic.message)}"


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
        parts.append(f"[*] {safe} fixable with `{FIX_COMMANDS[FixSafety.SAFE]}`")
    if unsafe:
        parts.append(f"{unsafe} more with `{FIX_COMMANDS[FixSafety.UNSAFE]}`")
    return f"Found {counted(len(diagnostics), 'finding')}." + (f" {'; '.join(parts)}." if parts else "")
