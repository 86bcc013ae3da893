"""The one way rope-lint runs ruff: where to find it, and how to run it on a text as if it were a given file.

Formatting a fix, tidying its imports and comparing `# Copied from` copies all run ruff on text that is not on disk
as it is: `--stdin-filename` names the file, so that ruff reads the settings of the project the file is in. Without
ruff, each caller keeps its text as it is.
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
