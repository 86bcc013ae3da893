"""The one way rope-lint runs ruff: where to find it, and how to run it on a text as if it were a given file, or on
many files as they are on disk.

Formatting a fix, tidying its imports and comparing `# Copied from` copies all run ruff on text that is not on disk
as it is: `--stdin-filename` names the file, so that ruff reads the settings of the project the file is in. What
ruff says of the files a fix rewrites, as they were, is asked of them on disk, in one run for them all. Without ruff,
each caller keeps its text as it is.
"""

from __future__ import annotations

import functools
import os
import subprocess

from rope_lint import executables

# ruff takes minutes to format some files of several megabytes (tens of thousands of comment lines); the callers
# keep such texts as they are.
LARGEST_TEXT = 1_000_000
_TIMEOUT_S = 60


def command() -> list[str] | None:
    """The ruff installed with rope-lint, else `ruff` in an absolute folder of the PATH; None without ruff. Never
    `python -m ruff`, which would import a `ruff.py` of the current folder (the project being fixed)."""
    executable = _executable(os.environ.get("PATH"))
    return [executable] if executable else None


@functools.lru_cache(maxsize=4)
def _executable(path: str | None) -> str | None:
    # Asked for each file a fix changes, up to three times; the search costs about 1 ms. The PATH is the key.
    return executables.in_environment("ruff") or executables.on_path("ruff")


def run_on_text(
    ruff: list[str], arguments: list[str], path: str | os.PathLike[str], text: str, allowed: tuple[int, ...] = (0,)
) -> str | None:
    """ruff's standard output for `ruff <arguments>` run on `text` as the file `path`; None when ruff fails, times
    out or exits with a status not in `allowed`."""
    # `=`: a file name that starts with `-` stays the option's value.
    full = [*ruff, *arguments, f"--stdin-filename={path}", "-"]
    try:
        result = subprocess.run(full, input=text, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode in allowed else None


def run_on_files(
    ruff: list[str], arguments: list[str], paths: list[str], allowed: tuple[int, ...] = (0,)
) -> str | None:
    """ruff's standard output for `ruff <arguments>` run on the files at `paths` (absolute), as they are on disk, in
    one run and without ruff's cache; None when ruff fails, times out, exits with a status not in `allowed`, or says
    anything on its standard error (a file it could not read or parse). Each file gets the settings that `run_on_text`
    would give its text: ruff runs from the file system's root, whose settings are those of no project, as it reads
    them for a text (a file of no project gets the current folder's settings otherwise). The paths in its output are
    read back with `output_path`."""
    # Each run of `run_on_text` costs about 8 ms, most of it ruff's start; one run for hundreds of files, about 0.1 s.
    full = [*ruff, *arguments, "--no-cache", *paths]
    try:
        result = subprocess.run(full, capture_output=True, text=True, timeout=_TIMEOUT_S, cwd=_ROOT)
    except (OSError, subprocess.SubprocessError, ValueError):  # ValueError: output that is not UTF-8
        return None
    return result.stdout if result.returncode in allowed and not result.stderr else None


def output_path(name: str) -> str:
    """The absolute path of a file that `run_on_files` names in its output: relative to the root, or absolute."""
    return os.path.normpath(os.path.join(_ROOT, name))


_ROOT = os.path.abspath(os.sep)
