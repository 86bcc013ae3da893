"""What `rope-lint fix` prints: with `--diff` the diff, then the findings left, with `--verify` a line for each class,
function and model checked, with `--statistics` the findings fixed per code and what changed, with `--show-fixes`
those fixed per file, and a closing count. The files a fix could not be applied to go to stderr."""

from __future__ import annotations

from collections import namedtuple

from rope_lint.diagnostics import Diagnostic
from rope_lint.display import printable
from rope_lint.output import counted
from rope_lint.output.statistics import by_file, counts
from rope_lint.output.text import lines

# What `fix --verify` found of one class, function or model.
VERIFIED = "verified"  # the original and the fixed code compute the same in fp32, and the conditions found no harm
FAILED = "failed"  # they differ, or the fixed code fails where the original works: the file is not written
NOT_BUILT = "could not build"  # a class (or model) the original code could not build: nothing proven either way
NOT_CALLED = "could not call"  # a function no arguments could be found for, or a non-rotary class's method


class Verification(namedtuple("Verification", ("path", "line", "name", "status", "detail"))):
    """One class, function or model that `fix --verify` checked: where it is defined, its name, its status (VERIFIED,
    FAILED, NOT_BUILT or NOT_CALLED) and what was measured or why it failed or could not be checked."""

    __slots__ = ()
    path: str
    line: int
    name: str
    status: str
    detail: str

    def render(self) -> str:
        where, detail = f"{printable(self.path)}:{self.line}: {self.name}", printable(self.detail)
        if self.status == FAILED:
            return f"{where} not verified: {detail}\n"
        if self.status == VERIFIED:
            return f"{where} verified ({detail})\n"
        return f"{where} {self.status}: {detail}\n"


class FixReport(
    namedtuple(
        "FixReport",
        ("fixed", "remaining", "diff", "failures", "files_changed", "copy_groups", "written", "verifications"),
        defaults=(None,),
    )
):
    """What a fix did: the findings it fixed and those left (findings about the run included); with `written`
    false the files were left as they were and `diff` is what the fix would change, as a unified diff; `failures`
    are the (path, reason) of files a fix could not be applied to, or whose rewrite failed verification;
    `files_changed` the files rewritten and `copy_groups` the `# Copied from` groups checked after the rewrite;
    `verifications`, with `--verify`, what was checked of each changed file (None without it)."""

    __slots__ = ()
    fixed: list[Diagnostic]
    remaining: list[Diagnostic]
    diff: str
    failures: list[tuple[str, str]]
    files_changed: int
    copy_groups: int
    written: bool
    verifications: list[Verification] | None  # default None

    @property
    def verification_failed(self) -> bool:
        return any(v.status == FAILED for v in self.verifications or ())


def render(report: FixReport, statistics: bool = False, show_fixes: bool = False, quiet: bool = False) -> str:
    """The standard output of `fix`; `statistics` adds the counts of `--statistics`, `show_fixes` the findings fixed
    per file of `--show-fixes`; `quiet` (`--quiet`) leaves out the closing line that counts them."""
    parts = [report.diff, lines(report.remaining)]
    if report.verifications is not None:
        parts += [v.render() for v in report.verifications]
        parts.append(_verification_summary(report.verifications))
    if statistics:
        changed, groups = counted(report.files_changed, "file"), counted(report.copy_groups, "copy group")
        parts += [counts(report.fixed), f"{changed} changed, {groups} checked.\n"]
    verb = "Fixed" if report.written else "Would fix"
    if show_fixes:
        parts.append(by_file(report.fixed, f"{verb} {counted(len(report.fixed), 'finding')}"))
    if not quiet:
        parts.append(f"{verb} {counted(len(report.fixed), 'finding')}, {len(report.remaining)} remaining.\n")
    return "".join(parts)


def _verification_summary(verifications: list[Verification]) -> str:
    checked = {status: sum(v.status == status for v in verifications) for status in (VERIFIED, FAILED)}
    unverifiable = len(verifications) - checked[VERIFIED] - checked[FAILED]
    return f"Verified {checked[VERIFIED]}, {checked[FAILED]} failed, {unverifiable} could not be checked.\n"


def failures(report: FixReport) -> str:
    """The standard error of `fix`: a line for each file a fix could not be applied to, and why."""
    return "".join(f"rope-lint: {printable(path)}: {printable(reason)}\n" for path, reason in report.failures)
