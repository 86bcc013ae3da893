"""What the log-domain rules (RPL301-RPL307) share on the `ast` side.

Each op is matched in both spellings: the function, reached through any import of it (`torch.log(x)`,
`t.log(x)` under `import torch as t`, `log(x)` under `from torch import log`, `F.softmax(x, -1)`), and the tensor
method (`x.log()`). Spellings mix freely within one expression (`torch.log(1 + x.exp())`). A fix names the function
it writes through the file's own imports, and asks for `import torch` only where none reaches it (`fix`); the function
is in the fix's payload, so that the edit writes what detection chose.
"""

from __future__ import annotations

import ast
from collections import namedtuple
from collections.abc import Callable

from rope_lint.diagnostics import Fix, FixSafety
from rope_lint.rules.analysis.context import FileContext

# The functions each op is spelled as. The op's own name is its tensor method (`x.sigmoid()`, `x.sum(d)`).
FUNCTIONS: dict[str, frozenset[str]] = {
    "log": frozenset({"torch.log"}),
    "exp": frozenset({"torch.exp"}),
    "log1p": frozenset({"torch.log1p", "torch.special.log1p"}),
    "sigmoid": frozenset({"torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit"}),
    "softmax": frozenset({"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"}),
    "sum": frozenset({"torch.sum"}),
}


def is_method_spelling(ctx: FileContext, call: ast.Call) -> bool:
    """`x.exp()`: an attribute call whose receiver is no module reached through an import (`torch.exp`, `np.exp`)."""
    return isinstance(call.func, ast.Attribute) and ctx.qualified_name(call.func) is None


def calls(ctx: FileContext, op: str) -> list[ast.Call]:
    """The calls of `op` in either spelling, in source order. Which of them fit an op's arguments is `unary_operand`'s
    and `reduction`'s to say."""
    found = [call for name in sorted(FUNCTIONS[op]) for call in ctx.calls(name)]
    found += [call for call in ctx.method_calls(op) if is_method_spelling(ctx, call)]
    return sorted(found, key=lambda call: (call.lineno, call.col_offset))


def unary_operand(ctx: FileContext, node: ast.AST | None, op: str) -> ast.expr | None:
    """`x` when `node` is `op(x)` (one positional argument and nothing else) or `x.op()`."""
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Attribute) and node.func.attr == op and is_method_spelling(ctx, node):
        return node.func.value if not node.args and not node.keywords else None
    if (
        ctx.qualified_name(node.func) in FUNCTIONS[op]
        and len(node.args) == 1
        and not node.keywords
        and not isinstance(node.args[0], ast.Starred)
    ):
        return node.args[0]
    return None


class Reduction(namedtuple("Reduction", ("operand", "method", "args", "keywords", "function"))):
    """`torch.sum(x, d)` or `x.sum(d)`: the operand, the spelling, and the arguments besides the operand."""

    __slots__ = ()
    operand: ast.expr
    method: bool
    args: list[ast.expr]
    keywords: list[ast.keyword]
    function: str | None  # the qualified name of a function spelling

    def has_dim(self) -> bool:
        return bool(self.args) or any(keyword.arg == "dim" for keyword in self.keywords)


def reduction(ctx: FileContext, node: ast.AST | None, op: str) -> Reduction | None:
    """`node` as a call of `op` that takes a dimension (sum, softmax), in either spelling."""
    if not isinstance(node, ast.Call):
        return None
    if any(isinstance(arg, ast.Starred) for arg in node.args) or any(kw.arg is None for kw in node.keywords):
        return None
    if isinstance(node.func, ast.Attribute) and node.func.attr == op and is_method_spelling(ctx, node):
        return Reduction(node.func.value, True, node.args, node.keywords, None)
    name = ctx.qualified_name(node.func)
    if name in FUNCTIONS[op] and node.args:
        return Reduction(node.args[0], False, node.args[1:], node.keywords, name)
    return None


def is_one(node: ast.AST | None) -> bool:
    """The literal `1` or `1.0`: `log(1 + x)`, not `log(x + 1e-8)` and not `log(True + x)`."""
    return isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value == 1


def one_plus(node: ast.AST | None) -> ast.expr | None:
    """`x` when `node` is `1 + x` or `x + 1`."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        if is_one(node.left):
            return node.right
        if is_one(node.right):
            return node.left
    return None


def same(left: ast.AST, right: ast.AST) -> bool:
    """The same expression, whatever its position, spacing, or use as a target (`x += y` against `x.add_(y)`)."""
    return ast.unparse(left) == ast.unparse(right)


def softplus_argument(ctx: FileContext, call: ast.Call) -> ast.expr | None:
    """`x` when `call` is `log(1 + exp(x))`, `log(exp(x) + 1)` or `log1p(exp(x))`, in any spelling."""
    inner = one_plus(unary_operand(ctx, call, "log"))
    if inner is None:
        inner = unary_operand(ctx, call, "log1p")
    return unary_operand(ctx, inner, "exp")


class ShiftedMerge(namedtuple("ShiftedMerge", ("node", "base", "other", "base_side"))):
    """`a + log(1 + exp(b - a))`, the sum in either order."""

    __slots__ = ()
    node: ast.BinOp
    base: ast.expr  # a
    other: ast.expr  # b
    base_side: str  # "left" or "right": where `a` stands in `node`


def shifted_merge(ctx: FileContext, call: ast.Call) -> ShiftedMerge | None:
    """The merge around `call` when it is the log (or log1p) of `a + log(1 + exp(b - a))`."""
    shift = softplus_argument(ctx, call)
    parent = ctx.parent(call)
    if not (isinstance(shift, ast.BinOp) and isinstance(shift.op, ast.Sub)):
        return None
    if not (isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Add)):
        return None
    base_side, base = ("right", parent.right) if parent.left is call else ("left", parent.left)
    return ShiftedMerge(parent, base, shift.left, base_side) if same(base, shift.right) else None


def is_shift_added_back(ctx: FileContext, log_call: ast.Call, shifted: list[ast.expr]) -> bool:
    """The max-shift idiom `m + log(... exp(x - m) ...)`: every operand of `exp` subtracts the `m` that is added back.

    It is written so only to be stable (with `m` the maximum), so the rules leave it alone.
    """
    parent = ctx.parent(log_call)
    if not (isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Add)):
        return False
    added = parent.right if parent.left is log_call else parent.left
    return all(isinstance(x, ast.BinOp) and isinstance(x.op, ast.Sub) and same(x.right, added) for x in shifted)


def reference(ctx: FileContext, candidates: tuple[str, ...]) -> tuple[str, str | None] | None:
    """How a fix writes one of the equivalent functions `candidates` (in order of preference), and the module it must
    import to do so.

    The first candidate that the file's imports reach, through the most specific of them (`F.softplus` under
    `import torch.nn.functional as F`, `torch.nn.functional.softplus` under `import torch` alone, `softplus` under
    `from torch.nn.functional import softplus`); where none reaches one, the first spelled out, with "torch" to
    import. None when the file binds the name `torch` to something else.
    """
    for qualified in candidates:
        parts = qualified.split(".")
        for length in range(len(parts), 0, -1):
            alias = ctx.module_alias(".".join(parts[:length]))
            if alias is not None:
                return ".".join([alias, *parts[length:]]), None
    if "torch" in ctx.imported_names:
        return None
    return candidates[0], "torch"


class WriteFunction(namedtuple("WriteFunction", ("function",))):
    """The fix payload of a rule that replaces the matched expression with one call of `function`."""

    __slots__ = ()
    function: str  # as the file's imports spell it (`reference`)


class WriteReduction(namedtuple("WriteReduction", ("function", "method_spelling"))):
    """The fix payload of a rule that rewrites a reduction (`sum`, `softmax`) as a call of `function`, which takes the
    reduction's arguments: the receiver of the method spelling (`x.sum(d)`) becomes the first."""

    __slots__ = ()
    function: str
    method_spelling: bool


def fix(ctx: FileContext, candidates: tuple[str, ...], payload: Callable[[str], tuple]) -> Fix | None:
    """A safe fix that writes the function `candidates` name, as `payload(function)` records it, and imports the
    module the file has no name for (`Fix.adds_import`). None where the file binds the name `torch` to something
    else, so that no spelling of the function is at hand."""
    spelled = reference(ctx, candidates)
    if spelled is None:
        return None
    function, module = spelled
    return Fix(FixSafety.SAFE, payload(function), adds_import=module)
