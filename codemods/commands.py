"""The codemods as LibCST codemod commands: `python -m libcst.tool codemod -x rope_lint.codemods.commands.<Command>`.

rope-lint runs the rewrites themselves (`apply_codemods`): `libcst.codemod` imports LibCST's matchers, which take
0.17 s to import, in each process of a fix.
"""

from __future__ import annotations

import functools

import libcst as cst
from libcst.codemod import CodemodCommand
from rope_lint.codemods import rope_autocast, rope_tables
from rope_lint.codemods.codemod_file import CodemodFile
from rope_lint.codemods.rope_tables import with_table_on_device

from rope_lint.rules.analysis.callers import PackageCallers


class RopeTablesCommand(CodemodCommand):
    DESCRIPTION = "RoPE tables in float32 on the CPU, kept out of module.to(), cast late in forward."

    @functools.cached_property
    def package(self) -> PackageCallers:
        """What the packages of the files rewritten do with their tables, asked once a package for the whole run."""
        return PackageCallers()

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        return rope_tables.rewrite(tree, CodemodFile(self.context.filename, given_package=self.package))

    def transform_module(self, tree: cst.Module) -> cst.Module:
        """The whole file, as `libcst.tool` gives it: with the definition of `TABLE_ON_DEVICE` where it is read
        through. rope-lint rewrites runs of the file's statements, and adds it to the file."""
        fixed = super().transform_module(tree)
        text, _, _ = with_table_on_device(fixed.code)
        return fixed if text == fixed.code else cst.parse_module(text)


class RopeAutocastCommand(CodemodCommand):
    DESCRIPTION = "RoPE frequency products in forward in float32, with autocast disabled around them."

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        return rope_autocast.rewrite(tree, CodemodFile(self.context.filename))
