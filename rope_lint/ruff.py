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
from rope_lint.config import parsed_toml

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
    """ruff's standard output for `ruff <arguments>` run on the files at `paths` (absolute, each one that
    `with_settings_as_for_text` keeps), as they are on disk, in one run and without ruff's cache; None when ruff fails,
    times out, exits with a status not in `allowed`, or says anything on its standard error (a file it could not read
    or parse). It names the files relative to the current folder where they lie below it (`os.path.abspath` reads
    them back)."""
    # Each run of `run_on_text` costs about 8 ms, most of it ruff's start; one run for hundreds of files, about 0.1 s.
    full = [*ruff, *arguments, "--no-cache", *paths]
    try:
        result = subprocess.run(full, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError, ValueError):  # ValueError: output that is not UTF-8
        return None
    return result.stdout if result.returncode in allowed and not result.stderr else None


def with_settings_as_for_text(paths: list[str]) -> list[str]:
    """Those of `paths` (absolute) for whose file on disk ruff reads the same settings as for its text
    (`run_on_text`). For either, the settings of the nearest project above the file; for a file of no project, its
    text gets the user's or ruff's own, but the file on disk those of the project that the current folder is in,
    where it is in one."""
    projects: dict[str, bool] = {}

    def in_project(folder: str) -> bool:
        if folder not in projects:
            parent = os.path.dirname(folder)
            projects[folder] = _has_settings(folder) or (parent != folder and in_project(parent))
        return projects[folder]

    if not in_project(os.getcwd()):
        return paths
    return [path for path in paths if in_project(os.path.dirname(path))]


def _has_settings(folder: str) -> bool:
    """Whether the folder holds ruff settings, as ruff looks for them: a `ruff.toml` or `.ruff.toml`, or a
    `pyproject.toml` with a `[tool.ruff]` table."""
    if any(os.path.isfile(os.path.join(folder, name)) for name in ("ruff.toml", ".ruff.toml")):
        return True
    try:
        with open(os.path.join(folder, "pyproject.toml"), encoding="utf-8") as file:
            tool = parsed_toml(file.read()).get("tool")
    except (OSError, ValueError, RecursionError):  # none, or one that ruff cannot read either
        return False
    return isinstance(tool, dict) and "ruff" in tool
