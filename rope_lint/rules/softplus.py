from __future__ import annotations

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


class Softplus(Rule):
    """
    `log(1 + exp(x))` overflows; `softplus(x)` is the same function without the overflow.

    ## What it does
    Flags `log(1 + exp(x))`, `log(exp(x) + 1)` and `log1p(exp(x))`, in the function and the method spelling
    and mixtures of them (`torch.log(1 + x.exp())`, `x.exp().log1p()`). `a + log(1 + exp(b - a))` is a
    log-sum-exp merge, which RPL301 turns into `torch.logaddexp(a, b)`. An `x` that is never positive
    (`-x.abs()`, `-torch.square(x)`, `-F.relu(x)`, a literal at most 0) is left alone: `exp(x)` is at most 1
    there, and `relu(x) + log1p(exp(-x.abs()))` is how softplus itself is written stably.

    ## Why is this bad?
    `exp(x)` is `inf` from `x` ≈ 88.7 in float32 (709.8 in float64), and so is the result, where the true value
    is `x` itself. `log1p(exp(x))` is more accurate for very negative `x` but overflows just the same.
    `torch.nn.functional.softplus` computes `log(1 + exp(x))` without forming `exp(x)` for large `x`.

    ## Example
    ```python
    scale = torch.log(1 + torch.exp(raw_scale))
    ```

    ## Use instead
    ```python
    scale = torch.nn.functional.softplus(raw_scale)
    ```

    ## Fix safety
    Safe: the same dtype and shape, and the same values where the original was finite (softplus returns `x`
    itself above 20, which differs from `log(1 + exp(x))` by less than `exp(-20)`). The fix writes the function
    through an existing import (`F.softplus`), and adds `import torch` only where the file has none.

    ## Known problems
    Only torch's `exp`, `log` and `log1p` are read, as the file's imports name them: a framework's own operators
    (a tracer's `exp` and `log1p`, taken as arguments or imported from it) are not flagged, however they compute.
    """

    code = "RPL304"
    name = "softplus"
    prefilter = PrefilterSpec(triggers=(b"log(", b"log1p("), screen=screens.log_may_be_hazard)
    fix_availability = FixAvailability.SOMETIMES  # none where the file binds the name `torch` to something else
    fix_safeties = frozenset({FixSafety.SAFE})
    fix_payloads = (payloads.WriteFunction,)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        for call in [*logdomain.calls(ctx, "log"), *logdomain.calls(ctx, "log1p")]:
            argument = logdomain.softplus_argument(ctx, call)
            if argument is None or logdomain.never_positive(ctx, argument) or logdomain.shifted_merge(ctx, call):
                continue
            yield self.report(
                call,
                "`log(1 + exp(x))` overflows to inf from x ≈ 89 in float32; use `torch.nn.functional.softplus(x)`",
                logdomain.fix(ctx, ("torch.nn.functional.softplus",), payloads.WriteFunction),
            )

    def fix(self, node: cst.CSTNode, payload: payloads.WriteFunction) -> cst.CSTNode:
        import libcst as cst

        from rope_lint.rules import edits

        assert isinstance(node, cst.Call)
        inner = edits.unary_operand(node)
        exp_call = edits.besides_one(inner) if isinstance(inner, cst.BinaryOperation) else inner
        assert isinstance(exp_call, cst.Call)
        return edits.function_call(payload.function, edits.unary_operand(exp_call))

    examples = (
        Invalid(
            "import torch\nscale = torch.log(1 + torch.exp(raw_scale))\n",
            fixed="import torch\nscale = torch.nn.functional.softplus(raw_scale)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nimport torch.nn.functional as F\ny = torch.log1p(torch.exp(x))\n",
            fixed="import torch\nimport torch.nn.functional as F\ny = F.softplus(x)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\ny = torch.log(1 + x.exp())\n",
            fixed="import torch\ny = torch.nn.functional.softplus(x)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "from torch import nn\ny = (w.exp() + 1.0).log() * 2\n",
            fixed="from torch import nn\ny = nn.functional.softplus(w) * 2\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # `-x` and `-x.abs() + 1` can be positive: flagged.
            "import torch\ny = torch.log1p(torch.exp(-x)) + torch.log1p(torch.exp(-x.abs() + 1))\n",
            fixed="import torch\ny = torch.nn.functional.softplus(-x) + torch.nn.functional.softplus(-x.abs() + 1)\n",
            safety=FixSafety.SAFE,
            count=2,
        ),
        Invalid(
            "import torch\ny = (a - b).exp().log1p()\n",
            fixed="import torch\ny = torch.nn.functional.softplus(a - b)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "from torch.nn.functional import softplus\nfrom torch import exp, log\ny = log(1 + exp(x))\n",
            fixed="from torch.nn.functional import softplus\nfrom torch import exp, log\ny = softplus(x)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # No usable name for torch: the fix imports it, and does not write `log1p(exp(x))`, which still overflows.
            "from torch import exp, log\n\n\ndef positive(x):\n    return log(1 + exp(x))\n",
            fixed="from torch import exp, log\nimport torch\n\n\ndef positive(x):\n"
            "    return torch.nn.functional.softplus(x)\n",
            safety=FixSafety.SAFE,
        ),
        # The file binds `torch` to something else: no spelling of `softplus` to write.
        Invalid("from helpers import torch\ny = (1 + x.exp()).log()\n"),
        Valid("import torch.nn.functional as F\ny = F.softplus(x)\n"),
        Valid("import torch\ny = torch.log(2 + torch.exp(x))\n"),
        Valid("import torch\ny = torch.log(1 + torch.exp(x) * w)\n"),
        Valid("import torch\ny = torch.log(torch.exp(x) + 1e-6)\n"),
        Valid("import torch\nm = a + torch.log1p(torch.exp(b - a))\n"),
        # `exp` of what is never positive is at most 1: no overflow, and the stable form of softplus itself.
        Valid("import torch\ny = torch.relu(x) + torch.log1p(torch.exp(-x.abs()))\n"),
        Valid("import torch\ny = torch.log(1 + torch.exp(-torch.square(x)))\n"),
        Valid("import torch\ny = (-(a * a + torch.relu(b))).exp().log1p()\n"),
        Valid("import torch\ny = torch.log1p(torch.exp(-abs(x) / 2))\n"),
        Valid("import torch\ny = logits.abs().neg().exp().log1p()\n"),
        Valid("import numpy as np\ny = np.log(1 + np.exp(x))\n"),
    )
