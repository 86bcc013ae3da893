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


class Log1p(Rule):
    """
    `log(1 + x)` loses `x` where it is small; `torch.log1p(x)` does not.

    ## What it does
    Flags `log(1 + x)` and `log(x + 1)` with the literal `1`, in the function and the method spelling
    (`torch.log(1 + x)`, `(x + 1).log()`).

    ## Why is this bad?
    `1 + x` rounds away every digit of `x` below the precision of 1: in float32, `log(1 + 1e-8)` is exactly 0,
    and for `|x|` around 1e-4 only three digits of the result are right. `log1p` computes the same function
    without forming `1 + x`.

    `log(1 + exp(x))` is RPL304's (softplus: `log1p(exp(x))` would still overflow), and `log(x + 1e-8)` is a
    guard against `log(0)`, not `log(1 + x)`: neither is flagged here.

    Nor is `log(1 + x)` where `x` is proven to hold integers (`logdomain.is_integral`): an integer enumeration
    (`torch.arange` with an integral start and step), a cast or rounding to integers (`.long()`, `torch.floor`),
    integer arithmetic on those, and local names assigned only from them in the same function. `x` is then 0 or at
    least 1 in magnitude, so there is nothing small for `1 + x` to round away: `torch.log(1 + rel.abs())`, with
    `rel` a difference of integer coordinates, is as exact as `log1p`.

    ## Example
    ```python
    bits = torch.log(1 + ratio)
    ```

    ## Use instead
    ```python
    bits = torch.log1p(ratio)
    ```

    ## Fix safety
    Safe: the same dtype and shape, and the same value up to the rounding that `1 + x` lost.

    ## Known problems
    Integers are proven only from the code of the function that takes the log: an integer tensor that arrives as a
    parameter or an attribute (`positions: torch.LongTensor`) is still reported, and the fix is then harmless.
    """

    code = "RPL306"
    name = "log1p"
    prefilter = PrefilterSpec(triggers=(b"log(",), screen=screens.log_may_be_hazard)
    fix_availability = FixAvailability.SOMETIMES  # none where the file binds the name `torch` to something else
    fix_safeties = frozenset({FixSafety.SAFE})
    fix_payloads = (payloads.WriteFunction,)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        for call in logdomain.calls(ctx, "log"):
            operand = logdomain.one_plus(logdomain.unary_operand(ctx, call, "log"))
            if operand is None or _is_number(operand) or logdomain.unary_operand(ctx, operand, "exp") is not None:
                continue
            if logdomain.is_integral(ctx, operand):
                continue
            yield self.report(
                call,
                "`log(1 + x)` rounds away small `x`; use `torch.log1p(x)`",
                logdomain.fix(ctx, ("torch.log1p", "torch.special.log1p"), payloads.WriteFunction),
            )

    def fix(self, node: cst.CSTNode, payload: payloads.WriteFunction) -> cst.CSTNode:
        import libcst as cst

        from rope_lint.rules import edits

        assert isinstance(node, cst.Call)
        one_plus = edits.unary_operand(node)
        assert isinstance(one_plus, cst.BinaryOperation)
        return edits.function_call(payload.function, edits.besides_one(one_plus))

    examples = (
        Invalid(
            "import torch\nbits = torch.log(1 + ratio)\n",
            fixed="import torch\nbits = torch.log1p(ratio)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nbits = (ratio + 1.0).log()\n",
            fixed="import torch\nbits = torch.log1p(ratio)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch as t\ny = t.log(1 + p * q) / 2\n",
            fixed="import torch as t\ny = t.log1p(p * q) / 2\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\ny = torch.log(1 + (a - b))\n",
            fixed="import torch\ny = torch.log1p(a - b)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # Only `log` is imported: the fix names `torch.log1p` and imports torch.
            "from torch import log\n\ny = log(1 + x)\n",
            fixed="from torch import log\nimport torch\n\ny = torch.log1p(x)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "from torch import log, log1p\n\ny = log(x + 1)\n",
            fixed="from torch import log, log1p\n\ny = log1p(x)\n",
            safety=FixSafety.SAFE,
        ),
        # The file binds `torch` to something else: no spelling of `torch.log1p` to write.
        Invalid("from helpers import torch\ny = (x + 1).log()\n"),
        # Integer coordinates: `1 + x` is exact, and `x` is never small.
        Valid(
            "import torch\n"
            "def bias(n):\n"
            "    pos = torch.arange(n)\n"
            "    rel = pos[:, None] - pos[None, :]\n"
            "    return torch.log(1 + rel.abs())\n"
        ),
        Valid(
            "import torch\n"
            "def bias(q, k):\n"
            "    rel = (q - k).long()\n"
            "    rel = rel.abs()\n"
            "    return torch.log(rel.float() + 1)\n"
        ),
        Valid("import torch\ndef scale(p, n):\n    return torch.log(1 + torch.floor(p / n))\n"),
        # Near misses: a float enumeration, a fractional step, a tensor of unknown dtype from a parameter.
        Invalid(
            "import torch\ndef bias(n):\n    rel = torch.arange(n) / n\n    return torch.log(1 + rel.abs())\n",
            fixed="import torch\ndef bias(n):\n    rel = torch.arange(n) / n\n    return torch.log1p(rel.abs())\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\ndef ramp(n):\n    t = torch.arange(0, n, 0.5)\n    return torch.log(1 + t)\n",
            fixed="import torch\ndef ramp(n):\n    t = torch.arange(0, n, 0.5)\n    return torch.log1p(t)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\ndef bias(rel):\n    return torch.log(1 + rel.abs())\n",
            fixed="import torch\ndef bias(rel):\n    return torch.log1p(rel.abs())\n",
            safety=FixSafety.SAFE,
        ),
        Valid("import torch\ny = torch.log(x + 1e-8)\n"),
        Valid("import torch\ny = torch.log(2 + x)\n"),
        Valid("import torch\ny = torch.log(1 - x)\n"),
        Valid("import torch\ny = torch.log1p(x)\n"),
        Valid("import torch\ny = torch.log(1 + torch.exp(x))\n"),
        Valid("import math\ny = math.log(1 + x)\n"),
        Valid("import numpy as np\ny = np.log(1 + x)\n"),
    )


def _is_number(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)
