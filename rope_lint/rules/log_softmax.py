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

# log_softmax next to each softmax, so that the fix stays in the namespace the code used.
_LOG_SOFTMAX = {
    "torch.softmax": "torch.log_softmax",
    "torch.nn.functional.softmax": "torch.nn.functional.log_softmax",
    "torch.special.softmax": "torch.special.log_softmax",
}
# What the log_softmax functions take besides the input and the dim, by keyword.
_KEYWORDS = frozenset({"dim", "dtype"})


class LogSoftmax(Rule):
    """
    `log(softmax(x, d))` is `-inf` where `log_softmax(x, d)` is finite.

    ## What it does
    Flags `log(softmax(x, d))`, with `softmax` as `torch.softmax`, `F.softmax`, `torch.special.softmax` or
    `x.softmax(d)`, and `log` in either spelling.

    ## Why is this bad?
    A softmax probability below the smallest float (about 1e-45 in float32, a logit 104 below the largest)
    is 0, and its log `-inf`: a cross-entropy built on it is `inf` and its gradient `nan`. Well before that, the
    small probabilities have lost their digits. `log_softmax` computes `x - logsumexp(x, d)` directly.

    ## Example
    ```python
    log_probs = torch.log(F.softmax(logits, dim=-1))
    ```

    ## Use instead
    ```python
    log_probs = F.log_softmax(logits, dim=-1)
    ```

    ## Fix safety
    Safe: the same dtype (a `dtype=` argument is kept) and shape, and the same values where the original was
    finite. A softmax without a dim (the deprecated implicit dim of `F.softmax(x)`) is flagged without a fix:
    `torch.log_softmax` requires one, and guessing it could change the result.

    ## Known problems
    Only `softmax` itself is read: the log of another normalisation (`torch.log(F.gumbel_softmax(x, tau))`) is not
    flagged, though it is `-inf` wherever a probability underflows; it has no log form to rewrite to.
    """

    code = "RPL303"
    name = "log-softmax"
    prefilter = PrefilterSpec(triggers=(b"log(",), screen=screens.log_may_be_hazard)
    fix_availability = FixAvailability.SOMETIMES  # none for a softmax without a dim
    fix_safeties = frozenset({FixSafety.SAFE})
    fix_payloads = (payloads.WriteReduction,)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        for call in logdomain.calls(ctx, "log"):
            softmax = logdomain.reduction(ctx, logdomain.unary_operand(ctx, call, "log"), "softmax")
            if softmax is None:
                continue
            fix = None
            # Past (input, dim), positional arguments differ between the namespaces (F's third is _stacklevel).
            if softmax.has_dim() and len(softmax.args) <= 1 and {kw.arg for kw in softmax.keywords} <= _KEYWORDS:
                sibling = _LOG_SOFTMAX.get(softmax.function or "")
                candidates = (*([sibling] if sibling else []), *_LOG_SOFTMAX.values())
                payload = partial(payloads.WriteReduction, method_spelling=softmax.method)
                fix = logdomain.fix(ctx, candidates, payload)
            yield self.report(
                call,
                "`log(softmax(x, d))` is -inf where a probability underflows; use `log_softmax(x, d)`"
                + ("" if softmax.has_dim() else " (name the dim: no fix without one)"),
                fix,
            )

    def fix(self, node: cst.CSTNode, payload: payloads.WriteReduction) -> cst.CSTNode:
        import libcst as cst

        from rope_lint.rules import edits

        assert isinstance(node, cst.Call)
        softmax = edits.unary_operand(node)
        assert isinstance(softmax, cst.Call)
        return edits.as_function_call(softmax, payload.function, payload.method_spelling, lambda operand: operand)

    examples = (
        Invalid(
            "import torch\nimport torch.nn.functional as F\nlog_probs = torch.log(F.softmax(logits, dim=-1))\n",
            fixed="import torch\nimport torch.nn.functional as F\nlog_probs = F.log_softmax(logits, dim=-1)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nlp = torch.softmax(scores, -1, dtype=torch.float32).log()\n",
            fixed="import torch\nlp = torch.log_softmax(scores, -1, dtype=torch.float32)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nlp = torch.log((q @ k).softmax(dim=1))\n",
            fixed="import torch\nlp = torch.log_softmax(q @ k, dim=1)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "from torch.nn.functional import softmax\nimport torch\nlp = torch.log(softmax(x, 1))\n",
            fixed="from torch.nn.functional import softmax\nimport torch\nlp = torch.nn.functional.log_softmax(x, 1)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch.nn.functional as F\nlp = x.softmax(-1).log()\n",
            fixed="import torch.nn.functional as F\nlp = F.log_softmax(x, -1)\n",
            safety=FixSafety.SAFE,
        ),
        # No dim: flagged, with no fix to offer.
        Invalid("import torch\nimport torch.nn.functional as F\nlp = torch.log(F.softmax(x))\n"),
        Valid("import torch\nlp = torch.log(torch.softmax(x, -1) + 1e-9)\n"),
        Valid("import torch.nn.functional as F\nlp = F.log_softmax(x, dim=-1)\n"),
        Valid("import torch\np = torch.softmax(x, -1)\n"),
        Valid("import scipy.special\nlp = np.log(scipy.special.softmax(x, axis=-1))\n"),
    )
