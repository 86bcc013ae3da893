from __future__ import annotations

from collections.abc import Iterator
from functools import partial

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import FixSafety
from rope_lint.prefilter import PrefilterSpec, screens
from rope_lint.rules import payloads
from rope_lint.rules.analysis import logdomain
from rope_lint.rules.analysis.context import FileContext
from rope_lint.rules.base import FixAvailability, Flagged, Invalid, Rule, Valid

if TYPE_CHECKING:
    import libcst as cst

# What `torch.logsumexp(input, dim, keepdim=False)` takes besides the input, by keyword.
_KEYWORDS = frozenset({"dim", "keepdim"})


class LogSumExp(Rule):
    """
    `log(sum(exp(x), d))` overflows; `torch.logsumexp(x, d)` does not.

    ## What it does
    Flags `log(sum(exp(x), d))` in the function and the method spelling and mixtures of them
    (`torch.log(torch.sum(torch.exp(x), dim=-1))`, `x.exp().sum(-1).log()`). The max-shift idiom
    `m + log(sum(exp(x - m), d))` is stable as written and stays silent, and so is `log(sum(exp(x - m), d))` where
    `m` is the maximum of `x` (`x.amax(d, keepdim=True)`, `torch.max(x, d).values`, or a name bound to one), as
    `log_softmax` writes it: no term is above 1, and one is 1.

    ## Why is this bad?
    `exp` overflows from 88.7 in float32 (709.8 in float64): one large score makes the sum `inf`, and so the
    result, where the true value is about that score. Very negative scores underflow to 0 and give `-inf`.
    `torch.logsumexp` shifts by the maximum internally and is exact over the whole range.

    ## Example
    ```python
    lse = torch.log(torch.sum(torch.exp(scores), dim=-1))
    ```

    ## Use instead
    ```python
    lse = torch.logsumexp(scores, dim=-1)
    ```

    ## Fix safety
    Safe: the same dtype and shape (`keepdim` is kept), and the same values where the original was finite.
    The fix applies only when the sum names its dim: `torch.logsumexp` has no all-elements form, so a sum over
    everything (`x.exp().sum().log()`) is flagged without a fix, as is a sum with a `dtype=`.

    ## Known problems
    A mean in place of the sum is not flagged: `log(mean(exp(x), d))`, a log-mean-exp, overflows alike, and is
    `torch.logsumexp(x, d) - math.log(n)` with `n` the size of dim `d`.
    """

    code = "RPL302"
    name = "logsumexp"
    prefilter = PrefilterSpec(triggers=(b"log(",), screen=screens.log_may_be_hazard)
    fix_availability = FixAvailability.SOMETIMES  # none for a sum without a dim or with a dtype
    fix_safeties = frozenset({FixSafety.SAFE})
    fix_payloads = (payloads.WriteReduction,)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        for call in logdomain.calls(ctx, "log"):
            total = logdomain.reduction(ctx, logdomain.unary_operand(ctx, call, "log"), "sum")
            shifted = logdomain.unary_operand(ctx, total.operand, "exp") if total is not None else None
            if total is None or shifted is None or logdomain.is_shift_added_back(ctx, call, [shifted]):
                continue
            if logdomain.shifted_by_its_maximum(ctx, shifted):
                continue  # the max-shift of log_softmax, `(x - m) - log(sum(exp(x - m)))`: stable as written
            fix = None
            if total.has_dim() and len(total.args) <= 2 and {kw.arg for kw in total.keywords} <= _KEYWORDS:
                payload = partial(payloads.WriteReduction, method_spelling=total.method)
                fix = logdomain.fix(ctx, ("torch.logsumexp", "torch.special.logsumexp"), payload)
            yield self.report(
                call,
                "`log(sum(exp(x)))` overflows to inf from x ≈ 89 in float32; use `torch.logsumexp(x, dim)`"
                + ("" if total.has_dim() else " (name the dim: no fix without one)"),
                fix,
            )

    def fix(self, node: cst.CSTNode, payload: payloads.WriteReduction) -> cst.CSTNode:
        import libcst as cst

        from rope_lint.rules import edits

        assert isinstance(node, cst.Call)
        total = edits.unary_operand(node)
        assert isinstance(total, cst.Call)

        def exponent(exp_call: cst.BaseExpression) -> cst.BaseExpression:
            assert isinstance(exp_call, cst.Call)
            return edits.unary_operand(exp_call)

        return edits.as_function_call(total, payload.function, payload.method_spelling, exponent)

    examples = (
        Invalid(
            "import torch\nlse = torch.log(torch.sum(torch.exp(scores), dim=-1))\n",
            fixed="import torch\nlse = torch.logsumexp(scores, dim=-1)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nlse = x.exp().sum(-1).log()\n",
            fixed="import torch\nlse = torch.logsumexp(x, -1)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch as t\nlse = t.log((a + b).exp().sum(dim=1, keepdim=True))\n",
            fixed="import torch as t\nlse = t.logsumexp(a + b, dim=1, keepdim=True)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nlse = torch.sum(torch.exp(s / tau), 0).log() * tau\n",
            fixed="import torch\nlse = torch.logsumexp(s / tau, 0) * tau\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nlse = torch.log(\n    torch.sum(\n        torch.exp(scores),\n        dim=-1,\n    )\n)\n",
            fixed="import torch\nlse = torch.logsumexp(\n        scores,\n        dim=-1,\n    )\n",
            safety=FixSafety.SAFE,
        ),
        # A sum over all elements: flagged, with no fix (logsumexp needs a dim).
        Invalid("import torch\ntotal = torch.log(torch.exp(x).sum())\n"),
        Invalid("import torch\ntotal = torch.log(torch.sum(torch.exp(x), -1, dtype=torch.float64))\n"),
        Valid("import torch\nlse = torch.logsumexp(x, -1)\n"),
        Valid("import torch\nlse = m + torch.log(torch.sum(torch.exp(x - m), dim=-1))\n"),
        # log_softmax's order: the shift by the maximum is not added back, and the sum is at least 1.
        Valid(
            "import torch\n"
            "def log_probs(x):\n"
            "    x_max = x.amax(1, keepdim=True)\n"
            "    return (x - x_max) - (x - x_max).exp().sum(1, keepdim=True).log()\n"
        ),
        Valid("import torch\nlse = torch.log(torch.sum(torch.exp(x - torch.max(x, -1, keepdim=True).values), -1))\n"),
        Valid("import torch\ntotal = torch.log(torch.sum(x, -1))\n"),
        Valid("import numpy as np\nlse = np.log(np.sum(np.exp(x), axis=-1))\n"),
    )
