"""Rewritten code formatted the way the project formats: with ruff and the project's own settings.

Only the regions a fix rewrote are formatted, and only where ruff would have left the original region as it was:
the rest of the file is untouched whatever ruff thinks of it, the project's `ruff format --check` stays as green
as it was, and every copy of a class gets the same result. Without ruff, the fix stays as written.
"""

from __future__ import annotations

import difflib
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path


def ruff_command() -> list[str] | None:
    executable = shutil.which("ruff")
    if executable:
        return [executable]
    return [sys.executable, "-m", "ruff"] if importlib.util.find_spec("ruff") else None


def formatted_like_original(path: Path, original: str, fixed: str) -> str:
    ruff = ruff_command()
    if ruff is None:
        return fixed
    old_lines, new_lines = original.splitlines(keepends=True), fixed.splitlines(keepends=True)
    regions = [
        (old_first, old_last, new_first, new_last)
        for tag, old_first, old_last, new_first, new_last in difflib.SequenceMatcher(
            None, old_lines, new_lines, autojunk=False
        ).get_opcodes()
        if tag != "equal" and new_last > new_first and old_last > old_first
    ]
    # From the bottom up, so that formatting a region moves no region still to do.
    for old_first, old_last, new_first, new_last in reversed(regions):
        if _format_range(ruff, path, original, old_first + 1, old_last) != original:
            continue  # ruff would change the original here: this project does not format like ruff
        formatted = _format_range(ruff, path, fixed, new_first + 1, new_last)
        if formatted is not None:
            fixed = formatted
    return fixed


def _format_range(ruff: list[str], path: Path, text: str, first_line: int, last_line: int) -> str | None:
    # --stdin-filename makes ruff find the project's pyproject.toml / ruff.toml from the file's own folder. A range
    # `A-B` ends at the start of line B, so the end is the line after the last: `A-A` would format nothing.
    lines = f"{first_line}-{last_line + 1}"
    command = [*ruff, "format", "--quiet", "--range", lines, "--stdin-filename", str(path), "-"]
    try:
        result = subprocess.run(command, input=text, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 and result.stdout else None
