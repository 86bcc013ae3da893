"""What the RPL1xx rules share about `torch.arange` calls, on the `ast` (on the text: `screens`)."""

from __future__ import annotations

import ast
from collections import namedtuple

from rope_lint.diagnostics import Fix, FixSafety
from rope_lint.rules.analysis.context import FileContext

_BOUND_KEYWORDS = ("start", "end", "step")


def literal_number(node: ast.expr) -> int | float | None:
    """The value of a numeric literal, including a negated one (`-1.0`)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = literal_number(node.operand)
        return None if value is None else (-value if isinstance(node.op, ast.USub) else value)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    return None


def bounds(call: ast.Call) -> list[ast.expr]:
    """start, end and step, however they were passed."""
    return [*call.args, *(kw.value for kw in call.keywords if kw.arg in _BOUND_KEYWORDS)]


def float_literals(call: ast.Call) -> list[float]:
    return [value for value in map(literal_number, bounds(call)) if isinstance(value, float)]


def is_fractional(call: ast.Call) -> bool:
    """`torch.arange(0, 1, 0.1)` is a genuine floating range, not an enumeration: no rule touches it."""
    return any(not value.is_integer() for value in float_literals(call))


def dtype_argument(call: ast.Call) -> ast.expr | None:
    return next((kw.value for kw in call.keywords if kw.arg == "dtype"), None)


class Int64Enumeration(namedtuple("Int64Enumeration", ("torch", "cast_to_float"))):
    """The fix payload of the arange rules: make the call an int64 enumeration (`edits.int64_enumeration`)."""

    __slots__ = ()
    torch: str  # the name to write `<torch>.int64` with
    cast_to_float: bool  # whether to append `.float()`: False where the call is cast with `.float()` already


def int64_fix(ctx: FileContext, call: ast.Call, safety: FixSafety) -> Fix | None:
    """The fix that makes `call` an int64 enumeration cast with `.float()`.

    None when the file has no name for torch itself to write `torch.int64` with.
    """
    alias = _torch_alias(ctx, call)
    if alias is None:
        return None
    return Fix(safety, Int64Enumeration(alias, cast_to_float=not _is_cast_to_float32(ctx, ctx.parent(call))))


def _torch_alias(ctx: FileContext, call: ast.Call) -> str | None:
    """The name to write `<alias>.int64` with: the one this call reached torch through, else any import of it."""
    func = call.func
    if isinstance(func, ast.Attribute) and ctx.qualified_name(func.value) == "torch":
        return ast.unparse(func.value)
    return ctx.module_alias("torch")


def _is_cast_to_float32(ctx: FileContext, node: ast.AST | None) -> bool:
    """Whether `node` is the `.float` of a `.float()` call: the enumeration is cast already."""
    if not (isinstance(node, ast.Attribute) and node.attr == "float"):
        return False
    call = ctx.parent(node)
    return isinstance(call, ast.Call) and call.func is node and not call.args
