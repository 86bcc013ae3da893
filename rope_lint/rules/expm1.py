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


class Expm1(Rule):
    """
    `exp(x) - 1` loses `x` where it is small; `torch.expm1(x)` does not.

    ## What it does
    Flags a subtraction whose left operand is `exp(x)` (function or method spelling) and whose right operand
    is the literal `1`. Only the subtraction itself is matched, as Python groups it: `2 * torch.exp(x) - 1`
    and `a + torch.exp(x) - 1` subtract 1 from `2 * exp(x)` and `a + exp(x)`, not from `exp(x)`, and stay
    silent. So does a subtraction rounded to an integer at once (`torch.round(torch.exp(d) - 1).long()`, a
    duration predicted in the log domain): what the cancellation loses is far below the rounding.

    ## Why is this bad?
    Near `x = 0`, `exp(x)` is close to 1 and the subtraction cancels its leading digits: in float32,
    `exp(1e-8) - 1` is exactly 0 and for `|x|` around 1e-4 only three digits are right. `expm1` computes the
    same function without the cancellation.

    ## Example
    ```python
    scale = (torch.exp(rate * t) - 1) / rate
    ```

    ## Use instead
    ```python
    scale = torch.expm1(rate * t) / rate
    ```

    ## Fix safety
    Safe: the replacement is exactly the subtraction's own node, so the larger expression keeps its meaning;
    the same dtype and shape, and the same value up to the rounding that the subtraction lost.

    ## Known problems
    The TorchScript-based ONNX exporter (`torch.onnx.export(..., dynamo=False)`) has no conversion for
    `torch.expm1` (opset 17: "Exporting the operator 'aten::expm1' to ONNX opset version 17 is not supported"),
    where it exports `torch.exp(x) - 1`: a model exported that way stops exporting after the fix.
    """

    code = "RPL307"
    name = "expm1"
    prefilter = PrefilterSpec(triggers=(b"exp(",), screen=screens.exp_may_be_hazard)
    fix_availability = FixAvailability.SOMETIMES  # none where the file binds the name `torch` to something else
    fix_safeties = frozenset({FixSafety.SAFE})
    fix_payloads = (payloads.WriteFunction,)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        for call in logdomain.calls(ctx, "exp"):
            subtraction = ctx.parent(call)
            if (
                logdomain.unary_operand(ctx, call, "exp") is None
                or not isinstance(subtraction, ast.BinOp)
                or not isinstance(subtraction.op, ast.Sub)
                or subtraction.left is not call
                or not logdomain.is_one(subtraction.right)
                or logdomain.rounded_at_once(ctx, subtraction)
            ):
                continue
            yield self.report(
                subtraction,
                "`exp(x) - 1` cancels to 0 for small `x`; use `torch.expm1(x)`",
                logdomain.fix(ctx, ("torch.expm1", "torch.special.expm1"), payloads.WriteFunction),
            )

    def fix(self, node: cst.CSTNode, payload: payloads.WriteFunction) -> cst.CSTNode:
        import libcst as cst

        from rope_lint.rules import edits

        assert isinstance(node, cst.BinaryOperation) and isinstance(node.left, cst.Call)
        return edits.function_call(payload.function, edits.unary_operand(node.left))

    examples = (
        Invalid(
            "import torch\nscale = (torch.exp(rate * t) - 1) / rate\n",
            fixed="import torch\nscale = torch.expm1(rate * t) / rate\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\ny = x.exp() - 1.0\n",
            fixed="import torch\ny = torch.expm1(x)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\ny = (x - m).exp() - 1 - w\n",
            fixed="import torch\ny = torch.expm1(x - m) - w\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\ny = 2 * (torch.exp(x) - 1)\n",
            fixed="import torch\ny = 2 * torch.expm1(x)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch as t\ny = w - (t.exp(x) - 1)\n",
            fixed="import torch as t\ny = w - t.expm1(x)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # A file with no import of torch at all (method spelling only): the fix imports it.
            "def grow(x):\n    return x.exp() - 1\n",
            fixed="import torch\n\ndef grow(x):\n    return torch.expm1(x)\n",
            safety=FixSafety.SAFE,
        ),
        # The file binds `torch` to something else: no spelling of `torch.expm1` to write.
        Invalid("from helpers import torch\ny = x.exp() - 1\n"),
        Valid("import torch\ny = 2 * torch.exp(x) - 1\n"),
        Valid("import torch\ny = a + torch.exp(x) - 1\n"),
        Valid("import torch\ny = a - torch.exp(x) - 1\n"),
        Valid("import torch\ny = -torch.exp(x) - 1\n"),
        Valid("import torch\ny = torch.exp(x) ** 2 - 1\n"),
        Valid("import torch\ny = torch.exp(x) - 1e-3\n"),
        Valid("import torch\ny = 1 - torch.exp(x)\n"),
        Valid("import torch\ny = torch.expm1(x)\n"),
        Valid("import torch\nframes = torch.round(torch.exp(log_frames) - 1).long()\n"),
        Valid("import torch\nframes = (log_frames.exp() - 1).ceil()\n"),
        Valid("import math\ny = math.exp(x) - 1\n"),
    )
