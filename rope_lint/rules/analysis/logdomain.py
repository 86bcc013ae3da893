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
from rope_lint.rules.analysis import dtypes
from rope_lint.rules.analysis.context import FileContext, FunctionNode, walk

# The functions each op is spelled as. The op's own name is its tensor method (`x.sigmoid()`, `x.sum(d)`).
FUNCTIONS: dict[str, frozenset[str]] = {
    "log": frozenset({"torch.log"}),
    "exp": frozenset({"torch.exp"}),
    "log1p": frozenset({"torch.log1p", "torch.special.log1p"}),
    "sigmoid": frozenset({"torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit"}),
    "softmax": frozenset({"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"}),
    "sum": frozenset({"torch.sum"}),
    "abs": frozenset({"torch.abs"}),
    "square": frozenset({"torch.square"}),
    "relu": frozenset({"torch.relu", "torch.nn.functional.relu"}),
    "neg": frozenset({"torch.neg", "torch.negative"}),
}
# The ops above whose value is never negative, whatever their operand.
_NEVER_NEGATIVE = ("abs", "square", "relu", "exp", "sigmoid")


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


def never_positive(ctx: FileContext, node: ast.expr) -> bool:
    """Whether `node` is at most 0 whatever its operands: a literal, the negation of what is never negative
    (`-x.abs()`, `x.abs().neg()`, `-torch.square(x)`, `-F.relu(x)`), a value less its maximum, and sums of such
    values, and their products and quotients with what is never negative. `exp` of it is at most 1: no overflow."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _never_negative(ctx, node.operand)
    negated = unary_operand(ctx, node, "neg")  # `x.abs().neg()`
    if negated is not None:
        return _never_negative(ctx, negated)
    if shifted_by_its_maximum(ctx, node):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return never_positive(ctx, node.left) and never_positive(ctx, node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div):  # (-x.abs()) / 2, as Python groups it
        left, right = node.left, node.right
        nonpositive_left = never_positive(ctx, left) and _never_negative(ctx, right)
        return nonpositive_left or (_never_negative(ctx, left) and never_positive(ctx, right))
    return isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value <= 0


def shifted_by_its_maximum(ctx: FileContext, node: ast.expr) -> bool:
    """`x - x.amax(d, keepdim=True)`, also with the maximum bound to a name first (`m = x.max(d).values`, then
    `x - m`): at most 0, and 0 where `x` is largest, so the `exp` of it neither overflows nor sums to 0."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)):
        return False
    shift = node.right
    if isinstance(shift, ast.Name):
        function = next(ctx.enclosing_functions(node), None)
        values = dtypes.assigned_values(function, shift.id, before_line=node.lineno) if function else []
        if len(values) != 1:
            return False
        shift = values[0]
    return _maximum_of(ctx, shift, node.left)


def _maximum_of(ctx: FileContext, node: ast.expr, tensor: ast.expr) -> bool:
    """`tensor.amax(...)`, `torch.max(tensor, d).values`, `tensor.max(d)[0]`, `tensor.max().detach()` and the like."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "detach":
        node = node.func.value
    values = isinstance(node, ast.Attribute) and node.attr == "values"
    first = isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == 0
    if values or first:  # the values of `max(x, d)`, not its indices
        node = node.value
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Attribute) and ctx.qualified_name(node.func) is None:
        return node.func.attr in ("max", "amax") and same(node.func.value, tensor)
    name = ctx.qualified_name(node.func)
    return name in ("torch.max", "torch.amax") and bool(node.args) and same(node.args[0], tensor)


def _never_negative(ctx: FileContext, node: ast.expr) -> bool:
    """Whether `node` is at least 0 whatever its operands: a literal, `abs`, `square`, `relu`, `exp` or `sigmoid` of
    anything, an even power, and sums, products and quotients of such values."""
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, float) and node.value >= 0
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "abs" and len(node.args) == 1:
        return node.func.id not in ctx.imported_names  # the builtin, not a name imported over it
    if any(unary_operand(ctx, node, op) is not None for op in _NEVER_NEGATIVE):
        return True
    if not isinstance(node, ast.BinOp):
        return False
    if isinstance(node.op, ast.Pow):
        power = node.right
        return isinstance(power, ast.Constant) and type(power.value) is int and power.value % 2 == 0
    if isinstance(node.op, ast.Mult) and same(node.left, node.right):
        return True
    operands_never_negative = _never_negative(ctx, node.left) and _never_negative(ctx, node.right)
    return isinstance(node.op, ast.Add | ast.Mult | ast.Div) and operands_never_negative


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


def fix(ctx: FileContext, candidates: tuple[str, ...], payload: Callable[[str], tuple]) -> Fix | None:
    """A safe fix that writes the function `candidates` name, as `payload(function)` records it, and imports the
    module the file has no name for (`Fix.adds_import`). None where the file binds the name `torch` to something
    else, so that no spelling of the function is at hand."""
    spelled = reference(ctx, candidates)
    if spelled is None:
        return None
    function, module = spelled
    return Fix(FixSafety.SAFE, payload(function), adds_import=module)


# Calls whose result is integer-valued whatever their operand: rounding to an integer.
_ROUNDING = frozenset({"floor", "ceil", "trunc", "round"})
# Methods and functions that keep an integer-valued operand integer-valued (the operand is the receiver or the first
# argument; the other arguments are dimensions, shapes or devices).
_INTEGRAL_PRESERVING = frozenset(
    {
        "abs", "neg", "unsqueeze", "squeeze", "view", "reshape", "expand", "expand_as", "repeat", "permute",
        "transpose", "contiguous", "clone", "detach", "flatten", "flip", "roll", "cpu", "cuda", "sum", "cumsum",
        "amax", "amin", "repeat_interleave", "t",
    }
)  # fmt: skip
# Casts to any dtype keep integers: an integer converts to an integer in every floating format (exactly below 2^24
# in float32, and above its precision every value of a format is an integer). Casts to an integer dtype make them.
_CASTS = frozenset({"to", "type", "float", "double", "half", "bfloat16"})
_INTEGER_CASTS = frozenset({"long", "int", "short", "byte"})
_INTEGRAL_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)


def rounded_at_once(ctx: FileContext, node: ast.expr) -> bool:
    """Whether the value of `node` is rounded to an integer right away: `torch.round(node)`, `node.floor()`,
    `node.long()`. An error of a unit in the last place of 1 moves no such result, but at a rounding boundary."""
    parent = ctx.parent(node)
    if isinstance(parent, ast.Call) and parent.args and parent.args[0] is node:
        name = ctx.qualified_name(parent.func) or (parent.func.id if isinstance(parent.func, ast.Name) else "")
        return name.removeprefix("torch.").removeprefix("math.") in _ROUNDING
    call = ctx.parent(parent) if isinstance(parent, ast.Attribute) and parent.value is node else None
    rounding = isinstance(call, ast.Call) and call.func is parent and not call.args
    return rounding and parent.attr in _ROUNDING | _INTEGER_CASTS


def is_integral(ctx: FileContext, node: ast.expr, function: FunctionNode | None = None) -> bool:
    """Whether `node` is proven to hold integer values, in an integer dtype or a floating one, by the code of its
    function alone: integer literals; `torch.arange` with an integral start and step (its elements are
    `start + i * step`); any torch call with an integer dtype; `floor`, `ceil`, `trunc` and `round` (without
    `decimals`); casts (`.long()`, `.float()`, `.to(...)`), `abs`, reshaping and `sum` of integers; `+ - * // %` and
    unary minus of integers; a subscript of an integer tensor or of `.shape`; and a local name whose every assignment
    in the function is one of these. A parameter, an attribute, a loop variable or anything else is not proven.
    `function`: the function `node` is in, where the file's index of parents may not reach `node`."""
    function = function or next(ctx.enclosing_functions(node), None)
    return function is not None and _integral(ctx, node, function, 0, frozenset())


def _integral(ctx: FileContext, node: ast.expr, function: FunctionNode, depth: int, assumed: frozenset[str]) -> bool:
    """`assumed`: the names whose assignments are being judged, integral where they are read in their own
    reassignment (`rel = rel.abs()`)."""
    if depth > 8:
        return False
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, bool)
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.USub | ast.UAdd) and _integral(ctx, node.operand, function, depth + 1, assumed)
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, _INTEGRAL_OPERATORS) and all(
            _integral(ctx, side, function, depth + 1, assumed) for side in (node.left, node.right)
        )
    if isinstance(node, ast.Subscript):
        shape = isinstance(node.value, ast.Attribute) and node.value.attr == "shape"
        return shape or _integral(ctx, node.value, function, depth + 1, assumed)
    if isinstance(node, ast.Name):
        if node.id in assumed:
            return True
        values = _local_values(function, node.id)
        inner = assumed | {node.id}
        return bool(values) and all(_integral(ctx, value, function, depth + 1, inner) for value in values)
    if isinstance(node, ast.Call):
        return _integral_call(ctx, node, function, depth, assumed)
    return False


def _integral_call(
    ctx: FileContext, call: ast.Call, function: FunctionNode, depth: int, assumed: frozenset[str]
) -> bool:
    name = ctx.qualified_name(call.func)
    if name == "torch.arange":
        start, step = _start_and_step(call)
        return all(_integral(ctx, bound, function, depth + 1, assumed) for bound in (start, step))
    dtype = next((keyword.value for keyword in call.keywords if keyword.arg == "dtype"), None)
    if name is not None:
        if not name.startswith("torch."):
            return False
        if dtype is not None:
            return dtypes.is_floating_dtype(ctx, dtype) is False
    method = call.func if name is None and isinstance(call.func, ast.Attribute) else None
    operation = method.attr if method else (name or "").removeprefix("torch.")
    operand = method.value if method else next(iter(call.args), None)
    if operation in _ROUNDING:
        return not call.keywords and len(call.args) == (0 if method else 1)
    if method and (operation in _INTEGER_CASTS or operation in ("to", "type")):
        cast = dtype or next((arg for arg in call.args if dtypes.qualified_dtype(ctx, arg) is not None), None)
        if (operation in _INTEGER_CASTS and not call.args) or (
            cast is not None and dtypes.is_floating_dtype(ctx, cast) is False
        ):
            return True
    if not (operation in _INTEGRAL_PRESERVING or (method and operation in _CASTS)):
        return False
    return operand is not None and _integral(ctx, operand, function, depth + 1, assumed)


def _start_and_step(call: ast.Call) -> tuple[ast.expr, ast.expr]:
    """The start and the step of `torch.arange(...)`: its elements are `start + i * step`, whatever its end."""
    keywords = {keyword.arg: keyword.value for keyword in call.keywords}
    args = [arg for arg in call.args if not isinstance(arg, ast.Starred)]
    start = keywords.get("start", args[0] if len(args) >= 2 else ast.Constant(0))
    step = keywords.get("step", args[2] if len(args) >= 3 else ast.Constant(1))
    return start, step


def _local_values(function: FunctionNode, name: str) -> list[ast.expr]:
    """Every value that `function`'s own assignments give `name` (`x += 1` gives `1`, which must be integral as
    well); empty where the name is bound otherwise there too (a parameter, a loop, a `with`, an unpacking), so that
    nothing is proven of it."""
    if name in {argument.arg for argument in walk(function.args) if isinstance(argument, ast.arg)}:
        return []
    values: list[ast.expr] = []
    plain_targets: set[ast.AST] = set()
    stores: list[ast.AST] = []
    for node in walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    plain_targets.add(target)
                    values.append(node.value)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            if node.target.id == name and node.value is not None:
                plain_targets.add(node.target)
                integral_update = isinstance(node, ast.AnnAssign) or isinstance(node.op, _INTEGRAL_OPERATORS)
                values.append(node.value if integral_update else ast.Constant(0.5))
        elif isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
            stores.append(node)
    return values if all(store in plain_targets for store in stores) else []
