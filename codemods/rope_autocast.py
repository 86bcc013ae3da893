"""The autocast codemod: RoPE frequency products in `forward` run in float32, with autocast off (RPL204's fix).

In the `forward` of every rotary class, a statement with a matrix product (`@`, `torch.matmul`, `torch.outer`,
`torch.einsum`, `torch.bmm`, `torch.mm`) that no `torch.autocast(..., enabled=False)` encloses and whose operands
are not all upcast goes into

    with torch.autocast(device_type=<input>.device.type, enabled=False):

with its operands upcast with `.float()`. Consecutive such statements share one block. `forward` casts its results
to the input dtype at the end as before, so the result's dtype does not change: the fix is safe.

Run it through rope-lint (`rope-lint fix`, on files with RPL204 findings) or LibCST:
`python -m libcst.tool codemod --no-format -x codemods.rope_autocast.RopeAutocastCommand PATH`.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.codemod import VisitorBasedCodemodCommand
from rope_lint.codemods.rope_tables import rotary_class_names

_PRODUCT_FUNCTIONS = ("matmul", "outer", "ger", "einsum", "bmm", "mm")
_PRODUCT_CALL = m.Call(func=m.Attribute(value=m.Name("torch"), attr=m.OneOf(*map(m.Name, _PRODUCT_FUNCTIONS))))
_MATMUL = m.BinaryOperation(operator=m.MatrixMultiply())


class RopeAutocastCommand(VisitorBasedCodemodCommand):
    DESCRIPTION = "RoPE frequency products in forward in float32, with autocast disabled around them."

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        return tree.visit(_AutocastOff(rotary_class_names(tree)))


class _AutocastOff(cst.CSTTransformer):
    def __init__(self, rotary: set[str]) -> None:
        super().__init__()
        self.rotary = rotary
        self.classes: list[str] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.classes.append(node.name.value)
        return True

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        self.classes.pop()
        return updated_node

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        if not (self.classes and self.classes[-1] in self.rotary and updated_node.name.value == "forward"):
            return updated_node
        inputs = [param.name.value for param in updated_node.params.params if param.name.value != "self"]
        if not inputs or not isinstance(updated_node.body, cst.IndentedBlock):
            return updated_node
        body = _with_autocast_off(list(updated_node.body.body), inputs[0])
        return updated_node.with_changes(body=updated_node.body.with_changes(body=body))


def _with_autocast_off(statements: list[cst.BaseStatement], input_name: str) -> list[cst.BaseStatement]:
    """The statements, with each run of statements holding an autocast product wrapped in one autocast-off block."""
    result: list[cst.BaseStatement] = []
    run: list[cst.BaseStatement] = []
    for statement in statements:
        if isinstance(statement, cst.SimpleStatementLine) and _has_autocast_product(statement):
            run.append(statement.visit(_Upcast()))
            continue
        if run:
            result.append(_autocast_off_block(run, input_name))
            run = []
        if isinstance(statement, cst.With) and any(_disables_autocast(item.item) for item in statement.items):
            result.append(statement)
        elif isinstance(statement, cst.If | cst.For | cst.While | cst.With) and isinstance(
            statement.body, cst.IndentedBlock
        ):
            inner = _with_autocast_off(list(statement.body.body), input_name)
            result.append(statement.with_changes(body=statement.body.with_changes(body=inner)))
        else:
            result.append(statement)
    if run:
        result.append(_autocast_off_block(run, input_name))
    return result


def _autocast_off_block(run: list[cst.BaseStatement], input_name: str) -> cst.With:
    # The comments and blank lines above the first statement go above the block.
    first = run[0]
    assert isinstance(first, cst.SimpleStatementLine)
    context = cst.parse_expression(f"torch.autocast(device_type={input_name}.device.type, enabled=False)")
    return cst.With(
        items=[cst.WithItem(context)],
        body=cst.IndentedBlock(body=[first.with_changes(leading_lines=[]), *run[1:]]),
        leading_lines=first.leading_lines,
    )


def _has_autocast_product(statement: cst.SimpleStatementLine) -> bool:
    products = [*m.findall(statement, _MATMUL), *m.findall(statement, _PRODUCT_CALL)]
    return any(not all(map(_is_upcast, _operands(product))) for product in products)


def _operands(product: cst.CSTNode) -> list[cst.BaseExpression]:
    if isinstance(product, cst.BinaryOperation):
        return [product.left, product.right]
    assert isinstance(product, cst.Call)
    args = [arg.value for arg in product.args if arg.keyword is None]
    einsum = m.matches(product.func, m.Attribute(attr=m.Name("einsum")))
    return args[1:] if einsum else args


def _is_upcast(node: cst.BaseExpression) -> bool:
    """`t.float()`, `t.double()`, or `t.to(...)` naming float32 or float64."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return False
    if node.func.attr.value in ("float", "double"):
        return True
    float_dtype = m.Attribute(value=m.Name("torch"), attr=m.OneOf(*map(m.Name, ("float", "float32", "float64"))))
    return node.func.attr.value == "to" and any(m.matches(arg.value, float_dtype) for arg in node.args)


def _disables_autocast(node: cst.BaseExpression) -> bool:
    return m.matches(
        node,
        m.Call(
            func=m.Name(value=m.MatchRegex(".*autocast")) | m.Attribute(attr=m.Name(value=m.MatchRegex(".*autocast"))),
            args=[m.ZeroOrMore(), m.Arg(keyword=m.Name("enabled"), value=m.Name("False")), m.ZeroOrMore()],
        ),
    )


class _Upcast(cst.CSTTransformer):
    """`.float()` on every operand of a product that is not upcast already."""

    def leave_BinaryOperation(
        self, original_node: cst.BinaryOperation, updated_node: cst.BinaryOperation
    ) -> cst.BaseExpression:
        if not m.matches(updated_node, _MATMUL):
            return updated_node
        return updated_node.with_changes(left=_as_float(updated_node.left), right=_as_float(updated_node.right))

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not m.matches(updated_node, _PRODUCT_CALL):
            return updated_node
        operands = {id(operand) for operand in _operands(updated_node)}
        args = [arg.with_changes(value=_as_float(arg.value)) if id(arg.value) in operands else arg
                for arg in updated_node.args]  # fmt: skip
        return updated_node.with_changes(args=args)


def _as_float(node: cst.BaseExpression) -> cst.BaseExpression:
    if _is_upcast(node):
        return node
    from rope_lint.rules.edits import as_operand, cast_to_float

    return cast_to_float(as_operand(node))
