from __future__ import annotations

import ast
from collections.abc import Iterator

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import FixSafety
from rope_lint.prefilter import PrefilterSpec, screens
from rope_lint.rules import payloads
from rope_lint.rules.analysis import logdomain
from rope_lint.rules.analysis.context import FileContext
from rope_lint.rules.base import FixAvailability, Flagged, Invalid, Rule, Valid

if TYPE_CHECKING:
    import libcst as cst


class LogSigmoid(Rule):
    """
    `log(sigmoid(x))` is `-inf` where `logsigmoid(x)` is finite.

    ## What it does
    Flags `log(sigmoid(x))` and `log(1 - sigmoid(x))`, with `sigmoid` as `torch.sigmoid`, `F.sigmoid`,
    `torch.special.expit` or `x.sigmoid()`, and `log` in either spelling.

    ## Why is this bad?
    `sigmoid(x)` underflows to 0 from `x` ≈ -88 in float32 (-745 in float64), and `1 - sigmoid(x)` rounds to 0
    from `x` ≈ 17 in float32: the log is `-inf`, a loss built on it is `inf`, and its gradient is `nan`. Before
    that, `1 - sigmoid(x)` has already cancelled most of its digits. `logsigmoid(x)` is finite and accurate
    everywhere, and `log(1 - sigmoid(x))` is `logsigmoid(-x)`.

    ## Example
    ```python
    loss = -(labels * torch.log(torch.sigmoid(z)) + (1 - labels) * torch.log(1 - torch.sigmoid(z)))
    ```

    ## Use instead
    ```python
    loss = -(labels * F.logsigmoid(z) + (1 - labels) * F.logsigmoid(-z))
    ```

    ## Fix safety
    Safe: the same dtype and shape, and the same values where the original was finite. The negation is exact.

    ## Known problems
    A sigmoid bound to a name first (`p = torch.sigmoid(x)`, then `torch.log(p)`) is not followed, and
    `log1p(-sigmoid(x))` is not flagged. A guarded log, `log(sigmoid(x) + eps)` or `log(sigmoid(x).clamp(min=eps))`,
    is left alone: it is finite, though it clips the loss at `log(eps)` where `logsigmoid` stays exact.
    """

    code = "RPL305"
    name = "logsigmoid"
    prefilter = PrefilterSpec(triggers=(b"log(",), screen=screens.log_may_be_hazard)
    fix_availability = FixAvailability.SOMETIMES  # none where the file binds the name `torch` to something else
    fix_safeties = frozenset({FixSafety.SAFE})
    fix_payloads = (payloads.WriteFunction,)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        for call in logdomain.calls(ctx, "log"):
            operand = logdomain.unary_operand(ctx, call, "log")
            if isinstance(operand, ast.BinOp) and isinstance(operand.op, ast.Sub) and logdomain.is_one(operand.left):
                complement, sigmoid = True, operand.right
            else:
                complement, sigmoid = False, operand
            if logdomain.unary_operand(ctx, sigmoid, "sigmoid") is None:
                continue
            yield self.report(
                call,
                f"`log({'1 - ' if complement else ''}sigmoid(x))` is -inf where the sigmoid rounds to "
                f"{'1' if complement else '0'}; use `F.logsigmoid({'-' if complement else ''}x)`",
                logdomain.fix(ctx, ("torch.nn.functional.logsigmoid",), payloads.WriteFunction),
            )

    def fix(self, node: cst.CSTNode, payload: payloads.WriteFunction) -> cst.CSTNode:
        import libcst as cst

        from rope_lint.rules import edits

        assert isinstance(node, cst.Call)
        operand = edits.unary_operand(node)
        if isinstance(operand, cst.BinaryOperation):  # 1 - sigmoid(x)
            assert isinstance(operand.right, cst.Call)
            return edits.function_call(payload.function, edits.negated(edits.unary_operand(operand.right)))
        assert isinstance(operand, cst.Call)
        return edits.function_call(payload.function, edits.unary_operand(operand))

    examples = (
        Invalid(
            "import torch\nlp = torch.log(torch.sigmoid(z))\n",
            fixed="import torch\nlp = torch.nn.functional.logsigmoid(z)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nimport torch.nn.functional as F\nlq = torch.log(1 - torch.sigmoid(z))\n",
            fixed="import torch\nimport torch.nn.functional as F\nlq = F.logsigmoid(-z)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch.nn.functional as F\nlq = (1.0 - scores.sigmoid()).log()\n",
            fixed="import torch.nn.functional as F\nlq = F.logsigmoid(-scores)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nlq = torch.log(1 - torch.special.expit(a - b))\n",
            fixed="import torch\nlq = torch.nn.functional.logsigmoid(-(a - b))\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nlq = torch.log(1 - torch.sigmoid(-z))\n",
            fixed="import torch\nlq = torch.nn.functional.logsigmoid(z)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch.nn.functional as F\nlp = F.sigmoid(z).log()\n",
            fixed="import torch.nn.functional as F\nlp = F.logsigmoid(z)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nloss = -(y * torch.log(torch.sigmoid(z)) + (1 - y) * torch.log(1 - torch.sigmoid(z)))\n",
            fixed="import torch\n"
            "loss = -(y * torch.nn.functional.logsigmoid(z) + (1 - y) * torch.nn.functional.logsigmoid(-z))\n",
            safety=FixSafety.SAFE,
            count=2,
        ),
        # The file binds `torch` to something else: no spelling of `logsigmoid` to write.
        Invalid("from helpers import torch\nlp = z.sigmoid().log()\n"),
        Valid("import torch\nlp = torch.log(torch.sigmoid(z) + 1e-6)\n"),
        Valid("import torch\nlp = torch.log(2 - torch.sigmoid(z))\n"),
        Valid("import torch.nn.functional as F\nlp = F.logsigmoid(z)\n"),
        Valid("import torch\nlp = torch.log(torch.tanh(z))\n"),
    )
