"""What `rope-lint fix` prints: with `--diff` the diff, then the findings left, with `--statistics` the findings
fixed per code and what changed, and a closing count. The files a fix could not be applied to go to stderr."""

from __future__ import annotations

from collections import namedtuple

from rope_lint.diagnostics import Diagnostic
from rope_lint.output import counted
from rope_lint.output.statistics import counts
from rope_lint.output.text import lines


class FixReport(
    namedtuple("FixReport", ("fixed", "remaining", "diff", "failures", "files_changed", "copy_groups", "written"))
):
    """What a fix did: the findings it fixed and those left (findings about the run included); with `written`
    false the files were left as they were and `diff` is what the fix would change, as a unified diff; `failures`
    are the (path, reason) of files a fix could not be applied to; `files_changed` the files rewritten and
    `copy_groups` the `# Copied from` groups checked after the rewrite."""

    __slots__ = ()
    fixed: list[Diagnostic]
    remaining: list[Diagnostic]
    diff: str
    failures: list[tuple[str, str]]
    files_changed: int
    copy_groups: int
    written: bool


def render(report: FixReport, statistics: bool = False) -> str:
    """The standard output of `fix`; `statistics` adds the counts of `--statistics`."""
    parts = [report.diff, lines(report.remaining)]
    if statistics:
        changed, groups = counted(report.files_changed, "file"), counted(report.copy_groups, "copy group")
        parts += [counts(report.fixed), f"{changed} changed, {groups} checked.\n"]
    verb = "Fixed" if report.written else "Would fix"
    parts.append(f"{verb} {counted(len(report.fixed), 'finding')}, {len(report.remaining)} remaining.\n")
    return "".join(parts)


def failures(report: FixReport) -> str:
    """The standard error of `fix`: a line for each file a fix could not be applied to, and why."""
    return "".join(f"rope-lint: {path}: {reason}\n" for path, reason in report.failures)
