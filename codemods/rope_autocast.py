"""The autocast codemod: RoPE frequency products in `forward` run with autocast off, in float32 or wider (RPL204's fix).

In the `forward` of every rotary class, a statement with a product that autocast lowers on some device (`@`,
`torch.matmul`, `mm`, `bmm`, `mv`, `einsum`, `tensordot`, under whatever name the file imports torch; not `outer`
or `ger`), whose operands derive from frequencies or positions and not from the activation (not the attention
products `q @ k.transpose(-2, -1)`), that no `torch.autocast(..., enabled=False)` encloses and whose operands are
not all float64 goes into

    with torch.autocast(device_type=<input>.device.type, enabled=False):

Its operands that are not upcast yet (read through the names they are bound to) take the dtype of one that is
(`.float()`), else `.to(torch.promote_types(t.dtype, torch.float32))`: bf16 becomes float32, and a float64 module's
product stays float64. `<input>` is a tensor that `forward` takes on every path (`rotary.device_source`); a
`forward` without one (it takes a sequence length) is left as it is, and so is a `forward` whose decorator turns
autocast off, or one that returns a value it does not cast to a dtype (`autocast.returns_cast`), and so is every
`forward` of a file written for TorchScript (`context.written_for_torchscript`). Consecutive such statements share
one block. `forward` casts its results at the end as before, so their dtypes do not change: the fix is safe.

Run it through rope-lint (`rope-lint fix`, on files with RPL204 findings) or LibCST:
`python -m libcst.tool codemod --no-format -x rope_lint.codemods.commands.RopeAutocastCommand PATH`.

What counts as a lowered product, a frequency product, an upcast operand and autocast turned off is
`rope_lint.rules.analysis.autocast`'s description, which RPL204 reads too; names resolve through the file's
imports, as the rule resolves them.
"""

from __future__ import annotations

import ast
import textwrap

import libcst as cst
from rope_lint.codemods.codemod_file import CodemodFile
from rope_lint.codemods.nodes import Satisfies, Shape, findall, like, matches
from rope_lint.codemods.rope_tables import rotary_class_names

from rope_lint.rules.analysis import autocast, rotary
from rope_lint.rules.analysis.context import FileContext, written_for_torchscript
from rope_lint.rules.edits import Transformer, as_operand, with_method

_MATMUL = like.BinaryOperation(operator=like.MatrixMultiply())


def rewrite(tree: cst.Module, file: CodemodFile) -> cst.Module:
    """The autocast codemod's rewrite of `tree`, the module of `file` or a run of its statements."""
    return tree.visit(_AutocastOff(rotary_class_names(tree), _Names(_read_imports(file, tree))))


def _read_imports(file: CodemodFile, module: cst.Module) -> FileContext:
    """The file, read as far as the rules read its imports. From the file itself: rope-lint hands the codemod a run
    of the file's statements, without its imports. From the module when there is no file to read (a rule's example)."""
    if file.text is None:
        file = CodemodFile(file.path, module.code)
    assert file.text is not None
    return FileContext(file.path or "", file.text, file.tree or ast.Module(body=[], type_ignores=[]), ())


class _Names:
    """Names read through the file's imports (`t.matmul` is "torch.matmul" after `import torch as t`). A name that no
    import binds is read as it is spelled: the codemod may see a run of statements cut from a text it cannot read."""

    def __init__(self, imports: FileContext) -> None:
        self.imports = imports
        self.imported = imports.imported_names
        self.off_decorators = autocast.autocast_off_decorators(imports.tree)
        # The file's own name for torch, for the `autocast` call the codemod writes.
        self.torch = imports.module_alias("torch") or "torch"

    def qualified(self, node: cst.BaseExpression) -> str | None:
        if isinstance(node, cst.Name):
            return self.imported.get(node.value, node.value)
        if isinstance(node, cst.Attribute):
            base = self.qualified(node.value)
            return f"{base}.{node.attr.value}" if base else None
        return None

    def product_call(self) -> Shape:
        return like.Call(func=Satisfies(lambda func: autocast.is_product_function(self.qualified(func))))

    def is_lowered(self, product: cst.CSTNode) -> bool:
        """Whether autocast lowers the product on some device (an `einsum` by its equation on CPU)."""
        if isinstance(product, cst.BinaryOperation):
            return bool(autocast.lowered_on(autocast.MATMUL_OPERATOR))
        assert isinstance(product, cst.Call)
        name = self.qualified(product.func)
        equation = product.args[0].value if product.args else None
        literal = equation.evaluated_value if isinstance(equation, cst.SimpleString) else None
        return name is not None and bool(autocast.lowered_on(name, literal if isinstance(literal, str) else None))

    def operands(self, product: cst.CSTNode) -> list[cst.BaseExpression]:
        if isinstance(product, cst.BinaryOperation):
            return [product.left, product.right]
        assert isinstance(product, cst.Call)
        positional = [arg.value for arg in product.args if arg.keyword is None]
        return autocast.product_operands(self.qualified(product.func), positional)


class _Products:
    """The products of one `forward` that the fix rewrites: lowered by autocast on some device, with operands that
    derive from frequencies or positions (`autocast.ProductInputs`, read from the same `forward` as the rule reads)."""

    def __init__(self, names: _Names, inputs: autocast.ProductInputs) -> None:
        self.names = names
        self.inputs = inputs

    def upcast(self, operand: cst.BaseExpression) -> autocast.Upcast | None:
        """How the operand is upcast, read as the rule reads it (`ProductInputs.upcast`)."""
        return self.inputs.upcast(self.names.imports, _as_ast(operand))

    def is_frequency_product(self, product: cst.CSTNode) -> bool:
        if not (matches(product, _MATMUL) or matches(product, self.names.product_call())):
            return False
        operands = [_as_ast(operand) for operand in self.names.operands(product)]
        return self.names.is_lowered(product) and self.inputs.is_frequency_product(operands)


def _as_ast(node: cst.BaseExpression) -> ast.expr:
    return ast.parse(f"({cst.Module([]).code_for_node(node)})", mode="eval").body


class _AutocastOff(Transformer):
    def __init__(self, rotary: set[str], names: _Names) -> None:
        super().__init__()
        self.rotary = rotary
        self.names = names
        self.classes: list[tuple[str, set[str]]] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        methods = {statement.name.value for statement in node.body.body if isinstance(statement, cst.FunctionDef)}
        self.classes.append((node.name.value, methods))
        return True

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        self.classes.pop()
        return updated_node

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        if not (self.classes and self.classes[-1][0] in self.rotary and updated_node.name.value == "forward"):
            return updated_node
        # The device type comes from a tensor that forward takes on every path, never from a length or a shape.
        parsed = ast.parse(textwrap.dedent(cst.Module([]).code_for_node(original_node))).body[0]
        assert isinstance(parsed, ast.FunctionDef | ast.AsyncFunctionDef)
        device = rotary.device_source(parsed)
        if (
            device is None
            or not isinstance(updated_node.body, cst.IndentedBlock)
            or autocast.decorated_autocast_off(parsed, self.names.off_decorators)
            or not autocast.returns_cast(self.names.imports, parsed)
            or written_for_torchscript(self.names.imports.source)
        ):
            return updated_node
        products = _Products(self.names, autocast.ProductInputs(parsed, self.classes[-1][1]))
        body = _with_autocast_off(list(updated_node.body.body), device, products)
        return updated_node.with_changes(body=updated_node.body.with_changes(body=body))


def _with_autocast_off(
    statements: list[cst.BaseStatement], device: str, products: _Products
) -> list[cst.BaseStatement]:
    """The statements, with each run of statements holding an autocast product wrapped in one autocast-off block."""
    result: list[cst.BaseStatement] = []
    run: list[cst.BaseStatement] = []
    for statement in statements:
        if isinstance(statement, cst.SimpleStatementLine) and _has_autocast_product(statement, products):
            run.append(statement.visit(_Upcast(products)))
            continue
        if run:
            result.append(_autocast_off_block(run, device, products.names))
            run = []
        if isinstance(statement, cst.With) and any(_disables_autocast(item.item) for item in statement.items):
            result.append(statement)
        elif isinstance(statement, cst.If | cst.For | cst.While | cst.With) and isinstance(
            statement.body, cst.IndentedBlock
        ):
            inner = _with_autocast_off(list(statement.body.body), device, products)
            result.append(statement.with_changes(body=statement.body.with_changes(body=inner)))
        else:
            result.append(statement)
    if run:
        result.append(_autocast_off_block(run, device, products.names))
    return result


def _autocast_off_block(run: list[cst.BaseStatement], device: str, names: _Names) -> cst.With:
    # The comments and blank lines above the first statement go above the block.
    first = run[0]
    assert isinstance(first, cst.SimpleStatementLine)
    context = cst.parse_expression(f"{names.torch}.autocast(device_type={device}.type, enabled=False)")
    return cst.With(
        items=[cst.WithItem(context)],
        body=cst.IndentedBlock(body=[first.with_changes(leading_lines=[]), *run[1:]]),
        leading_lines=first.leading_lines,
    )


def _has_autocast_product(statement: cst.SimpleStatementLine, products: _Products) -> bool:
    names = products.names
    found = [*findall(statement, _MATMUL), *findall(statement, names.product_call())]
    return any(
        products.is_frequency_product(product)
        and not autocast.runs_in_float64(map(products.upcast, names.operands(product)))
        for product in found
    )


def _disables_autocast(node: cst.BaseExpression) -> bool:
    if not isinstance(node, cst.Call):
        return False
    enabled_false = any(
        arg.keyword is not None and arg.keyword.value == "enabled" and matches(arg.value, like.Name("False"))
        for arg in node.args
    )
    return autocast.disables_autocast(cst.Module([]).code_for_node(node.func), enabled_false)


class _Upcast(Transformer):
    """An upcast on every operand of a frequency product that has none: the dtype of an operand that has one, else
    float32 or wider (`autocast.upcast_for_the_rest`)."""

    def __init__(self, products: _Products) -> None:
        super().__init__()
        self.products = products
        self.names = products.names

    def leave_BinaryOperation(
        self, original_node: cst.BinaryOperation, updated_node: cst.BinaryOperation
    ) -> cst.BaseExpression:
        if not self.products.is_frequency_product(original_node):
            return updated_node
        left, right = self._upcast([updated_node.left, updated_node.right])
        return updated_node.with_changes(left=left, right=right)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not self.products.is_frequency_product(original_node):
            return updated_node
        operands = self.names.operands(updated_node)
        upcast = dict(zip(map(id, operands), self._upcast(operands), strict=True))
        args = [arg.with_changes(value=upcast[id(arg.value)]) if id(arg.value) in upcast else arg
                for arg in updated_node.args]  # fmt: skip
        return updated_node.with_changes(args=args)

    def _upcast(self, operands: list[cst.BaseExpression]) -> list[cst.BaseExpression]:
        upcasts = [self.products.upcast(operand) for operand in operands]
        rest = autocast.upcast_for_the_rest(upcasts)
        return [
            operand if upcast else self._with_upcast(operand, rest)
            for operand, upcast in zip(operands, upcasts, strict=True)
        ]

    def _with_upcast(self, operand: cst.BaseExpression, upcast: autocast.Upcast) -> cst.Call:
        """`t.float()`, `t.double()`, or `t.to(torch.promote_types(t.dtype, torch.float32))`."""
        if upcast is not autocast.Upcast.AT_LEAST_FLOAT32:
            return with_method(as_operand(operand), "float()" if upcast is autocast.Upcast.FLOAT32 else "double()")
        # Indexing keeps the dtype: `self.inv_freq[None, :, None]` has that of `self.inv_freq`.
        source = operand
        while isinstance(source, cst.Subscript):
            source = source.value
        dtype = f"{cst.Module([]).code_for_node(as_operand(source))}.dtype"
        torch = self.names.torch
        return with_method(as_operand(operand), f"to({torch}.promote_types({dtype}, {torch}.float32))")
