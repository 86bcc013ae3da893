from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from functools import partial

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import Fix, FixSafety
from rope_lint.prefilter import PrefilterSpec, screens
from rope_lint.rules.analysis import logdomain
from rope_lint.rules.analysis.context import FileContext, child_nodes, walk
from rope_lint.rules.base import FixAvailability, Flagged, Invalid, Rule, Valid
from rope_lint.rules.payloads import MergeInChain, MergeOfExps, MergeOfShift, MergeOfStatements

if TYPE_CHECKING:
    import libcst as cst

# Calls on the added term that change its dtype or device but not its value: `y.to(torch.double).exp()`.
_CASTS = frozenset({"to", "float", "double", "half", "bfloat16", "type", "type_as"})
# What the added term and the statements between the steps of an in-place merge may read of the merged tensor:
# nothing that its values decide.
_METADATA = frozenset({"dtype", "device", "shape"})
# Statements that may stand between the steps: they neither jump nor open a block.
_SIMPLE_STATEMENTS = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Pass)
_CANDIDATES = ("torch.logaddexp",)
_MESSAGE = "merging log-sum-exps through `exp` overflows to inf from {} ≈ 89 in float32 (710 in float64); use {}"


class LseMerge(Rule):
    """
    Two log-sum-exps are merged through `exp`, which overflows.

    ## What it does
    Flags `log(exp(a) + exp(b))`, `a + log(1 + exp(b - a))` and `a + log1p(exp(b - a))`, in the function and
    the method spelling and mixtures of them (`(a.exp() + b.exp()).log()`). Flags the in-place merge of one
    tensor within one block: `x.exp_()`, then `x.add_(y.exp())` (or `x += y.exp()`), then `x.log_()`, also
    chained as `x.exp_().add_(y.exp()).log_()`; the added term may be cast (`y.to(torch.double).exp()`,
    `y.exp().to(x.dtype)`), and simple statements may stand in between if they use none of the names in `x`
    other than for its dtype, device or shape. The max-shift idiom `m + log(exp(a - m) + exp(b - m))` is stable
    as written and stays silent.

    ## Why is this bad?
    `exp` is `inf` from 88.7 in float32 and 709.8 in float64: the merged log-sum-exp of an attention block
    becomes `inf`, and the output that it rescales is silently zeroed. `a + log1p(exp(b - a))` overflows as
    soon as `b` exceeds `a` by that much, and is `nan` for two `-inf` (fully masked rows). `torch.logaddexp`
    is exact over the whole range and merges `(-inf, -inf)` to `-inf`.

    ## Example
    ```python
    def merge(lse, block_lse):
        lse.exp_()
        lse.add_(block_lse.exp())
        lse.log_()
    ```

    ## Use instead
    ```python
    def merge(lse, block_lse):
        lse.copy_(torch.logaddexp(lse, block_lse))
    ```

    ## Fix safety
    Safe: the same dtype and shape, and the same values where the original was finite. The in-place merge
    stays in place: it writes into `x` with `x.copy_(...)` and never rebinds the name, so a caller that passed
    a view of a larger buffer still sees the update. The merged value is computed where `add_` stood; the
    statements in between stay, and comments on the removed `exp_()` and `log_()` lines go with them.
    A merge whose steps share their lines with other statements, or interleave with another in-place merge,
    is flagged without a fix.

    ## Known problems
    Only two `exp`s written in the merge itself are read. An `exp` bound to a name first (`ea = torch.exp(a)`,
    then `torch.log(ea + torch.exp(b))`), a sum spelled with `add` (`torch.exp(a).add(torch.exp(b))`), and a sum
    of three or more (a `torch.logsumexp` over their stack) are not flagged.
    """

    code = "RPL301"
    name = "lse-merge"
    prefilter = PrefilterSpec(triggers=(b"log(", b"log1p(", b"log_("), screen=screens.log_may_be_hazard)
    fix_availability = FixAvailability.SOMETIMES  # none for steps sharing lines with others, or interleaved
    fix_safeties = frozenset({FixSafety.SAFE})
    fix_payloads = (MergeOfExps, MergeOfShift, MergeInChain, MergeOfStatements)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        for call in logdomain.calls(ctx, "log"):
            terms = _exp_sum(ctx, logdomain.unary_operand(ctx, call, "log"))
            if terms is not None and not logdomain.is_shift_added_back(ctx, call, terms):
                yield self.report(call, _MESSAGE.format("a or b", "`torch.logaddexp(a, b)`"), _fix(ctx, MergeOfExps))
        for call in [*logdomain.calls(ctx, "log"), *logdomain.calls(ctx, "log1p")]:
            merge = logdomain.shifted_merge(ctx, call)
            if merge is not None:
                fix = _fix(ctx, partial(MergeOfShift, base_on_left=merge.base_side == "left"))
                yield self.report(merge.node, _MESSAGE.format("b - a", "`torch.logaddexp(a, b)`"), fix)
        for call in ctx.method_calls("log_"):
            yield from _in_place_merges(self, ctx, call)

    def fix(
        self, node: cst.CSTNode, payload: MergeOfExps | MergeOfShift | MergeInChain | MergeOfStatements
    ) -> cst.CSTNode:
        import libcst as cst

        from rope_lint.rules import edits

        function = payload.function
        if isinstance(payload, MergeOfExps):  # log(exp(a) + exp(b))
            assert isinstance(node, cst.Call)
            terms = edits.unary_operand(node)
            assert isinstance(terms, cst.BinaryOperation)
            assert isinstance(terms.left, cst.Call) and isinstance(terms.right, cst.Call)
            a, b = edits.unary_operand(terms.left), edits.unary_operand(terms.right)
            return edits.function_call(function, a, b)
        if isinstance(payload, MergeOfShift):  # a + log(1 + exp(b - a))
            assert isinstance(node, cst.BinaryOperation)
            base, log_call = (node.left, node.right) if payload.base_on_left else (node.right, node.left)
            assert isinstance(log_call, cst.Call)
            inner = edits.unary_operand(log_call)
            exp_call = edits.besides_one(inner) if isinstance(inner, cst.BinaryOperation) else inner
            assert isinstance(exp_call, cst.Call)
            shift = edits.unary_operand(exp_call)
            assert isinstance(shift, cst.BinaryOperation)
            return edits.function_call(function, base, shift.left)
        if isinstance(payload, MergeInChain):  # x.exp_().add_(y.exp()).log_()
            assert isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            add_call = node.func.value
            assert isinstance(add_call, cst.Call) and isinstance(add_call.func, cst.Attribute)
            exp_call = add_call.func.value
            assert isinstance(exp_call, cst.Call) and isinstance(exp_call.func, cst.Attribute)
            return _copy_merged(function, exp_call.func.value, add_call.args[0].value)
        return _merge_statements(node, payload)

    examples = (
        Invalid(
            "import torch\nm = torch.log(torch.exp(a) + torch.exp(b))\n",
            fixed="import torch\nm = torch.logaddexp(a, b)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nm = (a.exp() + torch.exp(b)).log()\n",
            fixed="import torch\nm = torch.logaddexp(a, b)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch as t\nm = t.log((x - 1).exp() + y.exp()) * 2\n",
            fixed="import torch as t\nm = t.logaddexp(x - 1, y) * 2\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nm = a + torch.log(1 + torch.exp(b - a))\n",
            fixed="import torch\nm = torch.logaddexp(a, b)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nm = (lse_b - lse_a).exp().log1p() + lse_a\n",
            fixed="import torch\nm = torch.logaddexp(lse_a, lse_b)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nm = 2 * (a + torch.log1p(torch.exp(b - a)))\n",
            fixed="import torch\nm = 2 * torch.logaddexp(a, b)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\n"
            "\n"
            "\n"
            "def merge(lse, block_lse):\n"
            "    # Fold the block in.\n"
            "    lse.exp_()\n"
            "    lse.add_(block_lse.exp())  # linear domain\n"
            "    lse.log_()\n"
            "    return lse\n",
            fixed="import torch\n"
            "\n"
            "\n"
            "def merge(lse, block_lse):\n"
            "    # Fold the block in.\n"
            "    lse.copy_(torch.logaddexp(lse, block_lse))  # linear domain\n"
            "    return lse\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\n"
            "def merge(out, lse, block_lse):\n"
            "    out.lse.exp_()\n"
            "    block = block_lse.to(out.lse.dtype)\n"
            "    out.lse.add_(block.to(torch.double).exp())\n"
            "    scale = 0.5\n"
            "    out.lse.log_()\n",
            fixed="import torch\n"
            "def merge(out, lse, block_lse):\n"
            "    block = block_lse.to(out.lse.dtype)\n"
            "    out.lse.copy_(torch.logaddexp(out.lse, block.to(torch.double)))\n"
            "    scale = 0.5\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nif ready: lse.exp_(); lse.add_(torch.exp(other).to(lse.dtype)); lse.log_()\n",
            fixed="import torch\nif ready: lse.copy_(torch.logaddexp(lse, other.to(lse.dtype)))\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nn = 1; lse[0].exp_(); lse[0] += (a + b).exp(); lse[0].log_(); n += 1\n",
            fixed="import torch\nn = 1; lse[0].copy_(torch.logaddexp(lse[0], a + b)); n += 1\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\n"
            "for i, block in enumerate(blocks):\n"
            "    self.lse[i].exp_()\n"
            "    self.lse[i].add_(self.block_lse[i].to(torch.float64).exp())\n"
            "    self.lse[i].log_()\n",
            fixed="import torch\n"
            "for i, block in enumerate(blocks):\n"
            "    self.lse[i].copy_(torch.logaddexp(self.lse[i], self.block_lse[i].to(torch.float64)))\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nstate.lse.exp_().add_(other.exp()).log_()\n",
            fixed="import torch\nstate.lse.copy_(torch.logaddexp(state.lse, other))\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # The file has no name for torch: the fix imports it.
            "def merge(lse, other):\n    lse.exp_()\n    lse.add_(other.exp())\n    lse.log_()\n",
            fixed="import torch\n\ndef merge(lse, other):\n    lse.copy_(torch.logaddexp(lse, other))\n",
            safety=FixSafety.SAFE,
        ),
        # Steps that share a line with statements outside the merge: flagged, with no fix.
        Invalid("import torch\nlse.exp_(); lse.add_(other.exp())\nlse.log_()\n"),
        # Two merges interleaved: both flagged, neither fixed.
        Invalid(
            "import torch\na.exp_()\nb.exp_()\na.add_(x.exp())\nb.add_(y.exp())\na.log_()\nb.log_()\n",
            count=2,
        ),
        Valid("import torch\nm = torch.logaddexp(a, b)\n"),
        Valid("import torch\nm = mx + torch.log(torch.exp(a - mx) + torch.exp(b - mx))\n"),
        Valid("import torch\nm = a + torch.log1p(torch.exp(b - c))\n"),
        Valid("import torch\nm = torch.log(torch.exp(a) + b)\n"),
        Valid("import numpy as np\nm = np.log(np.exp(a) + np.exp(b))\n"),
        # The merged tensor is read between the steps: the rewrite would change what is read.
        Valid("import torch\nlse.exp_()\nprint(lse.sum())\nlse.add_(other.exp())\nlse.log_()\n"),
        Valid("import torch\nlse.exp_()\nif other is not None:\n    lse.add_(other.exp())\nlse.log_()\n"),
        Valid("import torch\nlse.exp_()\nlse.add_(other)\nlse.log_()\n"),
        Valid("import torch\nlse.exp_()\nlse.add_(lse.exp())\nlse.log_()\n"),
        Valid("import torch\nlse[0].exp_()\nlse[0].add_(lse[:, 0].exp())\nlse[0].log_()\n"),
        Valid("import torch\nself.lse.exp_()\nself.refresh()\nself.lse.add_(o.exp())\nself.lse.log_()\n"),
        Valid(
            "import torch\n"
            "for i in range(n):\n"
            "    lse[i].exp_()\n"
            "    i += 1\n"
            "    lse[i].add_(o.exp())\n"
            "    lse[i].log_()\n"
        ),
    )


def _fix(ctx: FileContext, payload: Callable[[str], tuple]) -> Fix | None:
    return logdomain.fix(ctx, _CANDIDATES, payload)


def _exp_sum(ctx: FileContext, node: ast.expr | None) -> list[ast.expr] | None:
    """`[a, b]` when `node` is `exp(a) + exp(b)`."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
        return None
    a, b = logdomain.unary_operand(ctx, node.left, "exp"), logdomain.unary_operand(ctx, node.right, "exp")
    return None if a is None or b is None else [a, b]


def _is_exp_term(ctx: FileContext, node: ast.expr) -> bool:
    """`y.exp()` or `torch.exp(y)`, cast or not, before or after the `exp`."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _CASTS:
        node = node.func.value
    return logdomain.unary_operand(ctx, node, "exp") is not None


def _names(target: ast.expr) -> set[str] | None:
    """The names in a merged tensor's expression (`lse`, `self.lse`, `lse[i]`); None where evaluating it could do
    anything, or give another tensor the second time (a call)."""
    names = set()
    for node in walk(target):
        if isinstance(node, ast.Call | ast.NamedExpr | ast.Await | ast.Yield | ast.YieldFrom | ast.Lambda):
            return None
        if isinstance(node, ast.Name):
            names.add(node.id)
    return names


def _uses(node: ast.AST, target: ast.expr, names: set[str]) -> bool:
    """Whether `node` mentions any of `names` other than in the dtype, device or shape of `target`."""
    metadata = {
        id(name)
        for attribute in walk(node)
        if isinstance(attribute, ast.Attribute)
        and attribute.attr in _METADATA
        and logdomain.same(attribute.value, target)
        for name in walk(attribute.value)
    }
    return any(isinstance(name, ast.Name) and name.id in names and id(name) not in metadata for name in walk(node))


def _reads(node: ast.AST, target: ast.expr) -> bool:
    """Whether `node` refers to `target`, to a part of it (`lse[i]` of `lse`), to what holds it (`lse` of `lse[i]`,
    `self` of `self.lse`) or to another index of what holds it (`lse[:, 0]` of `lse[0]`), other than for its dtype,
    device or shape. `block[i]` is no reference to `lse[i]`."""
    held = _path(target)
    for reference in _references(node):
        if (
            isinstance(reference, ast.Attribute)
            and reference.attr in _METADATA
            and logdomain.same(reference.value, target)
        ):
            continue
        path = _path(reference)
        if path == held or path.startswith(f"{held}.") or held.startswith(f"{path}."):
            return True
    return False


def _path(reference: ast.expr) -> str:
    """`self.lse` of `self.lse[:, i]`: the names and attributes of a reference, without its indices."""
    if isinstance(reference, ast.Subscript):
        return _path(reference.value)
    if isinstance(reference, ast.Attribute):
        return f"{_path(reference.value)}.{reference.attr}"
    assert isinstance(reference, ast.Name)
    return reference.id


def _references(node: ast.AST) -> Iterator[ast.expr]:
    """The longest chains of names, attributes and subscripts in `node` (`self.lse[i]`), and those in subscripts."""
    if _is_reference(node):
        assert isinstance(node, ast.expr)
        yield node
        while isinstance(node, ast.Attribute | ast.Subscript):
            if isinstance(node, ast.Subscript):
                yield from _references(node.slice)
            node = node.value
        return
    for child in child_nodes(node):
        yield from _references(child)


def _is_reference(node: ast.AST) -> bool:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return isinstance(node, ast.Name)


def _in_place_receiver(statement: ast.stmt, method: str) -> ast.expr | None:
    """`x` of the expression statement `x.<method>()`."""
    call = statement.value if isinstance(statement, ast.Expr) else None
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == method:
        return call.func.value if not call.args and not call.keywords else None
    return None


def _added_term(statement: ast.stmt, target: ast.expr) -> ast.expr | None:
    """`y` of `target.add_(y)` or `target += y`."""
    if isinstance(statement, ast.AugAssign) and isinstance(statement.op, ast.Add):
        return statement.value if logdomain.same(statement.target, target) else None
    call = statement.value if isinstance(statement, ast.Expr) else None
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "add_"
        and len(call.args) == 1
        and not call.keywords
        and logdomain.same(call.func.value, target)
    ):
        return call.args[0]
    return None


def _in_place_merges(rule: LseMerge, ctx: FileContext, log_call: ast.Call) -> Iterator[Flagged]:
    """The in-place merge that ends in `log_call`, `x.log_()`: a chain, or statements of one block."""
    if not isinstance(log_call.func, ast.Attribute) or log_call.args or log_call.keywords:
        return
    message = _MESSAGE.format("x or y", "`x.copy_(torch.logaddexp(x, y))`")
    receiver = log_call.func.value
    if isinstance(receiver, ast.Call):
        if _is_chained_merge(ctx, receiver):
            yield rule.report(log_call, message, _fix(ctx, MergeInChain))
        return
    statement = ctx.parent(log_call)
    if isinstance(statement, ast.Expr) and statement.value is log_call:
        yield from _statement_merge(rule, ctx, statement, receiver, message)


def _is_chained_merge(ctx: FileContext, add_call: ast.Call) -> bool:
    """Whether `add_call` is the `x.exp_().add_(y.exp())` of `x.exp_().add_(y.exp()).log_()`."""
    if not (isinstance(add_call.func, ast.Attribute) and add_call.func.attr == "add_"):
        return False
    exp_call = add_call.func.value
    if not (isinstance(exp_call, ast.Call) and isinstance(exp_call.func, ast.Attribute)):
        return False
    target = exp_call.func.value
    names = _names(target)
    return (
        exp_call.func.attr == "exp_"
        and not exp_call.args
        and names is not None
        and len(add_call.args) == 1
        and not add_call.keywords
        and _is_exp_term(ctx, add_call.args[0])
        and not _reads(add_call.args[0], target)
    )


def _statement_merge(
    rule: LseMerge, ctx: FileContext, statement: ast.Expr, target: ast.expr, message: str
) -> Iterator[Flagged]:
    """`target.exp_()` ... `target.add_(y.exp())` ... `target.log_()` ending in `statement`, within its block."""
    names = _names(target)
    if names is None:
        return
    block = _block_of(ctx.parent(statement), statement)
    last = next(index for index, other in enumerate(block) if other is statement)
    add = first = None
    for index in range(last - 1, -1, -1):
        candidate = block[index]
        term = _added_term(candidate, target) if add is None else None
        if term is not None:
            if not _is_exp_term(ctx, term) or _reads(term, target):
                return
            add = index
        elif add is not None and _is_in_place_on(candidate, "exp_", target):
            first = index
            break
        elif not isinstance(candidate, _SIMPLE_STATEMENTS) or _uses(candidate, target, names):
            return
    if add is None or first is None:
        return
    run = block[first : last + 1]
    fixable = _on_own_lines(block, first, last) or run[0].lineno == run[-1].end_lineno
    # Another merge's steps between these ones: fixing both would overlap.
    interleaved = any(
        _in_place_receiver(other, "exp_") is not None or _in_place_receiver(other, "log_") is not None
        for other in run[1:-1]
    )
    fix = _fix(ctx, partial(MergeOfStatements, add_index=add - first)) if fixable and not interleaved else None
    yield rule.report(run[0], message, fix, last=run[-1])


def _is_in_place_on(statement: ast.stmt, method: str, target: ast.expr) -> bool:
    receiver = _in_place_receiver(statement, method)
    return receiver is not None and logdomain.same(receiver, target)


def _block_of(parent: ast.AST | None, statement: ast.stmt) -> list[ast.stmt]:
    """The statement list of `parent` (its body, orelse, finalbody...) that holds `statement`."""
    for _, value in ast.iter_fields(parent) if parent is not None else ():
        if isinstance(value, list) and any(other is statement for other in value):
            return value
    return [statement]


def _on_own_lines(block: list[ast.stmt], first: int, last: int) -> bool:
    """Whether statements `first`..`last` of `block` each have their lines to themselves."""
    for index in range(max(first - 1, 0), min(last + 1, len(block) - 1)):
        if (block[index].end_lineno or 0) >= block[index + 1].lineno:
            return False
    return True


def _copy_merged(function: str, target: cst.BaseExpression, term: cst.BaseExpression) -> cst.Call:
    """`target.copy_(torch.logaddexp(target, y))` for the added term `y.exp()` (or a cast of it)."""
    import libcst as cst

    from rope_lint.rules import edits

    merged = edits.function_call(function, target.deep_clone(), _without_exp(term))
    return cst.Call(func=cst.Attribute(value=target, attr=cst.Name("copy_")), args=[cst.Arg(merged)])


def _without_exp(term: cst.BaseExpression) -> cst.BaseExpression:
    """`y.to(d)` of `y.exp().to(d)` or `torch.exp(y).to(d)`; `y` of `y.exp()`."""
    import libcst as cst

    from rope_lint.rules import edits

    assert isinstance(term, cst.Call)
    if isinstance(term.func, cst.Attribute) and term.func.attr.value in _CASTS:
        receiver = edits.as_operand(_without_exp(term.func.value))
        return term.with_changes(func=term.func.with_changes(value=receiver))
    return edits.unary_operand(term)


def _merge_statements(node: cst.CSTNode, merge: MergeOfStatements) -> cst.CSTNode:
    """The run `x.exp_()` ... `x.add_(y.exp())` ... `x.log_()`, as a block cut down to it (see `fixes`): the `add_`
    becomes `x.copy_(torch.logaddexp(x, y))`, the `exp_()` and `log_()` go, and the statements between stay."""
    import libcst as cst

    assert isinstance(node, cst.Module | cst.IndentedBlock | cst.SimpleStatementLine | cst.SimpleStatementSuite)
    run = list(node.body)
    index = merge.add_index
    line = run[index]
    step = line.body[0] if isinstance(line, cst.SimpleStatementLine) else line
    if isinstance(step, cst.AugAssign):
        target, term = step.target, step.value
    else:
        assert isinstance(step, cst.Expr) and isinstance(step.value, cst.Call)
        assert isinstance(step.value.func, cst.Attribute)
        target, term = step.value.func.value, step.value.args[0].value
    assert isinstance(target, cst.BaseExpression)
    merged = cst.Expr(value=_copy_merged(merge.function, target, term), semicolon=step.semicolon)
    if isinstance(line, cst.SimpleStatementLine):  # one statement a line: comments above the run stay above it
        kept = [*run[1:index], line.with_changes(body=[merged]), *run[index + 1 : -1]]
        kept[0] = kept[0].with_changes(leading_lines=[*run[0].leading_lines, *kept[0].leading_lines])
    else:  # statements on one line: the last one kept ends as the run did, with or without a `;`
        kept = [*run[1:index], merged, *run[index + 1 : -1]]
        kept[-1] = kept[-1].with_changes(semicolon=run[-1].semicolon)
    return node.with_changes(body=kept)
