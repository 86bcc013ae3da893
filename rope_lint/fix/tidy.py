"""Fixed files kept as clean under the project's `ruff check` as they were.

A fix can add `import torch` where isort would not put it (I001), or leave a `from torch import exp` that nothing
uses any more (F401). Where the project's own ruff settings report such a code for the fixed file and did not for the
original, ruff's own fix for that code is applied; a code the original already had is left alone, since ruff's fix
would also touch lines that the fix did not. Without ruff, the fix stays as written.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

from rope_lint import ruff

# The codes a fix can introduce through the imports it adds or the names it stops using.
_IMPORT_CODES = ("I001", "F401")


def imports_tidied(path: Path, original: str, fixed: str, original_codes: set[str] | None = None) -> str:
    """`fixed` with ruff's fix of each import code it has that `original` has not. `original_codes` are the
    original's, where they were asked already (`original_codes`)."""
    command = ruff.command()
    if command is None or len(fixed) > ruff.LARGEST_TEXT:
        return fixed
    # The original's codes only matter where the fixed text has some: one ruff run for most files, not two.
    introduced = _codes(command, path, fixed)
    if introduced:
        introduced -= original_codes if original_codes is not None else _codes(command, path, original)
    if not introduced:
        return fixed
    # --select narrows the run to those codes; the project's other settings (isort's sections) still apply.
    arguments = ["check", "--fix-only", "--quiet", "--select", ",".join(sorted(introduced))]
    tidied = ruff.run_on_text(command, arguments, path, fixed)
    try:
        ast.parse(tidied or "")
    except (SyntaxError, ValueError):
        return fixed
    return tidied or fixed


def original_codes(paths: list[str]) -> dict[str, set[str]]:
    """The import codes that `ruff check` reports for each file at `paths` (absolute) as it is on disk, in one run:
    what `imports_tidied` asks of an original, for all the files a fix rewrites; none where ruff fails (each file is
    then asked alone)."""
    command = ruff.command()
    output = ruff.run_on_files(command, _CHECK, paths, allowed=(0, 1)) if command else None
    if output is None:
        return {}
    codes: dict[str, set[str]] = {path: set() for path in paths}
    try:
        for item in json.loads(output):
            path = os.path.abspath(item["filename"])
            if path not in codes:
                return {}
            if item["code"] in _IMPORT_CODES:
                codes[path].add(item["code"])
    except (ValueError, KeyError, TypeError):
        return {}
    return codes


# ruff exits with 1 when it reports something.
_CHECK = ["check", "--output-format", "json", "--quiet"]


def _codes(command: list[str], path: Path, text: str) -> set[str]:
    """The import codes that `ruff check`, with the project's settings, reports for `text` as the file `path`."""
    output = ruff.run_on_text(command, _CHECK, path, text, allowed=(0, 1))
    try:
        return {item["code"] for item in json.loads(output or "[]")} & set(_IMPORT_CODES)
    except (ValueError, KeyError, TypeError):
        return set()
