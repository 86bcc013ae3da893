"""Fixed files kept as clean under the project's `ruff check` as they were (DESIGN §5).

A fix can add `import torch` where isort would not put it (I001), or leave a `from torch import exp` that nothing
uses any more (F401). Where the project's own ruff settings report such a code for the fixed file and did not for the
original, ruff's own fix for that code is applied; a code the original already had is left alone, since ruff's fix
would also touch lines that the fix did not. Without ruff, the fix stays as written.
"""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

from rope_lint.fix.formatting import LARGEST_FORMATTED, ruff_command

# The codes a fix can introduce through the imports it adds or the names it stops using.
_IMPORT_CODES = ("I001", "F401")


def imports_tidied(path: Path, original: str, fixed: str) -> str:
    ruff = ruff_command()
    if ruff is None or len(fixed) > LARGEST_FORMATTED:
        return fixed
    introduced = _codes(ruff, path, fixed) - _codes(ruff, path, original)
    if not introduced:
        return fixed
    # --select narrows the run to those codes; the project's other settings (isort's sections) still apply.
    command = [*ruff, "check", "--fix-only", "--quiet", "--select", ",".join(sorted(introduced))]
    tidied = _run([*command, "--stdin-filename", str(path), "-"], fixed)
    try:
        ast.parse(tidied or "")
    except (SyntaxError, ValueError):
        return fixed
    return tidied or fixed


def _codes(ruff: list[str], path: Path, text: str) -> set[str]:
    """The import codes that `ruff check`, with the project's settings, reports for `text` as the file `path`."""
    command = [*ruff, "check", "--output-format", "json", "--quiet", "--stdin-filename", str(path), "-"]
    output = _run(command, text, allowed=(0, 1))
    try:
        return {item["code"] for item in json.loads(output or "[]")} & set(_IMPORT_CODES)
    except (ValueError, KeyError, TypeError):
        return set()


def _run(command: list[str], text: str, allowed: tuple[int, ...] = (0,)) -> str | None:
    try:
        result = subprocess.run(command, input=text, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode in allowed else None
