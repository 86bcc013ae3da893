"""`check --diff-base REF`: only the findings on lines changed since a git ref.

Changed lines are the added or modified lines of `git diff -U0 REF` (the working tree against REF, staged or
not). Files git does not track yet (and does not ignore) count as changed throughout: they are new code too.
A finding counts as changed when any line of its range is.

REF is the user's text: it is resolved to a commit with `git rev-parse --verify --end-of-options` first, so that it
can never be read as an option (`--output=FILE` would have git overwrite FILE), and only the commit's hash reaches
`git diff`. git itself is run from an absolute folder of the PATH, with the options that keep it from running other
programs: no external diff, no textconv filter, no file-system monitor hook.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from rope_lint import TYPE_CHECKING, executables
from rope_lint.diagnostics import ERROR_CODES, Diagnostic

if TYPE_CHECKING:
    from rope_lint.files import FilePath

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
ALL_LINES = None  # for untracked files: every line is new


class GitDiffError(RuntimeError):
    """git is missing, the path is not in a repository, or the ref does not exist."""


def changed_lines(ref: str, cwd: FilePath) -> dict[Path, set[int] | None]:
    """Resolved path -> changed line numbers, or None for a file that is new throughout."""
    try:
        top = Path(_git(["rev-parse", "--show-toplevel"], cwd).strip())
    except GitDiffError as error:
        raise GitDiffError(f"--diff-base needs a git repository: {error}") from None
    commit = _commit(ref, top)
    options = ["-U0", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--dst-prefix=b/"]
    diff = _git(["diff", *options, commit, "--"], top)
    changed: dict[Path, set[int] | None] = {}
    lines: set[int] | None = None
    for text in diff.splitlines():
        if text.startswith("+++ "):
            name = _unquote(text[4:])
            lines = (
                None if name == "/dev/null" else changed.setdefault((top / name.removeprefix("b/")).resolve(), set())
            )
        elif lines is not None and (match := _HUNK.match(text)):
            start, count = int(match[1]), int(match[2] or 1)
            lines.update(range(start, start + count))  # count 0: a pure deletion adds no line
    for name in _git(["ls-files", "--others", "--exclude-standard", "-z"], top).split("\0"):
        if name:
            changed[(top / name).resolve()] = ALL_LINES
    return changed


def on_changed_lines(diagnostics: list[Diagnostic], ref: str, cwd: FilePath) -> list[Diagnostic]:
    """Findings on changed lines; findings about the run itself (RPL9xx) always stay."""
    changed = changed_lines(ref, cwd)

    def kept(diagnostic: Diagnostic) -> bool:
        if diagnostic.code in ERROR_CODES:
            return True
        path = Path(diagnostic.path).resolve()
        if path not in changed:
            return False
        lines = changed[path]
        return lines is ALL_LINES or any(n in lines for n in range(diagnostic.start.line, diagnostic.end.line + 1))

    return [d for d in diagnostics if kept(d)]


def _commit(ref: str, top: FilePath) -> str:
    """The hash of the commit `ref` names; GitDiffError when it names none."""
    try:
        return _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"], top).strip()
    except GitDiffError:
        raise GitDiffError(f"--diff-base {ref!r} is not a commit of the repository at {top}") from None


def _unquote(name: str) -> str:
    """A file name from a diff header. git ends a name holding a space with a tab (for patch(1)), and puts a name
    holding quotes, backslashes or control characters in C quotes, with octal escapes for the bytes."""
    name = name.removesuffix("\t")
    if name.startswith('"') and name.endswith('"'):
        # unicode_escape reads bytes as Latin-1: round-trip through UTF-8 bytes on both sides. Bytes that are not
        # UTF-8 stay surrogates, as os.fsdecode gives them in the paths of the findings.
        escaped = name[1:-1].encode("utf-8", "surrogateescape").decode("unicode_escape")
        return escaped.encode("latin-1").decode("utf-8", "surrogateescape")
    return name


def _git(args: list[str], cwd: FilePath) -> str:
    git = executables.on_path("git")
    if git is None:
        raise GitDiffError("--diff-base needs git, and there is no git on the PATH")
    # core.quotepath=off keeps non-ASCII file names readable in the diff headers; an empty core.fsmonitor runs no
    # hook a repository's configuration may name.
    command = [git, "-c", "core.quotepath=off", "-c", "core.fsmonitor=", *args]
    try:
        # surrogateescape: a file name that is not UTF-8 reads as os.fsdecode reads it.
        result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, errors="surrogateescape", check=False)
    except OSError as error:
        raise GitDiffError(f"cannot run git in {cwd}: {error.strerror or error}") from None
    if result.returncode != 0:
        said = [line.strip() for line in result.stderr.splitlines() if line.strip()]
        raise GitDiffError(f"`git {' '.join(args[:2])}` failed: {said[0] if said else f'exit {result.returncode}'}")
    return result.stdout
