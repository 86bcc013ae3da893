"""Structural rewrites of model code, as LibCST codemods.

One-line rewrites are rule fixes (`rope_lint/rules/`); rewrites of a whole class, such as turning a RoPE
class into fp32-on-CPU tables with a late cast in forward, live here, runnable through `rope-lint fix
--unsafe-fixes` and through `python -m libcst.tool codemod`.

Each codemod is a function, `rewrite(module, file)`, that runs visitors of its own. Its LibCST `CodemodCommand`, for
`libcst.tool`, is in `commands`, which rope-lint does not import (see there).
"""

from __future__ import annotations

import ast

import libcst as cst
from rope_lint.codemods import rope_autocast, rope_tables
from rope_lint.codemods.codemod_file import CodemodFile

from rope_lint.rules.analysis.callers import PackageCallers

# The codemods that rule fixes name (a `ClassRewrite` payload's `codemod`), in the order they run.
CODEMODS = {"rope_tables": rope_tables.rewrite, "rope_autocast": rope_autocast.rewrite}


def apply_codemods(
    module: cst.Module,
    names: list[str],
    filename: str | None = None,
    text: str | None = None,
    tree: ast.Module | None = None,
    package: PackageCallers | None = None,
) -> cst.Module:
    """Run the named codemods on `module`, which is `filename` (whose whole text is `text`, and that text's syntax
    tree `tree`, where given) or a run of its statements. The file's path lets a codemod read what lies outside the
    module, such as the source a `# Copied from` class must stay equal to, or code of its package that reads its
    tables (asked of `package`, the run's, where given); its text, the classes a class of the module inherits from,
    and the file's imports."""
    file = CodemodFile(filename, text, tree, package)
    for name in sorted(names, key=list(CODEMODS).index):
        module = CODEMODS[name](module, file)
    return module
