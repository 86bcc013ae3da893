"""Structural rewrites of model code, as LibCST codemod commands.

One-line rewrites are rule fixes (`rope_lint/rules/`); rewrites of a whole class, such as turning a RoPE
class into fp32-on-CPU tables with a late cast in forward, live here, runnable through `rope-lint fix
--unsafe-fixes` and through `python -m libcst.tool codemod`.

Each command is a plain `CodemodCommand` whose transform runs visitors of its own: a `VisitorBasedCodemodCommand`
gathers its matcher decorators whenever it is made, 18 ms, once for every run of statements that a fix rewrites.
"""

from __future__ import annotations

import ast

import libcst as cst
from libcst.codemod import CodemodContext
from rope_lint.codemods.rope_autocast import RopeAutocastCommand
from rope_lint.codemods.rope_tables import TEXT, TREE, RopeTablesCommand

# The codemods that rule fixes name (a `ClassRewrite` payload's `codemod`), in the order they run.
CODEMODS = {"rope_tables": RopeTablesCommand, "rope_autocast": RopeAutocastCommand}


def apply_codemods(
    module: cst.Module,
    names: list[str],
    filename: str | None = None,
    text: str | None = None,
    tree: ast.Module | None = None,
) -> cst.Module:
    """Run the named codemods on `module`, which is `filename` (whose whole text is `text`, and that text's syntax
    tree `tree`, where given) or a run of its statements. The file's path lets a codemod read what lies outside the
    module, such as the source a `# Copied from` class must stay equal to; its text, the classes a class of the module
    inherits from, and the file's imports."""
    scratch = {TEXT: text, TREE: tree} if text is not None else {}  # a tree of None: `file_tree` parses the text
    for name in sorted(names, key=list(CODEMODS).index):
        context = CodemodContext(filename=filename, scratch=dict(scratch))
        # The command's own transform, without LibCST's metadata pass and deep copy, which it does not need.
        module = CODEMODS[name](context).transform_module_impl(module)
    return module
