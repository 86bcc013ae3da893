"""What the RPL1xx rules share about `torch.arange` calls, on the `ast` (on the text: `screens`).

Whether an int64 enumeration keeps the elements of a floating one is decided here alone (`end_rounding`): the rules
offer an int64 rewrite only where it does, and the rope codemod leaves every enumeration's dtype to them.
"""

from __future__ import annotations

import ast
from collections import namedtuple
from collections.abc import Callable, Iterable, Iterator

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import Fix, FixSafety
from rope_lint.prefilter import candidates
from rope_lint.rules.analysis.context import (
    FileContext,
    FunctionNode,
    any_line_within,
    child_nodes,
    is_self_attribute,
    walk,
)
from rope_lint.rules.analysis.dtypes import (
    FLOAT32_DTYPES,
    assigned_values,
    chosen_from_literals,
    dtype_argument,
    floating_by_name,
    is_floating_dtype,
    names_a_dtype,
    parameter_of,
    qualified_dtype,
)
from rope_lint.rules.payloads import Int64Enumeration, PromotedDtype

if TYPE_CHECKING:
    # How a scope binds a name: ("value", the expression), ("augmented", the AugAssign), ("range", the `range(...)`
    # a loop runs over) or ("integral", None); None stands for a binding that proves nothing.
    Binding = tuple[str, ast.AST | None]
    # The (scope, name) pairs being proven, which a binding that reads its own name may assume.
    Assumed = frozenset[tuple[ast.AST, str]]

_BOUND_KEYWORDS = ("start", "end", "step")
# Calls whose result is an integer whatever their argument: a length, a size, a conversion, a rounding.
_INTEGRAL_FUNCTIONS = frozenset({"len", "int", "round", "math.ceil", "math.floor", "math.trunc"})
_INTEGRAL_METHODS = frozenset({"size", "numel", "dim", "__len__"})
# Arithmetic that keeps integers integers. `//` is not here: it is integral whatever its operands.
_INTEGRAL_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Mod)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (*_FUNCTIONS, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_MAX_DEPTH = 12


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
    """`torch.arange(0, 1, 0.1)` is a genuine floating range, not an enumeration: no rule touches it. A fractional
    start with an integral step (`torch.arange(0.5, n)`) is an enumeration of half-integers: see `fractional_start`."""
    start, end, step = _start_end_step(call)
    if any(_non_integral_literal(bound) for bound in (end, step)):
        return True
    return _non_integral_literal(start) and not (step is None or literal_number(step) is not None)


def fractional_start(call: ast.Call) -> bool:
    """`torch.arange(0.5, n)`: positions offset by a fraction, with an integral step. bf16 holds 0.5, 1.5, ... only
    up to 128, and no int64 enumeration holds them."""
    return _non_integral_literal(_start_end_step(call)[0]) and not is_fractional(call)


def _non_integral_literal(node: ast.expr | None) -> bool:
    value = None if node is None else literal_number(node)
    return value is not None and not float(value).is_integer()


def is_integer_enumeration(ctx: FileContext, call: ast.Call) -> bool:
    """Whether `torch.arange(...)` enumerates in an integer dtype: a literal integer `dtype=`, one the code shows to be
    integral (`input_ids.dtype`), or none, with no bound a Python float (`2.0`, `n * 0.5`), which gives the default
    dtype."""
    dtype = dtype_argument(call)
    if dtype is None:
        return not any(is_python_float(ctx, bound) for bound in bounds(call))
    return is_floating_dtype(ctx, dtype) is False


def cast_after(ctx: FileContext, call: ast.Call) -> tuple[ast.Call, ast.expr | None] | None:
    """The cast chained right onto `call` that gives it a dtype, and what says which: the dtype of `.to(dtype)`,
    `.to(dtype=dtype)`, `.to(device, dtype)` and `.type(dtype)`; the tensor of `.type_as(t)`; None for `.half()` and
    `.bfloat16()`, which name theirs. A `.to(...)` whose arguments name no dtype (a device, or a tensor, as in
    `.to(x)`) is no cast here: `.to(x)` takes `x`'s dtype only where `x` is a tensor."""
    method = ctx.parent(call)
    cast = ctx.parent(method) if isinstance(method, ast.Attribute) else None
    if not (isinstance(cast, ast.Call) and cast.func is method):
        return None
    name = method.attr
    if name in ("half", "bfloat16"):
        return None if cast.args or cast.keywords else (cast, None)
    if name == "type_as":
        return (cast, cast.args[0]) if len(cast.args) == 1 and not cast.keywords else None
    if name not in ("to", "type"):
        return None
    keyword = dtype_argument(cast)
    candidates = [keyword] if keyword is not None else cast.args[:2] if name == "to" else cast.args[:1]
    return next(((cast, node) for node in candidates if names_a_dtype(ctx, node)), None)


# Is the enumeration integral?


def end_rounding(ctx: FileContext, call: ast.Call) -> str | None:
    """How an int64 enumeration keeps the elements of `torch.arange(...)`: "" where its start, end and step are all
    proven integers by the code alone; "ceil" (or "floor", for a negative step) where all but the end are, and the
    step is a literal: `torch.arange(s, math.ceil(e), k)` in int64 has the elements of `torch.arange(s, e, k)` for any
    real `e`, since torch truncates a fractional end of an integer enumeration and ceil((ceil(e) - s) / k) =
    ceil((e - s) / k). None where no int64 enumeration is proven to keep them: `torch.arange(-3, 3 + 0.1, 1)` has 7
    elements in float32 and 6 in int64, and a step of `4 / dim` truncates to 0 ("step must be nonzero").

    Integral are: integer literals and float literals with an integral value; `len(...)`, `int(...)`, `round(...)`,
    `math.ceil/floor/trunc(...)`, `.size(...)`, `.numel()` and `.shape[...]`; `//` of anything, and `+ - * %`, unary
    minus, `max`/`min` and `abs` of integrals; a parameter annotated `int`; and a name whose every binding in its
    scope is one of these (an assignment, an unpacking of `.shape` or `.size()`, a `for` over `range(...)`, an
    augmented assignment). Anything else, an attribute such as `self.max_len` included, is not proven.
    """
    scope = _innermost_scope(ctx, call)
    if scope is None:
        return None
    start, end, step = _start_end_step(call)
    if end is None or not all(_is_integral(ctx, bound, scope, 0, frozenset()) for bound in (start, step) if bound):
        return None
    if _is_integral(ctx, end, scope, 0, frozenset()):
        return ""
    step_value = 1 if step is None else literal_number(step)
    if not step_value:
        return None
    return "ceil" if step_value > 0 else "floor"


def _start_end_step(call: ast.Call) -> tuple[ast.expr | None, ast.expr | None, ast.expr | None]:
    """start, end and step as `torch.arange` reads them: one positional argument is the end."""
    keywords = {kw.arg: kw.value for kw in call.keywords if kw.arg in _BOUND_KEYWORDS}
    positional = list(call.args)
    if len(positional) == 1 and "end" not in keywords:
        positional = [keywords.pop("start", None), positional[0]]
    start, end, step = [*positional, None, None, None][:3]
    return keywords.get("start", start), keywords.get("end", end), keywords.get("step", step)


def _is_integral(ctx: FileContext, node: ast.expr, scope: ast.AST, depth: int, assumed: Assumed) -> bool:
    if depth > _MAX_DEPTH:
        return False
    value = literal_number(node)
    if value is not None:
        return float(value).is_integer()
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.USub | ast.UAdd) and _is_integral(ctx, node.operand, scope, depth + 1, assumed)
    if isinstance(node, ast.BinOp):
        # Floor division of any real numbers, Python's or a tensor's, yields an integral value.
        if isinstance(node.op, ast.FloorDiv):
            return True
        return isinstance(node.op, _INTEGRAL_OPERATORS) and all(
            _is_integral(ctx, operand, scope, depth + 1, assumed) for operand in (node.left, node.right)
        )
    if isinstance(node, ast.Subscript):
        return _is_shape(node.value) and not isinstance(node.slice, ast.Slice)
    if isinstance(node, ast.Call):
        return _is_integral_call(ctx, node, scope, depth, assumed)
    if isinstance(node, ast.Name):
        return _name_is_integral(ctx, node, scope, depth, assumed)
    return False


def _is_shape(node: ast.expr) -> bool:
    """`x.shape`, or `x.size()`: indexed, either gives an int."""
    if isinstance(node, ast.Attribute):
        return node.attr == "shape"
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size"


def _is_integral_call(ctx: FileContext, call: ast.Call, scope: ast.AST, depth: int, assumed: Assumed) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _INTEGRAL_METHODS:
        # `x.size()` with no dimension is a whole shape, no bound; with one it is that dimension's length.
        return func.attr != "size" or bool(call.args or call.keywords)
    name = _callee(ctx, func)
    if name in _INTEGRAL_FUNCTIONS:
        # `round(x, 2)` keeps decimals; with one argument it is an int.
        return not (name == "round" and len(call.args) > 1) and not call.keywords
    if name in ("max", "min", "abs") and call.args and not call.keywords:
        return all(_is_integral(ctx, argument, scope, depth + 1, assumed) for argument in call.args)
    return False


def _callee(ctx: FileContext, func: ast.expr) -> str | None:
    """What a call calls: a builtin's own name (`len`), or the qualified name of an import (`math.ceil`)."""
    return func.id if isinstance(func, ast.Name) and func.id not in ctx.imported_names else ctx.qualified_name(func)


def _name_is_integral(ctx: FileContext, name: ast.Name, scope: ast.AST, depth: int, assumed: Assumed) -> bool:
    """Every binding of the name, in the scope Python resolves it to from `scope`, is integral."""
    return _every_binding(ctx, name, scope, depth, assumed, _binding_is_integral)


def _every_binding(
    ctx: FileContext,
    name: ast.Name,
    scope: ast.AST,
    depth: int,
    assumed: Assumed,
    holds: Callable[[FileContext, Binding, ast.AST, int, Assumed], bool],
) -> bool:
    """Whether `holds` of every binding of the name, in the scope Python resolves it to from `scope`."""
    resolved = _resolving_scope(ctx, name.id, scope)
    if resolved is None:
        return False
    key = (resolved, name.id)
    # A binding that reads the name itself (`n = n + 1`, `n += 2`) holds when the others do: the name had a value
    # from one of them first.
    if key in assumed:
        return True
    bindings = ctx.derived(_bindings_in, resolved)[name.id]
    return all(
        binding is not None and holds(ctx, binding, resolved, depth + 1, assumed | {key}) for binding in bindings
    )


def _binding_is_integral(ctx: FileContext, binding: Binding, scope: ast.AST, depth: int, assumed: Assumed) -> bool:
    kind, node = binding
    if kind == "integral":
        return True
    if kind == "value":
        return _is_integral(ctx, node, scope, depth, assumed)
    if kind == "augmented":
        assert isinstance(node, ast.AugAssign)
        return isinstance(node.op, ast.FloorDiv) or (
            isinstance(node.op, _INTEGRAL_OPERATORS) and _is_integral(ctx, node.value, scope, depth, assumed)
        )
    # "range": a loop variable over `range(...)`, integral when the range's arguments are.
    assert isinstance(node, ast.Call)
    return all(_is_integral(ctx, argument, scope, depth, assumed) for argument in node.args)


def is_python_float(ctx: FileContext, node: ast.expr) -> bool:
    """Whether `node` is a float of Python's or a NumPy scalar, never a tensor: a float literal, a float constant or
    function of `math` (or NumPy's of numbers), or arithmetic that takes one, or a true division, of numbers; or a
    name that every binding of its scope makes one. An integer tensor's arithmetic with such a float yields the
    default dtype, where a tensor operand would give its own."""
    scope = _innermost_scope(ctx, node)
    return scope is not None and _is_float(ctx, node, scope, 0, frozenset())


def keeps_integral(ctx: FileContext, operation: ast.BinOp, other: ast.expr) -> bool:
    """Whether an integer tensor's arithmetic `operation` with `other` stays integer: `+`, `-`, `*`, `%` or `//` with
    a Python int."""
    scope = _innermost_scope(ctx, operation)
    return (
        isinstance(operation.op, (*_INTEGRAL_OPERATORS, ast.FloorDiv))
        and scope is not None
        and _is_integral(ctx, other, scope, 0, frozenset())
    )


# `math`'s functions and constants that are floats whatever their arguments, and NumPy's that are floats of numbers.
_FLOAT_FUNCTIONS = frozenset(
    {"float", *(f"math.{name}" for name in ("log", "log2", "log10", "log1p", "exp", "expm1", "sqrt", "pow"))}
)
_NUMPY_FLOAT_FUNCTIONS = frozenset(f"numpy.{name}" for name in ("log", "log2", "log10", "exp", "sqrt", "float64"))
_FLOAT_CONSTANTS = frozenset({"math.pi", "math.e", "math.tau", "numpy.pi", "numpy.e", "torch.pi"})
_FLOAT_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.Mod)


def _is_float(ctx: FileContext, node: ast.expr, scope: ast.AST, depth: int, assumed: Assumed) -> bool:
    if depth > _MAX_DEPTH:
        return False
    value = literal_number(node)
    if value is not None:
        return isinstance(value, float)
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.USub | ast.UAdd) and _is_float(ctx, node.operand, scope, depth + 1, assumed)
    if isinstance(node, ast.BinOp):
        operands = (node.left, node.right)
        return (
            isinstance(node.op, _FLOAT_OPERATORS)
            and all(_may_be_number(ctx, operand, scope, depth + 1, assumed) for operand in operands)
            and (
                isinstance(node.op, ast.Div)
                or any(_is_float(ctx, operand, scope, depth + 1, assumed) for operand in operands)
            )
        )
    if isinstance(node, ast.Call):
        name = _callee(ctx, node.func)
        if name in _NUMPY_FLOAT_FUNCTIONS:
            return all(_may_be_number(ctx, argument, scope, depth + 1, assumed) for argument in node.args)
        return name in _FLOAT_FUNCTIONS
    if isinstance(node, ast.Attribute):
        return ctx.qualified_name(node) in _FLOAT_CONSTANTS
    if isinstance(node, ast.Name):
        return ctx.qualified_name(node) in _FLOAT_CONSTANTS or _every_binding(
            ctx, node, scope, depth, assumed, _binding_is_float
        )
    return False


def _binding_is_float(ctx: FileContext, binding: Binding, scope: ast.AST, depth: int, assumed: Assumed) -> bool:
    kind, node = binding
    if kind == "value":
        return _is_float(ctx, node, scope, depth, assumed)
    if kind == "augmented":
        assert isinstance(node, ast.AugAssign)
        return isinstance(node.op, _FLOAT_OPERATORS) and _may_be_number(ctx, node.value, scope, depth, assumed)
    return False


def _may_be_number(ctx: FileContext, node: ast.expr, scope: ast.AST, depth: int, assumed: Assumed) -> bool:
    """Whether `node` may be a Python number, in arithmetic with a float of `_is_float`: a number, or a name or an
    attribute of no binding that makes it anything else (a parameter, a name bound outside the file, `config.dim`)."""
    if _is_float(ctx, node, scope, depth, assumed) or _is_integral(ctx, node, scope, depth, assumed):
        return True
    if isinstance(node, ast.Attribute):
        return isinstance(node.value, ast.Name | ast.Attribute) and ctx.qualified_name(node) is None
    if isinstance(node, ast.Name):
        resolved = _resolving_scope(ctx, node.id, scope)
        return resolved is None or all(binding is None for binding in ctx.derived(_bindings_in, resolved)[node.id])
    if isinstance(node, ast.UnaryOp | ast.BinOp):
        return all(
            _may_be_number(ctx, child, scope, depth + 1, assumed)
            for child in child_nodes(node)
            if isinstance(child, ast.expr)
        )
    return False


def _innermost_scope(ctx: FileContext, node: ast.AST) -> ast.AST | None:
    """The function, lambda, comprehension, class body or module that `node` is evaluated in."""
    current = ctx.parent(node)
    while current is not None and not isinstance(current, (*_SCOPES, ast.ClassDef, ast.Module)):
        current = ctx.parent(current)
    return current


def _resolving_scope(ctx: FileContext, name: str, scope: ast.AST) -> ast.AST | None:
    """The scope that a name read in `scope` resolves to, as Python resolves it: the innermost enclosing function,
    lambda, comprehension or module that binds it; a class body only where the name is read in it directly. None
    for a name that some code declares `global` or `nonlocal`, and so may bind out of sight, or that the file
    binds nowhere (a builtin)."""
    current: ast.AST | None = scope
    while current is not None:
        if current is scope or not isinstance(current, ast.ClassDef):
            if isinstance(current, (*_FUNCTIONS, ast.Module)) and name in ctx.derived(_declared_elsewhere, current):
                return None
            if name in ctx.derived(_bindings_in, current):
                return current
        current = _innermost_scope(ctx, current)
    return None


def _bindings_in(ctx: FileContext, scope: ast.AST) -> dict[str, list[Binding | None]]:
    """Every binding of every name in one scope, not in the scopes nested in it."""
    found: dict[str, list[Binding | None]] = {}

    def bind(name: str, binding: Binding | None) -> None:
        found.setdefault(name, []).append(binding)

    if isinstance(scope, FunctionNode | ast.Lambda):
        arguments = scope.args
        for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
            bind(argument.arg, ("integral", None) if _annotated_int(argument) else None)
        for argument in (arguments.vararg, arguments.kwarg):
            if argument is not None:
                bind(argument.arg, None)
    if isinstance(scope, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
        for generator in scope.generators:
            _bind_loop_target(generator.target, generator.iter, bind)
        return found
    body = [scope.body] if isinstance(scope, ast.Lambda) else scope.body
    pending: list[ast.AST] = list(body)
    # Only statements bind, and within an expression only a walrus: expressions are searched only where the file
    # has one (a forward's expressions are most of its nodes).
    binding_parts = ast.AST if ":=" in ctx.source else _BINDING_PARTS
    while pending:
        node = pending.pop()
        if isinstance(node, FunctionNode | ast.ClassDef):
            bind(node.name, None)
            pending.extend(node.decorator_list)
            continue
        if isinstance(node, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            # Their own scopes; only a walrus in a comprehension binds out here.
            pending.extend(n for n in walk(node) if isinstance(n, ast.NamedExpr))
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                _bind_target(target, node.value, bind)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            _bind_target(node.target, node.value, bind)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            bind(node.target.id, ("augmented", node))
        elif isinstance(node, ast.NamedExpr):
            bind(node.target.id, ("value", node.value))
        elif isinstance(node, ast.For | ast.AsyncFor):
            _bind_loop_target(node.target, node.iter, bind)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                bind((alias.asname or alias.name).split(".")[0], None)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            _bind_target(node.optional_vars, None, bind)
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            bind(node.name, None)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bind(node.rest, None)
        pending.extend(child for child in child_nodes(node) if isinstance(child, binding_parts))
    return found


# The parts of a scope's body that can bind a name, besides a walrus: statements, and what they hold that binds.
_BINDING_PARTS = (ast.stmt, ast.excepthandler, ast.withitem, ast.match_case, ast.pattern)


def _declared_elsewhere(ctx: FileContext, scope: ast.AST) -> set[str]:
    """The names declared `global` or `nonlocal` in a function or module, nested functions included: a binding of
    the name in one scope rebinds it in another."""
    if "global" not in ctx.source and "nonlocal" not in ctx.source:
        return set()
    return {name for node in walk(scope) if isinstance(node, ast.Global | ast.Nonlocal) for name in node.names}


def _bind_loop_target(target: ast.expr, iterable: ast.expr, bind: Callable[[str, Binding | None], None]) -> None:
    """A loop variable over `range(...)` is an int when the range's arguments are; any other proves nothing."""
    is_range = isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == "range"
    if is_range and isinstance(target, ast.Name):
        bind(target.id, ("range", iterable))
    else:
        _bind_target(target, None, bind)


def _bind_target(target: ast.expr, value: ast.expr | None, bind: Callable[[str, Binding | None], None]) -> None:
    """Bind the names of an assignment target to their values; None binds them to nothing proven. Unpacking
    `.shape` or `.size()` binds ints."""
    if isinstance(target, ast.Name):
        bind(target.id, None if value is None else ("value", value))
        return
    if isinstance(target, ast.Starred):
        _bind_target(target.value, None, bind)
        return
    if not isinstance(target, ast.Tuple | ast.List):
        return  # an attribute or a subscript: no name bound
    pairs = isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts)
    if pairs and not any(isinstance(element, ast.Starred) for element in (*value.elts, *target.elts)):
        for element, element_value in zip(target.elts, value.elts, strict=True):
            _bind_target(element, element_value, bind)
        return
    unpacks_a_shape = value is not None and _is_shape(value)
    for element in target.elts:
        if unpacks_a_shape and isinstance(element, ast.Name):
            bind(element.id, ("integral", None))
        else:
            _bind_target(element, None, bind)


def _annotated_int(argument: ast.arg) -> bool:
    annotation = argument.annotation
    if isinstance(annotation, ast.Constant):  # a string annotation: `n: "int"`
        return annotation.value == "int"
    return isinstance(annotation, ast.Name) and annotation.id == "int"


# The fixes


def torch_alias(ctx: FileContext, call: ast.Call) -> str | None:
    """The name to write `<alias>.int64` with: the one this call reached torch through, else any import of it."""
    func = call.func
    if isinstance(func, ast.Attribute) and ctx.qualified_name(func.value) == "torch":
        return ast.unparse(func.value)
    return ctx.module_alias("torch")


def int64_fix(ctx: FileContext, call: ast.Call, dtype: ast.expr | None, rounding: str) -> Fix | None:
    """The fix that makes `call` an int64 enumeration, cast back to the floating dtype it had, or a wider one; for a
    call with an `end_rounding` only, which is `rounding`: the end is wrapped in `math.<rounding>` where that is not
    empty (and `import math` added where the file has no name for it). `dtype` is its `dtype=`, None for the
    default dtype.

    A dtype is never lowered (a literal float64 is exact, and never flagged): float32 and the default dtype
    (float32 unless the code sets another) with `.float()`; bf16 and fp16 with `.float()`, a raise; a dtype known
    only at run time
    (`x.dtype`, a parameter, `torch.get_default_dtype()`), which may be float64, with
    `.to(torch.promote_types(<dtype>, torch.float32))`. Safe where the dtype stays what it was. None when the file
    has no name for torch itself to write `torch.int64` with, or when the dtype is a parameter that may be None.
    """
    alias = torch_alias(ctx, call)
    if alias is None:
        return None
    if dtype is not None and may_be_none(ctx, call, dtype):
        return None
    safety, cast = _cast_back(ctx, dtype, alias)
    # Where `.float()` follows already, the result is float32 whatever the dtype was, and stays so.
    if _is_cast_to_float32(ctx, ctx.parent(call)):
        cast = ""
    if not rounding:
        return Fix(safety, Int64Enumeration(alias, cast))
    math = ctx.module_alias("math")
    if math is None and "math" in ctx.imported_names:
        return None  # `math` names something else here
    payload = Int64Enumeration(alias, cast, f"{math or 'math'}.{rounding}")
    return Fix(safety, payload, adds_import=None if math else "math")


def int64_hint(ctx: FileContext, dtype: ast.expr | None, rounding: str) -> str:
    """How a finding's message describes the int64 rewrite: "enumerate in int64, then `.float()`", with the end
    rounded where it is not proven integral."""
    end = f" with the end rounded by `math.{rounding}`" if rounding else ""
    return f"enumerate in int64{end}, then {cast_back_hint(ctx, dtype)}"


def cast_back_hint(ctx: FileContext, dtype: ast.expr | None) -> str:
    """How a finding's message says the int64 enumeration is cast back: "`.float()`", or a
    promotion to float32 or wider for a dtype known only at run time."""
    cast = _cast_back(ctx, dtype, "torch")[1]
    return "a promotion to float32 or wider" if cast.startswith("to(") else f"`.{cast}`"


def _cast_back(ctx: FileContext, dtype: ast.expr | None, alias: str) -> tuple[FixSafety, str]:
    """The safety of the int64 rewrite, and the method call that casts its result back, with `alias` the file's
    name for torch: a dtype is never lowered."""
    literal = None if dtype is None else qualified_dtype(ctx, dtype)
    if dtype is None or literal in FLOAT32_DTYPES:
        return FixSafety.SAFE, "float()"
    if literal is not None:
        return FixSafety.UNSAFE, "float()"
    return FixSafety.UNSAFE, f"to({promoted(ctx, alias, dtype)})"


def promoted(ctx: FileContext, alias: str, dtype: ast.expr) -> str:
    """The code of the dtype that is `dtype` or wider, never narrower than float32: bf16 and fp16 give float32,
    float64 stays float64. Where the code alone does not show `dtype` floating (a name's words, a model's `self.dtype`
    or a parameter named `dtype` say so, and the rules take them at their word), an integer dtype is kept as it is,
    which `promote_types` would make float32: an index enumerated as floats breaks the code that indexes with it."""
    code = ast.unparse(dtype)
    widened = f"{alias}.promote_types({code}, {alias}.float32)"
    if is_floating_dtype(ctx, dtype, by_name=False):
        return widened
    return f"{widened} if {code}.is_floating_point else {code}"


def may_be_none(ctx: FileContext, call: ast.Call, dtype: ast.expr) -> bool:
    """Whether `dtype` is a parameter of a function around `call` that may be None: it defaults to None, its
    annotation admits None (`torch.dtype | None`, `Optional[torch.dtype]`), or, not annotated, a call in the file hands
    it something that may be None (`make_freqs(dim, dtype=dtype)` in a caller whose own `dtype` defaults to None).
    `torch.arange(..., dtype=None)` infers its dtype from the bounds, int64 for integral ones, so no rewrite keeps it:
    `promote_types(None, ...)` raises, and the default dtype would make an int64 enumeration floating."""
    if not isinstance(dtype, ast.Name):
        return False
    for function in ctx.enclosing_functions(call):
        arguments = function.args
        positional = [*arguments.posonlyargs, *arguments.args]
        defaults: list[ast.expr | None] = [None] * (len(positional) - len(arguments.defaults))
        pairs = [
            *zip(positional, [*defaults, *arguments.defaults], strict=True),
            *zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True),
        ]
        for parameter, default in pairs:
            if parameter.arg != dtype.id:
                continue
            if isinstance(default, ast.Constant) and default.value is None:
                return True
            if parameter.annotation is None:
                index = positional.index(parameter) if parameter in positional else None
                return any(not _surely_a_dtype(ctx, value) for value in _values_passed(ctx, function, index, dtype.id))
            annotation = ast.unparse(parameter.annotation)
            return "None" in annotation or "Optional" in annotation
    return False


def _values_passed(ctx: FileContext, function: FunctionNode, index: int | None, name: str) -> Iterator[ast.expr | None]:
    """What the calls of `function` in the file pass for its parameter `name` (at `index` among the positional ones,
    None for a keyword-only one): an expression, or None for a call whose arguments cannot be matched (`*args`)."""
    try:
        tree, _ = ctx.parsed_around((function.name,))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        yield None
        return
    bound = bool(function.args.args) and function.args.args[0].arg in ("self", "cls")
    for node in walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == function.name:
            position = index
        elif isinstance(func, ast.Attribute) and func.attr == function.name:
            position = None if index is None else index - bound
        else:
            continue
        keyword = next((kw for kw in node.keywords if kw.arg == name), None)
        if keyword is not None:
            yield keyword.value
        elif any(isinstance(arg, ast.Starred) for arg in node.args) or any(kw.arg is None for kw in node.keywords):
            yield None
        elif position is not None and 0 <= position < len(node.args):
            yield node.args[position]


def _surely_a_dtype(ctx: FileContext, value: ast.expr | None) -> bool:
    """A dtype spelled out (`torch.float32`), or a tensor's (`x.dtype`): never None."""
    if value is None:
        return False
    return qualified_dtype(ctx, value) is not None or (isinstance(value, ast.Attribute) and value.attr == "dtype")


def promoted_dtype_fix(ctx: FileContext, call: ast.Call, dtype: ast.expr) -> Fix | None:
    """The fix that keeps a floating enumeration whose bounds are not proven integral, in a dtype of at least
    float32: `dtype=torch.promote_types(<dtype>, torch.float32)`. Only where the file shows that the call cannot run
    at construction (`runs_only_after_construction`), where zero.Init would cast it whatever its dtype."""
    alias = torch_alias(ctx, call)
    if alias is None or runs_only_after_construction(ctx, call) != frozenset() or may_be_none(ctx, call, dtype):
        return None
    return Fix(FixSafety.UNSAFE, PromotedDtype(promoted(ctx, alias, dtype)))


def _is_cast_to_float32(ctx: FileContext, node: ast.AST | None) -> bool:
    """Whether `node` is the `.float` of a `.float()` call: the enumeration is cast already."""
    if not (isinstance(node, ast.Attribute) and node.attr == "float"):
        return False
    call = ctx.parent(node)
    return isinstance(call, ast.Call) and call.func is node and not call.args


# When does an enumeration run? At construction, where zero.Init and a bf16 default dtype act, or only after it?

_RUNTIME_ENTRIES = frozenset({"forward", "__call__"})
# What makes an instance of a class, a dataclass's generated `__init__` calling `__post_init__`.
_INITIALISERS = frozenset({"__init__", "__post_init__"})
# A parent's constructor calls its initialisers by name (`nn.Linear.__init__` calls `reset_parameters`): a method so
# named runs at construction, as a cache builder does (`rotary.reachable_from_init`).
_BUILDER_WORDS = ("init", "reset", "cache")


class _Site(namedtuple("_Site", ("call", "function", "owner", "table", "kept", "stores"))):
    """Where a function, plain class or method is named: the call it is the callee of (None for any other use), the
    outermost function that holds it (None at module level or in a class body) and the top-level class that function
    is a method of (None for any other), the module-level table of functions (`NAME = {...}`, or a list, tuple or set
    display) of which it is an entry, which runs where the table's entries are called, and the attribute of `self`
    that keeps it without running it (`self.fn = f`, `self.fns.append(partial(f, ...))`), which runs where that
    attribute is read. For a method or attribute of `self`, `stores` says whether the use stores into it."""

    __slots__ = ()
    call: ast.Call | None
    function: FunctionNode | None
    owner: ast.ClassDef | None
    table: str | None
    kept: str | None
    stores: bool


class _CallGraph(namedtuple("_CallGraph", ("by_line", "functions", "classes", "sites", "method_sites"))):
    """Where one name is used in a file: `f(...)` for a module-level function or class, `TABLE[k](...)` for a table
    of functions; `self.m(...)`, `cls.m(...)` or `Class.m(...)` inside its class for a method. Read from the
    statements that mention the name (`_graph_of`), with the classes' `__init__`: the rules' tree leaves out the
    functions that hold no candidate, callers among them. `by_line` finds a function here by the line of its `def`,
    among those whose text holds the name; `sites` and `method_sites` hold the uses of the name alone."""

    __slots__ = ()
    by_line: dict[int, FunctionNode]
    functions: dict[str, FunctionNode]
    classes: dict[str, ast.ClassDef]
    sites: dict[str, list[_Site]]
    method_sites: dict[tuple[str, str], list[_Site]]


_CONTAINERS = (ast.Dict, ast.List, ast.Tuple, ast.Set)
# Nodes that hold nothing a call graph records, nearly half the nodes of model code: every name's `Load` or `Store`,
# every operator and every constant.
_LEAVES = (ast.Constant, ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)
_STORING_METHODS = frozenset({"append", "insert", "add"})


def _graph_of(ctx: FileContext, name: str) -> _CallGraph | None:
    """The `_CallGraph` of the statements that mention `name`, parsed alone (`FileContext.parsed_around`), as the
    rules' own tree is; None where they do not parse."""
    try:
        tree, occurrences = ctx.parsed_around((name,))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines = occurrences.lines((name,))
    by_line: dict[int, FunctionNode] = {}
    functions = {node.name: node for node in tree.body if isinstance(node, FunctionNode)}
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    tables = {
        statement.targets[0].id: statement.value
        for statement in tree.body
        if isinstance(statement, ast.Assign)
        and isinstance(statement.value, _CONTAINERS)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
    }
    sites: dict[str, list[_Site]] = {}
    method_sites: dict[tuple[str, str], list[_Site]] = {}
    ancestors: list[ast.AST] = []  # of the node being visited, its statement first

    def site(node: ast.Name, function: FunctionNode | None, owner: ast.ClassDef | None) -> _Site | None:
        """How `node` is used; None where the use runs nothing: a type, or a table tested for a key (`k in T`)."""
        chain = dict(zip(map(id, [*ancestors[1:], node]), ancestors, strict=True))
        if names_a_type(node, lambda child: chain.get(id(child))):
            return None
        used, parent = node, chain.get(id(node))
        if node.id in tables:
            if isinstance(parent, ast.Compare) and all(isinstance(op, ast.In | ast.NotIn) for op in parent.ops):
                return None
            if not (isinstance(parent, ast.Subscript) and parent.value is node):
                return _Site(None, function, owner, None, None, False)  # the table passed on: anything may run it
            used, parent = parent, chain.get(id(parent))
        if isinstance(parent, ast.Call) and parent.func is used:
            return _Site(parent, function, owner, None, None, False)
        if (
            function is None
            and isinstance(parent, ast.Call)
            and isinstance(ancestors[0], ast.Expr)
            and ancestors[0].value is parent
        ):
            # `register(f)` as a statement of its own at module level: a decorator spelled as a call, which hands `f`
            # to a registry, as `@register` would, and runs nothing (a decorator is not a use of the function either).
            return None
        while isinstance(parent, _CONTAINERS) or _is_partial_of(parent, used):
            if function is None and any(parent is value for value in tables.values()):
                return _Site(None, None, None, next(n for n, value in tables.items() if value is parent), None, False)
            used, parent = parent, chain.get(id(parent))
        return _Site(None, function, owner, None, _kept_on(parent, used), False)

    def mentions_name(statement: ast.stmt) -> bool:
        return any_line_within(lines, candidates.first_line(statement), statement.end_lineno or statement.lineno)

    def visit(node: ast.AST, cls: ast.ClassDef | None, function: FunctionNode | None, owner: ast.ClassDef | None):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id == name:
            found = site(node, function, owner)
            if found is not None:
                sites.setdefault(node.id, []).append(found)
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == name
            and cls is not None
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls", cls.name)
        ):
            parent = ancestors[-1]
            call = parent if isinstance(parent, ast.Call) and parent.func is node else None
            found = _Site(
                call,
                function,
                owner,
                None,
                None,
                _stores_into(node, parent, ancestors[-2] if len(ancestors) > 1 else None),
            )
            method_sites.setdefault((cls.name, node.attr), []).append(found)
        inner_class, inner_function, inner_owner = cls, function, owner
        if isinstance(node, ast.ClassDef) and cls is None and function is None:
            inner_class = node
        elif isinstance(node, FunctionNode) and function is None:
            inner_function = by_line[node.lineno] = node
            inner_owner = cls if cls is not None and any(member is node for member in cls.body) else None
        ancestors.append(node)
        for child in child_nodes(node):
            # A statement whose lines do not hold the name has no use of it, nor a `def` of it: most of a class's.
            if not (isinstance(child, _LEAVES) or (isinstance(child, ast.stmt) and not mentions_name(child))):
                visit(child, inner_class, inner_function, inner_owner)
        ancestors.pop()

    for statement in tree.body:
        visit(statement, None, None, None)
    return _CallGraph(by_line, functions, classes, sites, method_sites)


def _kept_on(node: ast.AST | None, value: ast.expr) -> str | None:
    """The attribute of `self` in which `node` keeps `value` without running it: `self.x = value`, `self.x[k] = value`
    or `self.x.append(value)`; None for any other use."""
    if isinstance(node, ast.Assign) and node.value is value and len(node.targets) == 1:
        target = node.targets[0].value if isinstance(node.targets[0], ast.Subscript) else node.targets[0]
        return target.attr if is_self_attribute(target) else None
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _STORING_METHODS
        and is_self_attribute(node.func.value)
        and any(argument is value for argument in node.args)
    ):
        return node.func.value.attr
    return None


def _stores_into(attribute: ast.Attribute, parent: ast.AST, grandparent: ast.AST | None) -> bool:
    """Whether a use of `self.x` stores into it, reading nothing it holds: `self.x = ...`, `self.x[k] = ...`,
    `self.x.append(...)`."""
    if isinstance(attribute.ctx, ast.Store):
        return True
    if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Store):
        return True
    return (
        isinstance(parent, ast.Attribute)
        and parent.attr in _STORING_METHODS
        and isinstance(grandparent, ast.Call)
        and grandparent.func is parent
    )


def _is_partial_of(node: ast.AST | None, callable_: ast.expr) -> bool:
    """Whether `node` is `functools.partial(callable_, ...)`, which keeps the callable without running it."""
    if not (isinstance(node, ast.Call) and node.args and node.args[0] is callable_):
        return False
    return (isinstance(node.func, ast.Name) and node.func.id == "partial") or (
        isinstance(node.func, ast.Attribute) and node.func.attr == "partial"
    )


def names_a_type(node: ast.AST, parent_of: Callable[[ast.AST], ast.AST | None]) -> bool:
    """Whether `node` is read as a type, which runs nothing: in an annotation, or the class that `isinstance` or
    `issubclass` tests against. `parent_of` gives a node's parent, up to its statement at least."""
    child, parent = node, parent_of(node)
    while parent is not None:
        if isinstance(parent, ast.Call) and child is parent.func:
            return False  # called, wherever the call stands: `isinstance(x, kinds())`
        if child is getattr(parent, "annotation", None) or child is getattr(parent, "returns", None):
            return True
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in _TYPE_TESTS:
            return len(parent.args) == 2 and child is parent.args[1]
        if isinstance(parent, ast.stmt):
            return False
        child, parent = parent, parent_of(parent)
    return False


_TYPE_TESTS = ("isinstance", "issubclass")


def _placed(ctx: FileContext, function: FunctionNode) -> tuple[_CallGraph, FunctionNode] | None:
    """The graph of a function's name, and the function in it."""
    graph = ctx.derived(_graph_of, function.name)
    placed = None if graph is None else graph.by_line.get(function.lineno)
    return None if graph is None or placed is None or placed.name != function.name else (graph, placed)


def runs_only_after_construction(ctx: FileContext, node: ast.AST) -> frozenset[str] | None:
    """Whether the file shows that `node` runs only after the modules are built, where neither zero.Init nor a
    default dtype set for loading acts on an explicit dtype: None where it may run at construction; otherwise the
    public module-level functions of the file that the answer rests on (empty where the file alone proves it), which
    other modules may import and call from a constructor (`callers.called_at_construction` looks).

    - A method runs at construction when it is `__init__`, an initialiser or a cache builder (its name holds
      "init", "reset" or "cache": a parent's constructor calls `reset_parameters`), or when a method of its class
      that runs at construction names it through `self.`, `cls.` or the class. A method that no other method of
      its class names is `forward`, a pipeline's `__call__`, a step or a hook that code outside calls: after
      construction where the class has its own `__init__`; where it inherits one, which may call it, only
      `forward` and `__call__` are.
    - A module-level function runs after construction when the file names it only as the callee of calls that all
      run after construction, or where it is kept to be called later (`_Site`), and, where it is public, when the
      rest of its package does too; a private one (`_name`) that the file never names proves nothing. The
      initialisers of a plain class (not a module) run where the class is called, and an entry of a table of
      functions where the table's entries are.
    - Code at module level, or in a class body, runs at import, which may be inside a constructor's module.
    """
    functions = list(ctx.enclosing_functions(node))
    return function_runs_after(ctx, functions[-1]) if functions else None


def function_runs_after(ctx: FileContext, function: FunctionNode) -> frozenset[str] | None:
    """`runs_only_after_construction` of a whole function (its outermost one, where it is nested)."""
    owner = ctx.parent(function)
    top_level = isinstance(owner, ast.ClassDef) and isinstance(ctx.parent(owner), ast.Module)
    return _function_runs_after(ctx, function, owner if top_level else None, frozenset())


def _function_runs_after(
    ctx: FileContext, function: FunctionNode, owner: ast.ClassDef | None, seen: frozenset[tuple[str, int]]
) -> frozenset[str] | None:
    if owner is not None and _runs_at_construction(owner, function.name):
        return None  # whoever calls it: no need to read where
    if owner is not None and function.name not in _INITIALISERS and not _read_off_anything(ctx, function.name):
        # Nothing in the file reads it off anything (`self.name`): no method of its class calls it.
        return frozenset() if _runs_after_uncalled(owner, function.name) else None
    key = (function.name, function.lineno)
    placed = _placed(ctx, function)
    if key in seen or placed is None:
        return None  # a recursion, or a file that does not parse, proves nothing
    seen = seen | {key}
    graph, function = placed
    if graph.functions.get(function.name) is function:
        return _called_after(ctx, graph, function.name, seen)
    cls = next((c for c in graph.classes.values() if function in c.body), None)
    if cls is not None and function.name in _INITIALISERS and _is_plain(cls):
        # Not a module: it runs where something makes an instance, as a function runs where it is called.
        class_graph = ctx.derived(_graph_of, cls.name)
        return None if class_graph is None else _called_after(ctx, class_graph, cls.name, seen)
    if cls is None or _runs_at_construction(cls, function.name):
        return None
    callers = {
        use.function
        for use in graph.method_sites.get((cls.name, function.name), [])
        if use.function is not None and use.function is not function
    }
    if callers:
        in_class = all(c in cls.body for c in callers)
        return _all_after(ctx, [(caller, cls) for caller in callers], seen, frozenset()) if in_class else None
    return frozenset() if _runs_after_uncalled(cls, function.name) else None


def _read_off_anything(ctx: FileContext, name: str) -> bool:
    """Whether the file's text has `name` as an attribute: the word, with a `.` before it (spaces, line breaks and
    backslashes between allowed)."""
    data, size = ctx.occurrences.data, len(name.encode())
    for start in ctx.occurrences.positions((name,)):
        if _is_identifier_byte(data[start + size : start + size + 1]) or _is_identifier_byte(data[start - 1 : start]):
            continue  # part of a longer name
        before = start - 1
        while before >= 0 and data[before : before + 1] in (b" ", b"\t", b"\r", b"\n", b"\\"):
            before -= 1
        if data[before : before + 1] == b".":
            return True
    return False


def _is_identifier_byte(byte: bytes) -> bool:
    return byte.isalnum() or byte == b"_" or byte >= b"\x80"


def _runs_after_uncalled(cls: ast.ClassDef, method: str) -> bool:
    """Whether a method that no other method of its class names runs after construction: it is `forward`, a
    pipeline's `__call__`, a step or a hook that code outside calls, where the class has its own `__init__`; where it
    inherits one, which may call it, only `forward` and `__call__` are."""
    return method in _RUNTIME_ENTRIES or any(
        isinstance(member, FunctionNode) and member.name == "__init__" for member in cls.body
    )


def _called_after(
    ctx: FileContext, graph: _CallGraph, name: str, seen: frozenset[tuple[str, int]]
) -> frozenset[str] | None:
    """`_function_runs_after` of a module-level function, plain class or table of functions `name`, by where the
    file runs it: each call; for an entry of a table, where the table's entries are called; for one kept on `self`
    (`_Site.kept`), wherever a method of the class reads that attribute."""
    uses = graph.sites.get(name, [])
    public = not name.startswith("_")
    if not (uses or public):
        return None
    helpers = frozenset({name} if public else ())
    callers: list[tuple[FunctionNode, ast.ClassDef | None]] = []
    for use in uses:
        if use.table is not None:
            table_graph = ctx.derived(_graph_of, use.table)
            after = None if table_graph is None else _called_after(ctx, table_graph, use.table, seen)
            if after is None:
                return None
            helpers |= after
        elif use.kept is not None:
            after = _read_after(ctx, use, seen)
            if after is None:
                return None
            helpers |= after
        else:
            if use.call is None or use.function is None:
                return None
            callers.append((use.function, use.owner))
    return _all_after(ctx, callers, seen, helpers)


def _read_after(ctx: FileContext, use: _Site, seen: frozenset[tuple[str, int]]) -> frozenset[str] | None:
    """Where what a method keeps on `self` runs: in every method of its class that reads the attribute, other than
    to store into it (any read may call it: `self.fn(x)`, `self.apply(self.fn)`, `for f in self.fns: f(x)`)."""
    graph = None if use.owner is None else ctx.derived(_graph_of, use.kept)
    if graph is None or use.owner is None:
        return None
    readers = [site for site in graph.method_sites.get((use.owner.name, use.kept), []) if not site.stores]
    if any(site.function is None or site.owner is None for site in readers):
        return None
    return _all_after(ctx, [(site.function, site.owner) for site in readers], seen, frozenset())


def _runs_at_construction(cls: ast.ClassDef, method: str) -> bool:
    """Whether a method runs while its class is built, whoever calls it: a module's `__init__`, an initialiser or a
    cache builder (its name holds "init", "reset" or "cache"). A plain class's initialisers run where it is made."""
    if method in _INITIALISERS and _is_plain(cls):
        return False
    return method == "__init__" or any(word in method.lower() for word in _BUILDER_WORDS)


def _is_plain(cls: ast.ClassDef) -> bool:
    """Whether a class is surely not a module: it has no base but `object`, and no metaclass."""
    return not cls.keywords and all(isinstance(base, ast.Name) and base.id == "object" for base in cls.bases)


def _all_after(
    ctx: FileContext,
    callers: list[tuple[FunctionNode, ast.ClassDef | None]],
    seen: frozenset[tuple[str, int]],
    helpers: frozenset[str],
) -> frozenset[str] | None:
    """The public helpers that the callers' answers rest on, with `helpers`; None where one of them (a function, and
    the class it is a method of) may run at construction."""
    for caller, owner in callers:
        after = _function_runs_after(ctx, caller, owner, seen)
        if after is None:
            return None
        helpers |= after
    return helpers


def only_float64(literals: frozenset[str] | None) -> bool:
    """Whether an enumeration's literal dtypes (`literal_dtypes`) are float64 alone: exact to 2**53 wherever it runs."""
    return literals is not None and literals <= _FLOAT64


def at_least_float32(literals: frozenset[str] | None) -> bool:
    """Whether an expression's literal dtypes (`literal_dtypes`) are float32 or float64 alone: an integer enumeration
    cast to them is exact to 2**24 at least."""
    return literals is not None and literals <= _FLOAT32_OR_64


def explicit_float32_after_construction(
    ctx: FileContext, call: ast.Call, literals: frozenset[str] | None
) -> frozenset[str] | None:
    """For an enumeration in an explicit float32 (its literal dtypes, `literal_dtypes`, are float32, or float32 or
    float64), where it runs only after construction: float32 then holds integers exactly to 2**24, and neither
    zero.Init nor a default dtype set for loading casts it. `runs_only_after_construction`'s answer: the public
    helpers it rests on (empty where the file alone proves it); None for any other dtype, or where the enumeration
    may run at construction. RPL101 reports the None cases, RPL104 the others."""
    if literals is None or not literals <= _FLOAT32_OR_64 or literals <= _FLOAT64:
        return None
    return runs_only_after_construction(ctx, call)


def shown_floating(ctx: FileContext, dtype: ast.expr) -> bool:
    """Whether the code shows the dtype expression `dtype` to be floating (`is_floating_dtype`), or shows nothing of it
    but passes a floating dtype for it (`passed_floating_dtype`)."""
    floating = is_floating_dtype(ctx, dtype)
    return bool(floating or (floating is None and passed_floating_dtype(ctx, dtype)))


def rounds_where_it_runs(ctx: FileContext, call: ast.Call, dtype: ast.expr) -> tuple[str, ...] | None:
    """Whether `torch.arange` in the `dtype=` argument `dtype` can round where `call` runs (RPL101's "What it does"):
    the public helpers that the answer rests on (empty where the file alone proves it), or None where it is exact: a
    dtype not shown to be floating, float64, or an explicit float32 after construction (RPL104's). zero.Init casts what
    `torch.arange` makes while a model is built, an explicit float32 too."""
    if not shown_floating(ctx, dtype) or indexes_a_tensor(ctx, call):
        return None
    literals = literal_dtypes(ctx, dtype)
    if only_float64(literals):
        return None  # exact to 2**53 wherever it runs
    after = explicit_float32_after_construction(ctx, call, literals)
    if after == frozenset():
        return None  # RPL104's: exact to 2**24, out of zero.Init's and the default dtype's reach
    return tuple(sorted(after or ()))


def indexes_a_tensor(ctx: FileContext, call: ast.Call) -> bool:
    """Whether what `call` makes indexes a tensor: `x[torch.arange(n, dtype=d.dtype)]`, or `s = torch.arange(...)`
    with `s` then an index of a subscript (`logits[s, d]`), in a function that binds `s` once. An index is an integer
    (or bool) tensor, so its dtype is none of the floating ones that a guess took it for."""
    if _an_index_of(ctx, call):
        return True
    parent = ctx.parent(call)
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
        return False
    function = next(ctx.enclosing_functions(call), None)
    name = parent.targets[0].id
    if function is None or len(assigned_values(function, name, before_line=(function.end_lineno or 0) + 1)) != 1:
        return False
    # The subscripts are looked for in the function's tree: the rules index the parents of trigger lines only.
    subscripts = (node for node in walk(function) if isinstance(node, ast.Subscript))
    return any(isinstance(index, ast.Name) and index.id == name for node in subscripts for index in _indices(node))


def _an_index_of(ctx: FileContext, node: ast.expr) -> bool:
    """`x[node]` or `x[..., node]`: `node` is (one of) the subscript's indices."""
    parent = ctx.parent(node)
    if isinstance(parent, ast.Tuple):
        parent = ctx.parent(parent)
    return isinstance(parent, ast.Subscript) and any(index is node for index in _indices(parent))


def _indices(subscript: ast.Subscript) -> list[ast.expr]:
    index = subscript.slice
    return list(index.elts) if isinstance(index, ast.Tuple) else [index]


def unit_spacing_offset(call: ast.Call) -> float | None:
    """For `torch.linspace(start, end, steps)` whose points are one apart, an enumeration of positions: the fraction
    its start is offset by (0.0 for integers, 0.5 for half-integers); else None. One apart means `end - start ==
    steps - 1`, read from a literal start and an end and a step count that differ from one expression by literals
    (`linspace(0, n - 1, n)`, `linspace(0.5, h - 0.5, h)`, `linspace(1, n, n)`). Literal bounds count only where bf16
    cannot hold them all (`bf16_holds_up_to`)."""
    start, end, steps = _linspace_bounds(call)
    if start is None or end is None or steps is None:
        return None
    start_value = literal_number(start)
    (end_core, end_offset), (steps_core, steps_offset) = _offset_from(end), _offset_from(steps)
    if start_value is None or end_core != steps_core or end_offset - start_value != steps_offset - 1:
        return None
    offset = float(start_value) % 1
    if end_core is None and max(abs(start_value), abs(end_offset)) <= bf16_holds_up_to(offset):
        return None  # bf16 holds every point
    return offset


def bf16_holds_up_to(offset: float) -> float:
    """How far bf16 (8 significant bits) holds exactly the numbers one apart that are offset by the fraction `offset`:
    integers up to 256, half-integers up to 128, quarters up to 64; a fraction that is no sum of powers of two, nowhere
    (the limit is then below 1)."""
    return 256 / offset.as_integer_ratio()[1]


def _linspace_bounds(call: ast.Call) -> tuple[ast.expr | None, ast.expr | None, ast.expr | None]:
    """start, end and steps, however `torch.linspace` was passed them."""
    keywords = {kw.arg: kw.value for kw in call.keywords}
    start, end, steps = [*call.args, None, None, None][:3]
    return keywords.get("start", start), keywords.get("end", end), keywords.get("steps", steps)


def _offset_from(node: ast.expr) -> tuple[str | None, float]:
    """An expression as one expression (its `ast.dump`; None for none) plus a literal: `n - 1` is ("n", -1)."""
    value = literal_number(node)
    if value is not None:
        return None, value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        added = literal_number(node.right)
        if added is not None:
            core, offset = _offset_from(node.left)
            return core, offset + (added if isinstance(node.op, ast.Add) else -added)
    return ast.dump(node), 0


_FLOAT64 = frozenset({"torch.float64"})
_FLOAT32_OR_64 = frozenset({"torch.float32", "torch.float64"})


# Which literal dtype does a `dtype=` argument carry?

_CANONICAL_DTYPES = {"torch.float": "torch.float32", "torch.double": "torch.float64", "torch.half": "torch.float16"}
_CAST_METHODS = {
    "float": "torch.float32",
    "double": "torch.float64",
    "half": "torch.float16",
    "bfloat16": "torch.bfloat16",
}


def literal_dtypes(ctx: FileContext, dtype: ast.expr) -> frozenset[str] | None:
    """The literal dtypes ("torch.float32", "torch.float64", ...) that the `dtype=` argument of an enumeration can be,
    by the file alone; None where one of them is not a literal (an activation's, a weight's, one from elsewhere).

    Followed: assignments before the call (`dtype = torch.float32 if mps else torch.float64`); a parameter, to its
    default where a caller omits it and to what the file's callers pass (`self.positions(n, dtype=torch.float32)`);
    and `x.dtype` where `x` was cast just before (`x = x.to(torch.float32)`)."""
    functions = list(ctx.enclosing_functions(dtype))
    return _literal_dtypes(ctx, dtype, functions[0] if functions else None, 0)


def _literal_dtypes(ctx: FileContext, node: ast.expr, scope: FunctionNode | None, depth: int) -> frozenset[str] | None:
    if depth > _MAX_DEPTH:
        return None
    literal = qualified_dtype(ctx, node)
    if literal is not None:
        return frozenset({_CANONICAL_DTYPES.get(literal, literal)})
    if isinstance(node, ast.IfExp):
        body = _literal_dtypes(ctx, node.body, scope, depth + 1)
        orelse = _literal_dtypes(ctx, node.orelse, scope, depth + 1)
        return None if body is None or orelse is None else body | orelse
    if isinstance(node, ast.Call):
        chosen = chosen_from_literals(ctx, node)
        return None if chosen is None else frozenset(_CANONICAL_DTYPES.get(d, d) for d in chosen)
    if scope is None:
        return None
    if isinstance(node, ast.Attribute) and node.attr == "dtype" and isinstance(node.value, ast.Name):
        return _cast_dtype(ctx, scope, node.value)
    if not isinstance(node, ast.Name):
        return None
    values = assigned_values(scope, node.id, before_line=node.lineno)
    if values:
        return _union(_literal_dtypes(ctx, value, scope, depth + 1) for value in values)
    found = parameter_of(scope, node.id)
    if found is None:
        return None
    argument, default = found
    passed = _passed_arguments(ctx, scope, argument)
    if passed is None:
        return None
    options: list[frozenset[str] | None] = []
    for expression, site_scope in passed:
        if expression is None:  # a caller that leaves the default
            options.append(None if default is None else _literal_dtypes(ctx, default, None, depth + 1))
        else:
            options.append(_literal_dtypes(ctx, expression, site_scope, depth + 1))
    if not passed:
        options.append(None if default is None else _literal_dtypes(ctx, default, None, depth + 1))
    return _union(options)


def tensor_literal_dtypes(ctx: FileContext, tensor: ast.expr) -> frozenset[str] | None:
    """The literal dtypes that `tensor` can have, as `literal_dtypes` reads them for its `.dtype`: a name that the
    function around it casts to one, or computes in one, before."""
    functions = list(ctx.enclosing_functions(tensor))
    return _cast_dtype(ctx, functions[0], tensor) if isinstance(tensor, ast.Name) and functions else None


def _union(options: Iterable[frozenset[str] | None]) -> frozenset[str] | None:
    found: frozenset[str] = frozenset()
    for option in options:
        if option is None:
            return None
        found |= option
    return found


def _cast_dtype(ctx: FileContext, scope: FunctionNode, tensor: ast.Name) -> frozenset[str] | None:
    """`x.dtype` where every assignment to `x` before it, but a move of `x` to a device, gives it one literal dtype,
    and one of them is a statement of the function's own body: `inputs = inputs.to(torch.float32)`, or arithmetic on
    a float32 enumeration (`inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))`)."""
    values = [
        value
        for value in assigned_values(scope, tensor.id, before_line=tensor.lineno)
        if not _moves_itself(ctx, value, tensor.id)
    ]
    unconditional = any(
        isinstance(statement, ast.Assign) and statement.value in values and statement.lineno < tensor.lineno
        for statement in scope.body
    )
    casts = {cast_literal(ctx, value) for value in values}
    if not unconditional or len(casts) != 1 or None in casts:
        return None
    return frozenset(casts)  # type: ignore[arg-type]


def _moves_itself(ctx: FileContext, value: ast.expr, name: str) -> bool:
    """`x.to(device)` assigned to `x`: a move, which keeps the dtype that `x` had."""
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "to"
        and isinstance(value.func.value, ast.Name)
        and value.func.value.id == name
        and dtype_argument(value) is None
        and not any(names_a_dtype(ctx, argument) for argument in value.args)
    )


def cast_literal(ctx: FileContext, value: ast.expr) -> str | None:
    """The literal dtype that an assigned value has for sure: a cast to one (`x.float()`, `x.to(torch.float32)`), or
    arithmetic on a float32 enumeration (float32 or wider, read as float32); None otherwise."""
    if isinstance(value, ast.BinOp) and _holds_float32_enumeration(ctx, value):
        # Arithmetic with a float32 tensor of positions is float32 or wider: type promotion never lowers a tensor with
        # dimensions, whatever the other operand (a Python number, a 0-dim tensor, a bf16 tensor).
        return "torch.float32"
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        return None
    method = value.func.attr
    if method in _CAST_METHODS and not value.args and not value.keywords:
        return _CAST_METHODS[method]
    if method in ("to", "type"):
        target = value.args[0] if value.args else next((kw.value for kw in value.keywords if kw.arg == "dtype"), None)
        literal = None if target is None else qualified_dtype(ctx, target)
        return None if literal is None else _CANONICAL_DTYPES.get(literal, literal)
    return None


def _holds_float32_enumeration(ctx: FileContext, node: ast.expr) -> bool:
    """Whether arithmetic (`node`) has among its operands, at any depth of its arithmetic, an enumeration cast to
    float32 (`torch.arange(...).float()`, `.to(torch.float32)`; sliced or not)."""
    if isinstance(node, ast.BinOp):
        return _holds_float32_enumeration(ctx, node.left) or _holds_float32_enumeration(ctx, node.right)
    if isinstance(node, ast.UnaryOp):
        return _holds_float32_enumeration(ctx, node.operand)
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    receiver = node.func.value
    while isinstance(receiver, ast.Subscript):
        receiver = receiver.value
    return (
        isinstance(receiver, ast.Call)
        and ctx.qualified_name(receiver.func) == "torch.arange"
        and cast_literal(ctx, node) in _FLOAT32_OR_64
    )


def _passed_arguments(
    ctx: FileContext, function: FunctionNode, argument: ast.arg
) -> list[tuple[ast.expr | None, FunctionNode | None]] | None:
    """What the file's calls of `function` pass for `argument`, with the function each call is in: None for a call
    that leaves the default. None where a use is no call, or a call spreads `*args`/`**kwargs`."""
    placed = _placed(ctx, function)
    if placed is None:
        return None
    graph, function = placed
    if graph.functions.get(function.name) is function:
        uses, skipped = graph.sites.get(function.name, []), 0
    else:
        cls = next((c for c in graph.classes.values() if function in c.body), None)
        if cls is None:
            return None
        uses = graph.method_sites.get((cls.name, function.name), [])
        if function.name in _RUNTIME_ENTRIES:
            uses = [*uses, *_module_calls(ctx, cls.name)]
        decorators = {ast.unparse(decorator) for decorator in function.decorator_list}
        skipped = 0 if "staticmethod" in decorators else 1
    arguments = function.args
    positional = [a.arg for a in (*arguments.posonlyargs, *arguments.args)][skipped:]
    passed: list[tuple[ast.expr | None, FunctionNode | None]] = []
    for use in uses:
        call = use.call
        if call is None or any(isinstance(a, ast.Starred) for a in call.args):
            return None
        if any(keyword.arg is None for keyword in call.keywords):
            return None
        keyword = next((kw.value for kw in call.keywords if kw.arg == argument.arg), None)
        index = positional.index(argument.arg) if argument.arg in positional else None
        if keyword is None and index is not None and index < len(call.args):
            keyword = call.args[index]
        passed.append((keyword, use.function))
    return passed


def _module_calls(ctx: FileContext, class_name: str) -> list[_Site]:
    """The calls that reach the `forward` of a module of the file's class `class_name`: `self.rope(...)` in a class
    of the file that assigns `self.rope = ClassName(...)`."""
    graph = ctx.derived(_graph_of, class_name)
    sites: list[_Site] = []
    for owner in graph.classes.values() if graph is not None else ():
        for node in walk(owner):
            built = isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
            if not (built and isinstance(node.value.func, ast.Name) and node.value.func.id == class_name):
                continue
            for target in node.targets:
                attributes = ctx.derived(_graph_of, target.attr) if is_self_attribute(target) else None
                if attributes is not None:
                    uses = attributes.method_sites.get((owner.name, target.attr), [])
                    sites.extend(use for use in uses if use.call is not None)
    return sites


def passed_floating_dtype(ctx: FileContext, dtype: ast.expr) -> bool:
    """Whether `dtype` is a parameter that a caller in the file passes the dtype of a tensor named as floating:
    `positions(n, dtype=q.dtype)`, `positions(n, self.proj.weight.dtype)`."""
    functions = list(ctx.enclosing_functions(dtype))
    if not isinstance(dtype, ast.Name) or not functions:
        return False
    scope = functions[0]
    found = parameter_of(scope, dtype.id)
    if found is None or assigned_values(scope, dtype.id, before_line=dtype.lineno):
        return False
    return any(
        expression is not None and _names_floating_dtype(expression)
        for expression, _ in _passed_arguments(ctx, scope, found[0]) or []
    )


def _names_floating_dtype(node: ast.expr) -> bool:
    if not (isinstance(node, ast.Attribute) and node.attr == "dtype"):
        return False
    tensor = node.value
    name = tensor.id if isinstance(tensor, ast.Name) else tensor.attr if isinstance(tensor, ast.Attribute) else None
    return name is not None and floating_by_name(name) is True
