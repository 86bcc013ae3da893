"""What the RPL1xx rules share about `torch.arange` calls: on the text, before parsing, and on the `ast`."""

from __future__ import annotations

import ast
import re

from rope_lint.context import FileContext
from rope_lint.diagnostics import Fix, FixSafety

_BOUND_KEYWORDS = ("start", "end", "step")


# On the text. Most enumerations in model code are `torch.arange(n, dtype=torch.long, device=device)`: telling those
# from the rest on the bytes spares parsing the large `forward`s they sit in.
_INTEGER_DTYPE = re.compile(rb"\bdtype\s*=\s*torch\.(?:long|int64|int32|int16|int8|int|uint8|short|bool)\s*(?:,|$)")
_DTYPE = re.compile(rb"\bdtype\b")
# A digit before `.`, `e` or `j`, or after `.`: what a float literal has (and a few names, which only keep a call).
_MAYBE_FLOAT = re.compile(rb"\d[.eEjJ]|\.\d")
_CHAIN = re.compile(rb"[ \t\r\n\\)]*(?:\[|\.\w+\(|\.\w+)?")
_NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")
_LONGEST_CALL = 4096


def may_be_hazard(data: bytes, position: int) -> bool:
    """Whether the `arange` at `position` can be flagged by an RPL1xx rule, judged on the text alone: False only
    for a call whose bounds hold no float literal, whose dtype is absent or a literal integer one, and that no `/`
    takes as an operand. Anything the text leaves in doubt (a string or comment in the call, an unmatched bracket)
    is True."""
    start = position + len(b"arange")
    if data[start : start + 1] != b"(":
        return True
    end = _closing_bracket(data, start)
    if end is None:
        return True
    arguments = data[start + 1 : end]
    if _MAYBE_FLOAT.search(arguments):
        return True
    if _DTYPE.search(arguments) and not _INTEGER_DTYPE.search(arguments):
        return True
    # A comment can hide the operator on the next or previous line: it keeps the call too.
    return _next_operator(data, end + 1) in (b"/", b"#") or _previous_operator(data, position) in (b"/", b"#")


def _closing_bracket(data: bytes, opening: int) -> int | None:
    """The offset of the bracket that closes the one at `opening`; None past a string, a comment or too far."""
    depth = 0
    for offset in range(opening, min(len(data), opening + _LONGEST_CALL)):
        character = data[offset]
        if character in b"([{":
            depth += 1
        elif character in b")]}":
            depth -= 1
            if depth == 0:
                return offset
        elif character in b"\"'#":
            return None
    return None


def _next_operator(data: bytes, offset: int) -> bytes:
    """The first character after the call and what chains on it (`[...]`, `.to(...)`, `.T`, closing parentheses);
    a bracket it cannot close reads as `/`, which keeps the call."""
    while True:
        chained = _CHAIN.match(data, offset)
        assert chained is not None  # every part is optional
        offset = chained.end()
        opening = data[offset - 1 : offset]
        if opening in (b"[", b"("):
            closing = _closing_bracket(data, offset - 1)
            if closing is None:
                return b"/"
            offset = closing + 1
        elif chained.end() == chained.start():
            return data[offset : offset + 1]


def _previous_operator(data: bytes, position: int) -> bytes:
    """The first character before `torch.arange` and the parentheses around it; `#` where a line it passes ends
    in a comment."""
    offset = position
    while offset > 0 and data[offset - 1] in _NAME_BYTES:  # `torch.` or another spelling of the callee
        offset -= 1
    while offset > 0 and data[offset - 1 : offset] in (b" ", b"\t", b"\n", b"\r", b"\\", b"("):
        offset -= 1
        if data[offset : offset + 1] == b"\n" and b"#" in data[data.rfind(b"\n", 0, offset) + 1 : offset]:
            return b"#"
    return data[offset - 1 : offset]


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


def int64_fix(ctx: FileContext, call: ast.Call, safety: FixSafety) -> Fix | None:
    """The fix that makes `call` an int64 enumeration cast with `.float()` (see `cst_edits.int64_enumeration`).

    None when the file has no name for torch itself to write `torch.int64` with.
    """
    alias = _torch_alias(ctx, call)
    if alias is None:
        return None
    cast = "no" if _is_cast_to_float32(ctx, ctx.parent(call)) else "yes"
    return Fix(safety, (("torch", alias), ("cast", cast)))


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
