"""Rewritten code formatted the way the project formats: with ruff and the project's own settings.

Only where the file was ruff-formatted before the fix: then formatting the fixed file changes only what the fix
wrote, and the project's `ruff format --check` stays green. Elsewhere, or without ruff, the fix stays as written.
"""

from __future__ import annotations

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
    # --stdin-filename makes ruff find the project's pyproject.toml / ruff.toml from the file's own folder.
    command = [*ruff, "format", "--quiet", "--stdin-filename", str(path), "-"]
    try:
        check = subprocess.run([*command, "--check"], input=original, capture_output=True, text=True, timeout=60)
        if check.returncode != 0:
            return fixed
        result = subprocess.run(command, input=fixed, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return fixed
    return result.stdout if result.returncode == 0 and result.stdout else fixed
