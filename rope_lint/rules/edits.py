"""LibCST edits that rule fixes share: the arange family, and the log-domain family; and `Transformer`, the base of the
transformers that apply fixes and codemods. A rule imports them in its `fix` only, so that `check` never imports
LibCST."""

from __future__ import annotations

import ast
import functools
import typing
from collections.abc import Callable

import libcst as cst

from rope_lint import TYPE_CHECKING

if TYPE_CHECKING:
    from rope_lint.rules.payloads import Int64Enumeration, PromotedDtype


class Transformer(cst.CSTTransformer):
    """A LibCST transformer that calls its `visit_<Node>` and `leave_<Node>` methods, and no per-attribute hooks
    (`visit_<Node>_<attribute>`): LibCST looks each of those up by name for every field of every node it visits, a
    fifth of the rope codemod's time in the fix of the transformers 5.24.0 package. Its subclasses define none.

    It leaves unvisited the children of a node in which no node can lie that it has a method for (`_hooked`): LibCST
    rebuilds every node it visits, and most of a class's nodes are its whitespace, commas and dots."""

    def on_visit(self, node: cst.CSTNode) -> bool:
        kind = type(node)
        visit = _hook(type(self), "visit_", kind)
        if visit is not None and visit(self, node) is False:
            return False
        return not _hooked(type(self)).isdisjoint(_descendant_kinds(kind))

    def on_leave(  # type: ignore[override]  (LibCST's is generic in the node's type)
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[cst.CSTNode]:
        leave = _hook(type(self), "leave_", type(original_node))
        return updated_node if leave is None else leave(self, original_node, updated_node)

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        pass

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass


@functools.cache
def _hook(transformer: type, prefix: str, node: type) -> Callable | None:
    """The transformer's method for a type of node, as LibCST names it (`visit_Call`), or None. LibCST's own, which
    do nothing, are None."""
    hook = getattr(transformer, prefix + node.__name__, None)
    return None if hook is None or hook.__module__.startswith("libcst.") else hook


@functools.cache
def _hooked(transformer: type) -> frozenset[type]:
    """The node types that the transformer has a `visit_` or `leave_` method for."""
    return frozenset(
        kind
        for kind in _node_kinds(cst.CSTNode)
        if _hook(transformer, "visit_", kind) is not None or _hook(transformer, "leave_", kind) is not None
    )


@functools.cache
def _descendant_kinds(kind: type) -> frozenset[type]:
    """The node types that can lie anywhere inside a node of type `kind`, from the types of its fields."""
    found: set[type] = set()
    pending = [kind]
    while pending:
        for child in _field_kinds(pending.pop()) - found:
            found.add(child)
            pending.append(child)
    return frozenset(found)


@functools.cache
def _field_kinds(kind: type) -> frozenset[type]:
    """The node types that the fields of a node of type `kind` can hold, as LibCST annotates them."""
    return frozenset(child for hint in typing.get_type_hints(kind).values() for child in _annotated_kinds(hint))


def _annotated_kinds(hint: object) -> set[type]:
    """The node types that a value annotated `hint` can be: a node type and its subclasses, the types inside a
    `Sequence[...]`, `Union[...]` or `Optional[...]`; no others."""
    if typing.get_args(hint):
        return {kind for argument in typing.get_args(hint) for kind in _annotated_kinds(argument)}
    return _node_kinds(hint) if isinstance(hint, type) and issubclass(hint, cst.CSTNode) else set()


@functools.cache
def _node_kinds(base: type) -> frozenset[type]:
    """`base` and every subclass of it."""
    return frozenset({base}.union(*(_node_kinds(subclass) for subclass in base.__subclasses__())))


def int64_enumeration(call: cst.Call, enumeration: Int64Enumeration) -> cst.BaseExpression:
    """`torch.arange(0.0, n, 2.0, dtype=X)` -> `torch.arange(0, n, 2, dtype=torch.int64).<cast>`, where the cast
    (`float()`, `double()`, `to(...)`) gives back the floating dtype; none where detection found `.float()` after
    the call already."""
    int64_call = with_keyword(integral_literals(call), "dtype", f"{enumeration.torch}.int64")
    if enumeration.end_rounding:
        int64_call = _with_end_rounded(int64_call, enumeration.end_rounding)
    if not enumeration.cast:
        return int64_call
    return with_method(int64_call, enumeration.cast)


def _with_end_rounded(call: cst.Call, rounding: str) -> cst.Call:
    """The end of `torch.arange(...)` wrapped in `rounding` (`math.ceil`): the `end=` argument, else the second
    positional one, else the only one."""
    args = list(call.args)
    positional = [index for index, arg in enumerate(args) if arg.keyword is None and not arg.star]
    keyword = [index for index, arg in enumerate(args) if arg.keyword is not None and arg.keyword.value == "end"]
    index = keyword[0] if keyword else positional[1] if len(positional) > 1 else positional[0]
    function = cst.parse_expression(rounding)
    args[index] = args[index].with_changes(value=cst.Call(func=function, args=[cst.Arg(args[index].value)]))
    return call.with_changes(args=args)


def promoted_dtype(call: cst.Call, promoted: PromotedDtype) -> cst.Call:
    """`torch.arange(..., dtype=X)` -> `torch.arange(..., dtype=<promoted>)`, the bounds as they were."""
    return with_keyword(call, "dtype", promoted.dtype)


def integral_literals(call: cst.Call) -> cst.Call:
    """`2.0` -> `2` and `-1.0` -> `-1` among the call's arguments, so an int64 enumeration gets int bounds."""

    def integral(value: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(value, cst.Float) and float(value.value).is_integer():
            return cst.Integer(str(int(float(value.value))))
        if isinstance(value, cst.UnaryOperation):
            return value.with_changes(expression=integral(value.expression))
        return value

    return call.with_changes(
        args=[arg.with_changes(value=integral(arg.value)) if arg.keyword is None or arg.keyword.value != "dtype"
              else arg for arg in call.args]
    )  # fmt: skip


def with_keyword(call: cst.Call, keyword: str, value_code: str) -> cst.Call:
    """Set `keyword=value`: an existing argument gets the new value in place, so that formatting and order stay;
    a new one goes last, laid out like the arguments before it."""
    value = cst.parse_expression(value_code)
    args = list(call.args)
    for index, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == keyword:
            args[index] = arg.with_changes(value=value)
            return call.with_changes(args=args)
    new = cst.Arg(value=value, keyword=cst.Name(keyword), equal=EQUAL)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        # A trailing comma: the call is split one argument a line. The last argument takes the separator of the one
        # before it (a newline and the indentation), and the new one the trailing comma.
        separator = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else last.comma
        args[-1] = last.with_changes(comma=separator)
        args.append(new.with_changes(comma=last.comma))
    else:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.append(new)
    return call.with_changes(args=args)


EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def with_method(node: cst.BaseExpression, call_code: str) -> cst.Call:
    """`node.<call_code>`: `node.float()` for "float()"."""
    call = cst.parse_expression(f"_.{call_code}")
    assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
    return call.with_changes(func=call.func.with_changes(value=node))


# The log-domain rules (RPL301-RPL307). Detection has matched the shape already, with names resolved; these only take
# the matched expression apart and build its replacement.


def unary_operand(call: cst.Call) -> cst.BaseExpression:
    """`x` of `torch.log(x)` or of `x.log()`: detection matched one of the two, and only the function has arguments."""
    if call.args:
        return call.args[0].value
    assert isinstance(call.func, cst.Attribute)
    return call.func.value


def is_one(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Integer | cst.Float) and node.evaluated_value == 1


def besides_one(operation: cst.BinaryOperation) -> cst.BaseExpression:
    """`x` of `1 + x` or `x + 1`."""
    return operation.right if is_one(operation.left) else operation.left


def as_argument(node: cst.BaseExpression) -> cst.BaseExpression:
    """`node` without the parentheses that only its old place needed: `(a - b).exp()` gives the argument `a - b`."""
    if node.lpar and not isinstance(node, cst.Tuple | cst.GeneratorExp | cst.NamedExpr | cst.Yield):
        return node.with_changes(lpar=[], rpar=[])
    return node


def as_assigned_value(node: cst.BaseExpression) -> cst.BaseExpression:
    """`node` in parentheses where it does not stand on its own as an assignment's value: taken out of a call's
    brackets, a value that formatted code breaks across lines (`1.0` over `/ (...)`) would end the statement at its
    first line break, and a walrus would not parse."""
    try:
        ast.parse(f"_ = {cst.Module([]).code_for_node(node)}")
    except SyntaxError:
        return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return node


def as_operand(node: cst.BaseExpression) -> cst.BaseExpression:
    """`node` in parentheses unless it is atomic, for a receiver (`(a + b).to(d)`) or a negation (`-(a - b)`)."""
    if node.lpar or isinstance(node, cst.Name | cst.Attribute | cst.Call | cst.Subscript):
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def negated(node: cst.BaseExpression) -> cst.BaseExpression:
    """`-node`; `-(-x)` is written `x`."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return node.expression
    return cst.UnaryOperation(operator=cst.Minus(), expression=as_operand(node))


def function_call(function: str, *arguments: cst.BaseExpression) -> cst.Call:
    """`function(argument, ...)`, with `function` a dotted name such as `F.softplus`."""
    return cst.Call(func=cst.parse_expression(function), args=[cst.Arg(as_argument(value)) for value in arguments])


def as_function_call(
    call: cst.Call, function: str, method_spelling: bool, operand: Callable[[cst.BaseExpression], cst.BaseExpression]
) -> cst.Call:
    """`x.reduce(*rest)` (method spelling) or `reduce(x, *rest)` -> `function(operand(x), *rest)`."""
    if method_spelling:
        assert isinstance(call.func, cst.Attribute)
        first = cst.Arg(call.func.value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        rest = list(call.args)
    else:
        first, rest = call.args[0], list(call.args[1:])
    first = first.with_changes(value=as_argument(operand(first.value)))
    return call.with_changes(func=cst.parse_expression(function), args=[first, *rest])
