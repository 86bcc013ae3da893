"""The one way rope-lint runs ruff: where to find it, and how to run it on a text as if it were a given file.

Formatting a fix, tidying its imports and comparing `# Copied from` copies all run ruff on text that is not on disk
as it is: `--stdin-filename` names the file, so that ruff reads the settings of the project the file is in. Without
ruff, each caller keeps its text as it is.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

# ruff takes minutes to format some files of several megabytes (tens of thousands of comment lines); the callers
# keep such texts as they are.
LARGEST_TEXT = 1_000_000
_TIMEOUT_S = 60


def command() -> list[str] | None:
    """`ruff` on the PATH, else `python -m ruff` when the ruff package is installed; None without ruff."""
    executable = shutil.which("ruff")
    if executable:
        return [executable]
    return [sys.executable, "-m", "ruff"] if importlib.util.find_spec("ruff") else None


def run_on_text(
    ruff: list[str], arguments: list[str], path: str | os.PathLike[str], text: str, allowed: tuple[int, ...] = (0,)
) -> str | None:
    """ruff's standard output for `ruff <arguments>` run on `text` as the file `path`; None when ruff fails, times
    out or exits with a status not in `allowed`."""
    full = [*ruff, *arguments, "--stdin-filename", str(path), "-"]
    try:
        result = subprocess.run(full, input=text, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode in allowed else None
