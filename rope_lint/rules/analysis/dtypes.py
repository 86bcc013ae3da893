"""Is this dtype floating? Is this tensor floating? Answered from the code around it, without running it.

Every answer is True, False, or None (cannot tell). Rules act only on True, so an unknown stays silent:
a false alarm on `dtype=input_ids.dtype` costs a user more than a missed guess.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from rope_lint.rules.analysis.context import FileContext, FunctionNode, child_nodes, is_self_attribute, walk

FLOATING_DTYPES = frozenset(
    f"torch.{name}" for name in ("float", "float32", "float16", "half", "bfloat16", "float64", "double")
)
FLOAT32_DTYPES = frozenset({"torch.float", "torch.float32"})
FLOAT64_DTYPES = frozenset({"torch.double", "torch.float64"})
INTEGER_DTYPES = frozenset(
    f"torch.{name}" for name in ("int", "int8", "int16", "int32", "int64", "long", "short", "uint8", "bool")
)

# Tensor constructors whose result is floating unless a dtype says otherwise.
_FLOATING_CONSTRUCTORS = frozenset(
    f"torch.{name}" for name in ("randn", "rand", "zeros", "ones", "empty", "full", "linspace", "logspace", "tensor")
)
# Those and the signal windows: made in the default dtype where no `dtype=` is given.
_DEFAULT_DTYPE_CONSTRUCTORS = _FLOATING_CONSTRUCTORS | frozenset(
    f"torch.{name}_window" for name in ("kaiser", "hann", "hamming", "blackman", "bartlett")
)


def made_in_default_dtype(ctx: FileContext, node: ast.AST) -> bool:
    """`torch.ones(n)`, `torch.kaiser_window(k)`: a floating tensor made in the default dtype, bf16 while
    `from_pretrained(torch_dtype=torch.bfloat16)` builds a model."""
    constructor = isinstance(node, ast.Call) and ctx.qualified_name(node.func) in _DEFAULT_DTYPE_CONSTRUCTORS
    return constructor and takes_the_default_dtype(node)


def dtype_argument(call: ast.Call) -> ast.expr | None:
    """The `dtype=` of a call; None where it has none."""
    return next((keyword.value for keyword in call.keywords if keyword.arg == "dtype"), None)


def takes_the_default_dtype(call: ast.Call) -> bool:
    """A factory call with no `dtype=`, or `dtype=None`: its floating result takes the default dtype."""
    dtype = dtype_argument(call)
    return dtype is None or (isinstance(dtype, ast.Constant) and dtype.value is None)


_FLOAT_CASTS = frozenset({"float", "half", "bfloat16", "double"})
_INTEGER_CASTS = frozenset({"long", "int", "short", "bool", "byte"})
# Methods that give indices, int64 whatever their receiver's dtype.
_INDEX_METHODS = frozenset({"argmax", "argmin", "argsort", "nonzero"})
# Sums keep the receiver's kind, not its dtype: a sum of bools counts them in int64, a sum of floats is floating.
_SUMS = frozenset({"sum", "cumsum", "prod", "cumprod"})
_BITWISE_OPERATORS = (ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift)
# Methods that keep their receiver's dtype: `x.view(...)` is floating when `x` is.
DTYPE_PRESERVING_METHODS = frozenset(
    {
        "view", "reshape", "unsqueeze", "squeeze", "expand", "expand_as", "repeat", "permute", "transpose",
        "contiguous", "clone", "detach", "flatten", "narrow", "select", "cpu", "cuda", "flip", "roll",
        "repeat_interleave", "t",
    }
)  # fmt: skip

# Names that hold indices, lengths or masks in model code: `bbox.dtype` and `input_ids.dtype` are integer. A name is
# read by its last held word (`held_words`): `attention_mask`, `position_ids`. (Sets, not patterns: compiling a
# pattern costs more than a small file's check.)
_INTEGER_WORDS = frozenset(
    {
        "id", "ids", "idx", "index", "indices", "length", "lengths", "bbox", "bboxes", "label", "labels", "position",
        "positions", "pos", "count", "counts", "mask", "offset", "offsets", "step", "steps",
    }
)  # fmt: skip
# A name's first word that says it counts things: `num_bands`, `n_freqs`.
_COUNT_WORDS = frozenset({"num", "n"})
# Names that hold activations, embeddings, frequencies or a module's parameters (`self.proj.weight`): floating in any
# model that names them so.
_FLOATING_NAMES = frozenset(
    {"x", "q", "k", "v", "hidden", "query", "key", "value", "logits", "scores", "feature", "features", "emb",
     "inv_freq", "freq", "freqs", "weight", "ratio", "ratios", "boxes"}
)  # fmt: skip
_FLOATING_ENDINGS = (
    "hidden_state", "hidden_states", "_states", "embed", "embeds", "embedding", "embeddings", "_emb", "pixel_values",
    "_weight", "_weights", "_freq", "_freqs", "_scores", "_output", "_ratio", "_ratios", "_boxes",
)  # fmt: skip


def qualified_dtype(ctx: FileContext, node: ast.expr) -> str | None:
    """ "torch.float32" for `torch.float32`, `t.float32` or a bare `float32` imported from torch."""
    name = ctx.qualified_name(node)
    return name if name in FLOATING_DTYPES or name in INTEGER_DTYPES else None


def is_floating_dtype(ctx: FileContext, node: ast.expr, depth: int = 0, *, by_name: bool = True) -> bool | None:
    """Whether the dtype expression `node` is floating. `by_name` false: what the code says alone, where a guess would
    decide (a name's words, a model's `self.dtype`, a parameter named `dtype`), None."""
    if depth > 8:
        return None
    literal = qualified_dtype(ctx, node)
    if literal:
        return literal in FLOATING_DTYPES
    if isinstance(node, ast.Call) and ctx.qualified_name(node.func) == "torch.get_default_dtype":
        return True
    if isinstance(node, ast.Call):
        chosen = chosen_from_literals(ctx, node)
        return None if chosen is None else chosen <= FLOATING_DTYPES
    if isinstance(node, ast.Attribute) and node.attr == "dtype":
        if is_self_attribute(node):
            return _self_dtype_is_floating(ctx, node) if by_name else None
        return is_floating_tensor(ctx, node.value, depth + 1, by_name=by_name)
    if isinstance(node, ast.Name):
        return _name_is_floating(ctx, node, depth, dtype_name=True, by_name=by_name)
    return None


def _self_dtype_is_floating(ctx: FileContext, node: ast.Attribute) -> bool | None:
    """`self.dtype` of a model is the dtype of its parameters; of a tensor subclass, its own, which may be any."""
    cls = ctx.enclosing_class(node)
    if cls is not None and any(ctx.qualified_name(base) == "torch.Tensor" for base in cls.bases):
        return None
    return True


def chosen_from_literals(ctx: FileContext, call: ast.Call) -> frozenset[str] | None:
    """The dtype that a helper picks from literal dtypes alone (`adjust_for_device(torch.float64, ids.device)`): the
    code does not show which it returns, but no activation's or weight's dtype reaches it, so it is explicit, and
    taken as one of those it is given (RPL101's Known problems). None where an argument could carry another dtype:
    one that names a dtype but is no literal, or spread arguments."""
    if any(isinstance(argument, ast.Starred) for argument in call.args) or any(k.arg is None for k in call.keywords):
        return None
    arguments = [*call.args, *(keyword.value for keyword in call.keywords)]
    given = {qualified_dtype(ctx, argument) for argument in arguments}
    others = (argument for argument in arguments if qualified_dtype(ctx, argument) is None)
    if given <= {None} or any(_names_a_dtype(node) for argument in others for node in walk(argument)):
        return None
    return frozenset(given - {None})


def names_a_dtype(ctx: FileContext, node: ast.expr) -> bool:
    """Whether `node` is a dtype: one spelled out (`torch.bfloat16`), the default dtype, or a name or attribute that
    says it holds one (`dtype`, `x.dtype`, `self.compute_dtype`)."""
    if qualified_dtype(ctx, node) is not None:
        return True
    if isinstance(node, ast.Call):
        return ctx.qualified_name(node.func) == "torch.get_default_dtype"
    return _names_a_dtype(node)


def _names_a_dtype(node: ast.AST) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return "dtype" in name.lower()


def is_floating_tensor(ctx: FileContext, node: ast.expr, depth: int = 0, *, by_name: bool = True) -> bool | None:
    """Whether the tensor `node` is floating. `by_name` false: what the code says alone, where a name's words
    (`floating_by_name`) would decide, None."""
    if depth > 8:
        return None
    if isinstance(node, ast.Name):
        return _name_is_floating(ctx, node, depth, dtype_name=False, by_name=by_name)
    if isinstance(node, ast.Attribute):
        if is_self_attribute(node):
            return _self_attribute_is_floating(ctx, node, depth, by_name)
        return _if_by_name(by_name, node.attr)
    if isinstance(node, ast.Subscript):
        return is_floating_tensor(ctx, node.value, depth + 1, by_name=by_name)
    return is_floating_expression(ctx, node, depth + 1, by_name=by_name)


def is_floating_expression(ctx: FileContext, node: ast.expr, depth: int = 0, *, by_name: bool = True) -> bool | None:
    """The dtype class of an expression's result, where the code alone says it (and its operands' names, unless not
    `by_name`)."""
    if depth > 8:
        return None
    if isinstance(node, ast.Compare):
        return False  # a comparison yields bools, tensors' as Python's
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Div):
            return True  # true division always yields a floating result
        if isinstance(node.op, _BITWISE_OPERATORS):
            return False  # defined for integers and bools only
        left = is_floating_tensor(ctx, node.left, depth + 1, by_name=by_name)
        right = is_floating_tensor(ctx, node.right, depth + 1, by_name=by_name)
        return True if True in (left, right) else None
    if isinstance(node, ast.Constant) and isinstance(node.value, float):
        return True
    if isinstance(node, ast.Call):
        name = ctx.qualified_name(node.func)
        dtype = next((kw.value for kw in node.keywords if kw.arg == "dtype"), None)
        if name in _FLOATING_CONSTRUCTORS:
            return True if dtype is None else is_floating_dtype(ctx, dtype, depth + 1, by_name=by_name)
        if name == "torch.arange":
            if dtype is not None:
                return is_floating_dtype(ctx, dtype, depth + 1, by_name=by_name)
            return any(isinstance(arg, ast.Constant) and isinstance(arg.value, float) for arg in node.args)
        if name == "torch.nn.Parameter":
            # A parameter holds its data's dtype: floating unless the data is known not to be (an integer lookup
            # table that is never trained, `nn.Parameter(torch.empty(n, dtype=torch.int32), requires_grad=False)`).
            data = node.args[0] if node.args else next((kw.value for kw in node.keywords if kw.arg == "data"), None)
            return data is None or is_floating_tensor(ctx, data, depth + 1, by_name=by_name) is not False
        if name in ("torch.exp", "torch.sin", "torch.cos", "torch.outer", "torch.einsum"):
            return True
        if isinstance(node.func, ast.Attribute):
            method = node.func.attr
            if method in _FLOAT_CASTS:
                return True
            if method in _INTEGER_CASTS or method in _INDEX_METHODS:
                return False
            if method in ("to", "type") and node.args:
                return is_floating_dtype(ctx, node.args[0], depth + 1, by_name=by_name)
            if method == "type_as" and node.args:
                return is_floating_tensor(ctx, node.args[0], depth + 1, by_name=by_name)
            if method in DTYPE_PRESERVING_METHODS or method in _SUMS:
                return is_floating_tensor(ctx, node.func.value, depth + 1, by_name=by_name)
        return _returns_floating(ctx, node, depth, by_name)
    return None


def _returns_floating(ctx: FileContext, call: ast.Call, depth: int, by_name: bool) -> bool | None:
    """A call of a function of the file, or of a method of the caller's class through `self.`: what its `return`
    statements give, where they agree (`theta = self.scaled(freqs)`, which returns `torch.tensor(..., dtype=
    freqs.dtype)`)."""
    found = _callee(ctx, call)
    if found is None:
        return None
    context, callee = found
    answers = {
        is_floating_tensor(context, node.value, depth + 1, by_name=by_name)
        for node in walk(callee)
        if isinstance(node, ast.Return)
        and node.value is not None
        and next(context.enclosing_functions(node), None) is callee
    }
    return answers.pop() if len(answers) == 1 else None


def _callee(ctx: FileContext, call: ast.Call) -> tuple[FileContext, FunctionNode] | None:
    """The function a call runs, with the context it is read in: the statements that mention its name, parsed
    alone, where its `return` statements are indexed, as the rules' own tree may not index them."""
    # The rules' index of parents may not reach the call: its class is the one whose lines hold it.
    classes = (c for c in ctx.tree.body if isinstance(c, ast.ClassDef) and c.lineno <= call.lineno <= c.end_lineno)
    cls = next(classes, None) if is_self_attribute(call.func) else None
    if isinstance(call.func, ast.Name):
        name = call.func.id
    elif cls is not None:
        name = call.func.attr  # type: ignore[union-attr]
    else:
        return None
    context = ctx.derived(_context_around, name)
    if context is None:
        return None
    scope = context.tree.body
    if cls is not None:
        scope = next((c.body for c in scope if isinstance(c, ast.ClassDef) and c.name == cls.name), [])
    found = [node for node in scope if isinstance(node, FunctionNode) and node.name == name]
    return (context, found[0]) if len(found) == 1 else None


def _context_around(ctx: FileContext, name: str) -> FileContext | None:
    """The file's statements that mention `name`, parsed alone, with their `return` statements indexed; None where
    they do not parse."""
    try:
        tree, occurrences = ctx.parsed_around((name,))
        return FileContext(ctx.path, ctx.source, tree, (name, "return"), occurrences)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def floating_by_name(name: str) -> bool | None:
    """What a tensor's name says of its dtype."""
    if names_a_count(name) or held_words(name).rpartition("_")[2] in _INTEGER_WORDS:
        return False
    if name in _FLOATING_NAMES or name.endswith(_FLOATING_ENDINGS):
        return True
    return None


def _if_by_name(by_name: bool, name: str) -> bool | None:
    return floating_by_name(name) if by_name else None


def held_words(name: str) -> str:
    """The words of a name that say what it holds: those before `_per_`, after which a name gives the unit
    (`num_bands_per_freq` holds a number of bands for each frequency, and no frequencies)."""
    return name.partition("_per_")[0]


def names_a_count(name: str) -> bool:
    """Whether a name says it holds a number of things (`num_bands`, `n_freqs`, `num_bands_per_freq`)."""
    return held_words(name).partition("_")[0] in _COUNT_WORDS


def _name_is_floating(
    ctx: FileContext,
    node: ast.Name,
    depth: int,
    *,
    dtype_name: bool,
    scopes: Iterable[FunctionNode] | None = None,
    by_name: bool = True,
) -> bool | None:
    """Follow a local name to its assignments or its parameter, innermost function first."""
    for function in ctx.enclosing_functions(node) if scopes is None else scopes:
        values = assigned_values(function, node.id, before_line=node.lineno)
        if values:
            if dtype_name:
                answers = {is_floating_dtype(ctx, value, depth + 1, by_name=by_name) for value in values}
            else:
                answers = {is_floating_tensor(ctx, value, depth + 1, by_name=by_name) for value in values}
            if answers == {None} and not dtype_name:
                return _if_by_name(by_name, node.id)  # `word_emb = self.word_emb(ids)`: the name is all there is
            if True in answers and False in answers:
                return None
            return True if True in answers else (False if False in answers else None)
        parameter = parameter_of(function, node.id)
        if parameter is not None:
            argument, default = parameter
            if dtype_name:
                return _dtype_parameter_is_floating(ctx, argument, default, depth, by_name)
            return _if_by_name(by_name, node.id)
    return None


def _dtype_parameter_is_floating(
    ctx: FileContext, argument: ast.arg, default: ast.expr | None, depth: int, by_name: bool
) -> bool | None:
    """A parameter that carries a dtype in model code carries the model's floating dtype, unless it says not."""
    if default is not None and not (isinstance(default, ast.Constant) and default.value is None):
        return is_floating_dtype(ctx, default, depth + 1, by_name=by_name)
    annotation = ctx.qualified_name(argument.annotation) if argument.annotation is not None else None
    if by_name and (annotation == "torch.dtype" or argument.arg == "dtype"):
        return True
    return None


def _self_attribute_is_floating(ctx: FileContext, node: ast.Attribute, depth: int, by_name: bool) -> bool | None:
    """`self.inv_freq`: look at what the class assigns or registers under that name."""
    cls = ctx.enclosing_class(node)
    if cls is not None:
        for method in cls.body:
            if not isinstance(method, FunctionNode):
                continue
            for value in _self_attribute_values(ctx, method, node.attr):
                answer = (
                    _name_is_floating(ctx, value, depth + 1, dtype_name=False, scopes=[method], by_name=by_name)
                    if isinstance(value, ast.Name)
                    else is_floating_expression(ctx, value, depth + 1, by_name=by_name)
                )
                if answer is not None:
                    return answer
    return _if_by_name(by_name, node.attr)


def _self_attribute_values(ctx: FileContext, method: FunctionNode, attribute: str) -> list[ast.expr]:
    """What a method assigns to `self.<attribute>` or registers as buffer `"<attribute>"`."""
    return ctx.derived(_self_attribute_assignments, method).get(attribute, [])


def _self_attribute_assignments(ctx: FileContext, method: FunctionNode) -> dict[str, list[ast.expr]]:
    """Every `self.<name> = value` and `register_buffer("<name>", value)` of a method, by name: one walk of the
    method, however many attributes are asked after."""
    found: dict[str, list[ast.expr]] = {}
    for node in walk(method):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if is_self_attribute(target):
                    found.setdefault(target.attr, []).append(node.value)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "register_buffer"
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.setdefault(node.args[0].value, []).append(node.args[1])
    return found


def assigned_values(function: FunctionNode, name: str, before_line: int) -> list[ast.expr]:
    """Values assigned to `name` in this function (not in nested ones), before the line that reads it."""
    values: list[ast.expr] = []
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, FunctionNode | ast.ClassDef | ast.Lambda):
            continue
        if getattr(node, "lineno", 0) < before_line:
            if isinstance(node, ast.Assign):
                values.extend(value for target in node.targets for value in _values_bound(target, node.value, name))
            elif (
                isinstance(node, ast.AnnAssign)
                and node.value is not None
                and isinstance(node.target, ast.Name)
                and node.target.id == name
            ):
                values.append(node.value)
        # Assignments are statements: the expressions in between need no visit.
        stack.extend(child for child in child_nodes(node) if isinstance(child, _BLOCK_PARTS))
    return values


_BLOCK_PARTS = (ast.stmt, ast.excepthandler, ast.match_case)


def _values_bound(target: ast.expr, value: ast.expr, name: str) -> list[ast.expr]:
    """What `target = value` binds to `name`, through tuple unpacking (`dtype, device = x.dtype, x.device`)."""
    if isinstance(target, ast.Name):
        return [value] if target.id == name else []
    pairs = isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List)
    if pairs and len(target.elts) == len(value.elts):
        return [v for t, e in zip(target.elts, value.elts, strict=True) for v in _values_bound(t, e, name)]
    return []


def parameter_of(function: FunctionNode, name: str) -> tuple[ast.arg, ast.expr | None] | None:
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for argument, default in zip(positional, defaults, strict=True):
        if argument.arg == name:
            return argument, default
    for argument, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if argument.arg == name:
            return argument, default
    return None
