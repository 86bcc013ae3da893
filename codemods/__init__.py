"""Structural rewrites of model code, as LibCST codemod commands.

One-line rewrites are rule fixes (`rope_lint/rules/`); rewrites of a whole class, such as turning a RoPE
class into fp32-on-CPU tables with a late cast in forward, live here, runnable through `rope-lint fix
--unsafe-fixes` and through `python -m libcst.tool codemod`.
"""
