"""What RPL204 and its codemod agree on: which products autocast lowers, on which device; which products are RoPE
frequency products; which operands are upcast; what turns autocast off; and which `forward` casts what it returns.

The rule reads these facts from `ast` (`rules/rope_autocast.py`), the codemod from LibCST
(`codemods/rope_autocast.py`); both resolve names through the file's imports, so that `import torch as t` makes
`t.matmul` a product for both.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterable, Sequence
from enum import Enum

from rope_lint import TYPE_CHECKING
from rope_lint.rules.analysis.context import FileContext, FunctionNode, child_nodes, is_self_attribute, walk
from rope_lint.rules.analysis.dtypes import DTYPE_PRESERVING_METHODS, FLOAT32_DTYPES, FLOAT64_DTYPES, qualified_dtype
from rope_lint.rules.analysis.rotary import TABLE_ON_DEVICE, cast_dtype, dtype_cast, own_nodes, promotes_to_float32

if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")


class Lowered(Enum):
    """Whether autocast runs a product in its lower-precision dtype (fp16 or bf16) on one device."""

    ALWAYS = "always"
    WITH_CONTRACTION = "with a contracted index"
    NEVER = "never"


CUDA = "CUDA"
CPU = "CPU"
MATMUL_OPERATOR = "@"
# What autocast does with each product, on (CUDA, CPU), in torch 2.13. Read from torch's dispatcher: the ops with an
# `AutocastCUDA`/`AutocastCPU` kernel (`torch._C._dispatch_dump_table`), each run under autocast for its policy
# (CUDA through fake tensors), and the documented lists ("CUDA Ops that can autocast to float16", "CPU Ops that can
# autocast to bfloat16").
# - `@`, `matmul`, `mm`, `bmm` are in both lists.
# - `mv` is in CUDA's list only.
# - `einsum` is in CUDA's list, so CUDA casts its inputs whatever the equation. CPU's list lacks it: `einsum` then
#   runs as `bmm` (lowered) when an index is contracted, and as elementwise `mul` (not lowered) when none is.
# - `tensordot` runs in fp32 on CUDA (its kernel there is the fp32 policy), and as `mm` (lowered) on CPU.
# - `outer` and `ger` run as elementwise `mul`; `dot` and `vdot` run in fp32 on CUDA and are not lowered on CPU.
LOWERING: dict[str, tuple[Lowered, Lowered]] = {
    MATMUL_OPERATOR: (Lowered.ALWAYS, Lowered.ALWAYS),
    "torch.matmul": (Lowered.ALWAYS, Lowered.ALWAYS),
    "torch.mm": (Lowered.ALWAYS, Lowered.ALWAYS),
    "torch.bmm": (Lowered.ALWAYS, Lowered.ALWAYS),
    "torch.mv": (Lowered.ALWAYS, Lowered.NEVER),
    "torch.einsum": (Lowered.ALWAYS, Lowered.WITH_CONTRACTION),
    "torch.tensordot": (Lowered.NEVER, Lowered.ALWAYS),
    "torch.outer": (Lowered.NEVER, Lowered.NEVER),
    "torch.ger": (Lowered.NEVER, Lowered.NEVER),
    "torch.dot": (Lowered.NEVER, Lowered.NEVER),
    "torch.vdot": (Lowered.NEVER, Lowered.NEVER),
}
# Its first argument is the equation, not an operand.
_EQUATION_FIRST = "torch.einsum"
# The functions among them that autocast lowers on some device.
PRODUCT_FUNCTIONS = frozenset(
    name
    for name, lowering in LOWERING.items()
    if name != MATMUL_OPERATOR and any(device is not Lowered.NEVER for device in lowering)
)


def is_product_function(qualified_name: str | None) -> bool:
    """Whether a call is a product that autocast lowers on some device."""
    return qualified_name in PRODUCT_FUNCTIONS


def lowered_on(qualified_name: str, equation: str | None = None) -> tuple[str, ...]:
    """The devices on which autocast runs the product in its lower-precision dtype. `equation` is an `einsum`'s
    literal equation (None when it is not a literal: then it is not known to contract)."""
    devices = []
    for device, lowering in zip((CUDA, CPU), LOWERING.get(qualified_name, (Lowered.NEVER, Lowered.NEVER)), strict=True):
        if lowering is Lowered.ALWAYS or (lowering is Lowered.WITH_CONTRACTION and einsum_contracts(equation)):
            devices.append(device)
    return tuple(devices)


def einsum_contracts(equation: str | None) -> bool:
    """Whether an `einsum` equation contracts an index: with `->`, an input index absent from the output; without,
    an index that repeats. An ellipsis never contracts."""
    if equation is None:
        return False
    inputs, arrow, output = equation.replace("...", "").partition("->")
    indices = [index for index in inputs if index.isalpha()]
    if arrow:
        return bool(set(indices) - set(output))
    return len(indices) != len(set(indices))


def product_operands(qualified_name: str | None, positional: Sequence[T]) -> list[T]:
    """The operands among the positional arguments of a call to the product function `qualified_name`."""
    return list(positional[1:] if qualified_name == _EQUATION_FIRST else positional[:2])


class Upcast(Enum):
    """The dtype an operand of a product is upcast to, whatever autocast does."""

    FLOAT32 = "float32"
    FLOAT64 = "float64"
    # `t.to(torch.promote_types(t.dtype, torch.float32))`: float64 where `t` is, else float32; known at run time.
    AT_LEAST_FLOAT32 = "float32 or wider"


def upcast(ctx: FileContext, operand: ast.expr) -> Upcast | None:
    """How `operand` is upcast (a `rotary.dtype_cast`): `t.float()` and `t.to(torch.float32)` to float32,
    `t.double()` and `t.to(torch.float64)` to float64, `t.to(torch.promote_types(..., torch.float32))` to float32 or
    wider; None for an operand that is not."""
    cast = dtype_cast(ctx, operand)
    method = cast.func.attr if cast is not None else None
    if method in ("float", "double"):
        return Upcast.FLOAT32 if method == "float" else Upcast.FLOAT64
    if cast is None or method != "to":
        return None
    dtype = cast_dtype(ctx, cast)
    if promotes_to_float32(ctx, dtype):
        return Upcast.AT_LEAST_FLOAT32
    name = None if dtype is None else qualified_dtype(ctx, dtype)
    return Upcast.FLOAT32 if name in FLOAT32_DTYPES else Upcast.FLOAT64 if name in FLOAT64_DTYPES else None


def runs_in_float64(upcasts: Iterable[Upcast | None]) -> bool:
    """Whether a product with operands so upcast runs in float64, which autocast leaves alone: every operand is
    `.double()`. Autocast casts float32 operands to its dtype, those upcast with `.float()` too; where one operand
    is float32 and another float64, CUDA casts the first before an `einsum` that promotes them."""
    upcasts = list(upcasts)
    return bool(upcasts) and all(upcast is Upcast.FLOAT64 for upcast in upcasts)


def upcast_for_the_rest(upcasts: Iterable[Upcast | None]) -> Upcast:
    """The upcast that the fix gives the operands of a product that have none, from those of the others: the dtype
    of one that has one, the widest, as a product outside autocast takes operands of one dtype (`@`) or promotes
    them (`einsum`); else float32 or wider, as their dtype is known only at run time, and `.float()` would compute
    the product of a float64 module in float32."""
    known = set(upcasts)
    return next((dtype for dtype in (Upcast.FLOAT64, Upcast.FLOAT32) if dtype in known), Upcast.AT_LEAST_FLOAT32)


def disables_autocast(callee: str, enabled_false: bool) -> bool:
    """Whether a call, by its callee's source text and whether it passes `enabled=False`, turns autocast off:
    `torch.autocast(..., enabled=False)`, or any `*autocast*` helper called so (`maybe_autocast`)."""
    return enabled_false and "autocast" in callee


def disables_autocast_call(node: ast.expr) -> bool:
    """`disables_autocast` of an expression read from `ast`."""
    if not isinstance(node, ast.Call):
        return False
    enabled_false = any(
        kw.arg == "enabled" and isinstance(kw.value, ast.Constant) and kw.value.value is False for kw in node.keywords
    )
    return disables_autocast(ast.unparse(node.func), enabled_false)


def autocast_off_decorators(tree: ast.Module) -> frozenset[str]:
    """The module-level names that turn autocast off when they decorate a function: a name bound to
    `torch.autocast(..., enabled=False)`, and a function decorator that calls the function it wraps inside
    `with torch.autocast(..., enabled=False):`."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and disables_autocast_call(node.value):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, FunctionNode) and _wraps_in_autocast_off(node):
            names.add(node.name)
    return frozenset(names)


def _wraps_in_autocast_off(decorator: FunctionNode) -> bool:
    parameters = [*decorator.args.posonlyargs, *decorator.args.args]
    if len(parameters) != 1:
        return False
    wrapped = parameters[0].arg
    return any(
        isinstance(node, ast.With | ast.AsyncWith)
        and any(disables_autocast_call(item.context_expr) for item in node.items)
        and any(
            isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == wrapped
            for statement in node.body
            for call in walk(statement)
        )
        for node in walk(decorator)
    )


def decorated_autocast_off(function: FunctionNode, off_decorators: Collection[str]) -> bool:
    """Whether a decorator of `function` turns autocast off for its whole body: `@torch.autocast(..., enabled=False)`
    or a name of `autocast_off_decorators`."""
    return any(
        disables_autocast_call(decorator) or (isinstance(decorator, ast.Name) and decorator.id in off_decorators)
        for decorator in function.decorator_list
    )


def returns_cast(ctx: FileContext, function: FunctionNode) -> bool:
    """Whether every value that `function` returns is cast to a dtype (`cos.to(dtype=x.dtype)`, `.type_as(x)`,
    `.float()`), or is a tuple or list of such values, or a name or attribute that `function` binds only to such
    values (`self.cached = emb.type_as(x)`, then `return self.cached`). Only then does a product upcast to float32
    leave the results' dtypes as they were: in a module cast with `.to(torch.bfloat16)`, a product of its bf16 tables
    is bf16, and `return emb * self.scale` of a float32 product would hand float32 to the bf16 layers after it, which
    fail."""
    bound = bound_values(function)

    def is_cast(value: ast.expr) -> bool:
        if dtype_cast(ctx, value) is not None:
            return True
        values = bound.get(ast.unparse(value), []) if isinstance(value, ast.Name | ast.Attribute) else []
        return bool(values) and all(known is not None and dtype_cast(ctx, known) is not None for known in values)

    returns = [node for node in own_nodes(function) if isinstance(node, ast.Return)]
    return bool(returns) and all(
        node.value is not None and all(is_cast(value) for value in _elements(node.value)) for node in returns
    )


def bound_values(function: FunctionNode) -> dict[str, list[ast.expr | None]]:
    """The values that `function` binds to each name or attribute, by its text (`self.cached`); None for a binding
    with no value of its own (an unpacking of a call's result, a loop's target)."""
    bound: dict[str, list[ast.expr | None]] = {}
    for target, value in _bindings(function):
        for element, own in _unpacked(target, value):
            bound.setdefault(ast.unparse(element), []).append(own)
    return bound


def _unpacked(target: ast.expr, value: ast.expr) -> list[tuple[ast.expr, ast.expr | None]]:
    """Each target that a binding (`_bindings`) makes, with the value bound to it; None where it has none of its own:
    an unpacking of anything but a tuple of as many values."""
    if not isinstance(target, ast.Tuple | ast.List):
        return [(target, value)]
    if not (isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts)):
        return [(element, None) for element in target.elts]
    return [pair for element, own in zip(target.elts, value.elts, strict=True) for pair in _unpacked(element, own)]


def _elements(value: ast.expr) -> list[ast.expr]:
    return list(value.elts) if isinstance(value, ast.Tuple | ast.List) else [value]


# What a value of `forward` derives from, followed back through its local assignments.
FREQUENCIES_OR_POSITIONS = "frequencies or positions"
ACTIVATION = "activation"
# Reads of a tensor's metadata, which carry none of its values.
_METADATA = frozenset({"dtype", "device", "shape", "ndim", "size", "dim", "numel", "len", "is_cuda"})
# Methods whose arguments give only a dtype, a device or a shape: the value is the receiver's.
_RECEIVER_ONLY = frozenset({"to", "type", "type_as", "expand_as", "view_as", "reshape_as"})
_ENUMERATIONS = frozenset({"arange", "linspace"})


class ProductInputs:
    """What each local name of a `forward` derives from, whatever the order of its assignments:
    - frequencies or positions: a tensor the module holds (`self.inv_freq`, `self.freqs`, or its copy on a device
      that the rope codemod reads, `_rope_table_on_device(self, "inv_freq", x.device)`), a method of the class, or
      an enumeration (`torch.arange(seq_len)`, even of a length that the activation gives);
    - the activation: what a submodule (`self.q_proj(...)`) returns.
    `forward`'s arguments derive from neither: positions may come first (`forward(self, grid)`), and the queries and
    keys of an attention that takes them meet no held tensor.
    A product is a RoPE frequency product when an operand derives from frequencies or positions and none from the
    activation: `inv_freq @ position_ids` is one, the attention products `q @ k.transpose(-2, -1)` and `attn @ v`
    are not."""

    def __init__(self, function: FunctionNode, methods: Collection[str]) -> None:
        self.methods = methods
        self.bound = bound_values(function)
        self.names: dict[str, frozenset[str]] = {}
        bindings = list(_bindings(function))
        changed = True
        while changed:
            changed = False
            for target, value in bindings:
                facts = self.facts(value)
                for name in _bound_names(target):
                    if not facts <= self.names.get(name, frozenset()):
                        self.names[name] = self.names.get(name, frozenset()) | facts
                        changed = True

    def is_frequency_product(self, operands: Iterable[ast.expr]) -> bool:
        facts = [self.facts(operand) for operand in operands]
        return any(FREQUENCIES_OR_POSITIONS in fact for fact in facts) and not any(ACTIVATION in fact for fact in facts)

    def upcast(self, ctx: FileContext, operand: ast.expr, seen: frozenset[str] = frozenset()) -> Upcast | None:
        """How an operand is upcast (`upcast`), under indexing and calls that keep its dtype (`t.float().expand(...)`,
        `t.to(device)`); for a name, how every value it is bound to is
        (`inv_freq_expanded = self.inv_freq[None, :, None].float().expand(...)`). A name that a binding reads back
        (`inv_freq_expanded = inv_freq_expanded.to(x.device)`) adds nothing."""
        operand = _dtype_source(operand)
        if not isinstance(operand, ast.Name):
            return upcast(ctx, operand)
        upcasts = {
            None if value is None else self.upcast(ctx, value, seen | {operand.id})
            for value in self.bound.get(operand.id, [None])
            if value is None or not _reads_back(value, seen | {operand.id})
        }
        return upcasts.pop() if len(upcasts) == 1 else None

    def facts(self, node: ast.expr) -> frozenset[str]:
        if isinstance(node, ast.Name):
            return self.names.get(node.id, frozenset())
        if isinstance(node, ast.Attribute) and node.attr in _METADATA:
            return frozenset()
        if is_self_attribute(node):
            return frozenset({FREQUENCIES_OR_POSITIONS})
        if isinstance(node, ast.Lambda):
            return frozenset()
        if isinstance(node, ast.Call):
            return self._call(node)
        return frozenset().union(*(self.facts(child) for child in _child_expressions(node)))

    def _call(self, call: ast.Call) -> frozenset[str]:
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        arguments = frozenset().union(*(self.facts(child) for child in _child_expressions(call) if child is not func))
        if name in _METADATA:
            return frozenset()
        if is_self_attribute(func):
            if func.attr in self.methods:
                return arguments | {FREQUENCIES_OR_POSITIONS}
            return frozenset({ACTIVATION})
        receiver = self.facts(func.value) if isinstance(func, ast.Attribute) else frozenset()
        if name in _RECEIVER_ONLY:
            return receiver
        if name in _ENUMERATIONS or name == TABLE_ON_DEVICE:  # lengths, whatever they are read from; a held table
            return frozenset({FREQUENCIES_OR_POSITIONS})
        return receiver | arguments


def _dtype_source(operand: ast.expr) -> ast.expr:
    """The value under indexing and calls that keep its dtype: `t` of `t[None].expand(n, -1)` and of
    `t.to(x.device)`."""
    while isinstance(operand, ast.Subscript) or (
        isinstance(operand, ast.Call)
        and isinstance(operand.func, ast.Attribute)
        and (operand.func.attr in DTYPE_PRESERVING_METHODS or _moves_only(operand))
    ):
        operand = operand.value if isinstance(operand, ast.Subscript) else operand.func.value
    return operand


def _moves_only(call: ast.Call) -> bool:
    """`t.to(x.device)`, `t.to("cuda")`, `t.to(device=d, non_blocking=True)`: a move that keeps the dtype (not
    `t.to(other)`, which takes the other tensor's dtype too)."""
    assert isinstance(call.func, ast.Attribute)
    return (
        call.func.attr == "to"
        and bool(call.args or call.keywords)
        and all(
            (isinstance(arg, ast.Attribute) and arg.attr == "device") or isinstance(arg, ast.Constant)
            for arg in call.args
        )
        and all(keyword.arg in ("device", "non_blocking", "copy") for keyword in call.keywords)
    )


def _reads_back(value: ast.expr, names: frozenset[str]) -> bool:
    source = _dtype_source(value)
    return isinstance(source, ast.Name) and source.id in names


def _bindings(function: FunctionNode) -> Iterable[tuple[ast.expr, ast.expr]]:
    for node in walk(function):
        if isinstance(node, ast.Assign):
            yield from ((target, node.value) for target in node.targets)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr) and node.value is not None:
            yield node.target, node.value
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            yield node.target, node.iter
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            yield node.optional_vars, node.context_expr


def _bound_names(target: ast.expr) -> Iterable[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _bound_names(element)
    elif isinstance(target, ast.Starred | ast.Subscript):  # `table[..., 0::2] = ...` writes into `table`
        yield from _bound_names(target.value)


def _child_expressions(node: ast.AST) -> Iterable[ast.expr]:
    for child in child_nodes(node):
        if isinstance(child, ast.expr):
            yield child
        elif isinstance(child, ast.keyword):
            yield child.value
