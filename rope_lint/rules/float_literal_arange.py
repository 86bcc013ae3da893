from __future__ import annotations

from collections.abc import Iterator

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import FixSafety
from rope_lint.prefilter import PrefilterSpec, screens
from rope_lint.rules import payloads
from rope_lint.rules.analysis import dtypes, enumerations
from rope_lint.rules.analysis.context import FileContext
from rope_lint.rules.base import FixAvailability, Flagged, Invalid, Rule, Valid

if TYPE_CHECKING:
    import libcst as cst


class FloatLiteralArange(Rule):
    """
    `torch.arange` with a float literal bound or step enumerates in the default dtype.

    ## What it does
    Flags `torch.arange` calls without `dtype=` whose start, end or step is a float literal with an
    integral value, such as `torch.arange(0.0, d, 2.0)` or `torch.arange(4096.0)`, and those that start at
    a fraction with an integral step, such as `torch.arange(0.5, size)`: positions offset by a half.

    ## Why is this bad?
    A float bound makes the result take the default dtype. `from_pretrained(torch_dtype=torch.bfloat16)`
    sets that default to bf16 while the model's `__init__` runs, and DeepSpeed's `zero.Init()` casts the
    floating result to bf16 as well. bf16 holds integers exactly only up to 256, so the positions above
    it collapse onto their neighbours; half-integers, above 128.

    A genuinely fractional range (`torch.arange(0, 1, 0.1)`) is not an enumeration and is not flagged.

    ## Example
    ```python
    pos = torch.arange(0.0, hidden_states.shape[1], 1.0)
    ```

    ## Use instead
    ```python
    pos = torch.arange(0, hidden_states.shape[1], 1, dtype=torch.int64).float()
    ```

    ## Fix safety
    Safe: the int64 enumeration holds the same values, and `.float()` gives the float32 result that the
    code had under the default dtype. Offered only where the other bounds are proven integral too
    (integer literals, `len(...)`, `.shape[...]`, `.size(...)`, `int(...)`, `//`, parameters annotated
    `int`, and names bound only to such values): `torch.arange(0.0, 2.5, 1.0)` has 3 elements, and its
    int64 version 2, so an end that is not proven integral is rounded up (`math.ceil`), which keeps the
    3. Where the start or the step is not proven, no fix is offered: the float rewrite that keeps the
    values is the code as it stands, since outside a constructor the default dtype is float32. A fractional
    start gets none either: no int64 enumeration holds 0.5.

    ## Known problems
    Bounds read from attributes (`self.dim`, `config.hidden_size`) are not proven integral: as a start or
    a step, their findings come without a fix. The fix takes the default dtype to be float32: code that sets
    `torch.set_default_dtype(torch.float64)` for good had a float64 result, which `.float()` lowers.
    """

    code = "RPL102"
    name = "float-literal-arange"
    prefilter = PrefilterSpec(triggers=(b"arange",), screen=screens.arange_may_be_hazard)
    fix_availability = FixAvailability.SOMETIMES  # none where the file has no name for torch to write `torch.int64`
    fix_safeties = frozenset({FixSafety.SAFE})
    fix_payloads = (payloads.Int64Enumeration,)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        for call in ctx.calls("torch.arange"):
            literals = enumerations.float_literals(call)
            if not literals or dtypes.dtype_argument(call) is not None or enumerations.is_fractional(call):
                continue
            hazard = (
                "`torch.arange` with float literal bounds enumerates in the default dtype (bf16 under "
                "`from_pretrained(torch_dtype=...)`)"
            )
            if enumerations.fractional_start(call):
                yield self.report(call, f"{hazard}, from a fractional start; no int64 enumeration holds it")
                continue
            rounding = enumerations.end_rounding(ctx, call)
            if rounding is not None:
                fix = enumerations.int64_fix(ctx, call, None, rounding)
                yield self.report(
                    call, f"{hazard}; use integer bounds and {enumerations.int64_hint(ctx, None, rounding)}", fix
                )
            else:
                yield self.report(call, f"{hazard}; its start or step is not proven integral, so int64 may change it")

    def fix(self, node: cst.CSTNode, payload: payloads.Int64Enumeration) -> cst.CSTNode:
        from rope_lint.rules import edits

        return edits.int64_enumeration(node, payload)

    examples = (
        Invalid(
            "import torch\ndef f(x):\n    return torch.arange(0.0, x.shape[1], 1.0)\n",
            fixed="import torch\ndef f(x):\n    return torch.arange(0, x.shape[1], 1, dtype=torch.int64).float()\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nt = torch.arange(4096.0, device=device)\n",
            fixed="import torch\nt = torch.arange(4096, device=device, dtype=torch.int64).float()\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\ndef f(beg: int, end: int):\n    return torch.arange(-beg, -end, 1.0).float()\n",
            fixed="import torch\n"
            "def f(beg: int, end: int):\n"
            "    return torch.arange(-beg, -end, 1, dtype=torch.int64).float()\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\n"
            "def f(q, memory):\n"
            "    klen = len(memory) + q.size(0)\n"
            "    return torch.arange(klen - 1, -1, -1.0)\n",
            fixed="import torch\n"
            "def f(q, memory):\n"
            "    klen = len(memory) + q.size(0)\n"
            "    return torch.arange(klen - 1, -1, -1, dtype=torch.int64).float()\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # An end not proven integral: `torch.arange(0.0, 2.5, 1.0)` has 3 elements, an int64 version of it 2, and
            # one to `math.ceil(2.5)` 3 again.
            "import torch\ndef f(seq_len):\n    return torch.arange(0.0, seq_len, 1.0)\n",
            fixed="import torch\nimport math\n\n"
            "def f(seq_len):\n"
            "    return torch.arange(0, math.ceil(seq_len), 1, dtype=torch.int64).float()\n",
            safety=FixSafety.SAFE,
        ),
        # A start not proven integral: no fix.
        Invalid("import torch\ndef f(offset, seq_len):\n    return torch.arange(offset, seq_len, 1.0)\n"),
        Invalid(
            # No name for torch itself to write `torch.int64` with: flagged, not fixed.
            "from torch import arange\npos = arange(0.0, 512, 1.0)\n",
        ),
        # Half-integer positions: a fractional start and an integral step. No fix: int64 holds no 0.5.
        Invalid("import torch\ndef f(x):\n    return torch.arange(0.5, x.shape[-1])\n"),
        Invalid("import torch\ndef f(size):\n    return torch.arange(-0.5, size, 1.0)\n"),
        Valid("import torch\nsteps = torch.arange(0, 1, 0.1)\n"),
        # A fractional start with a fractional or unknown step is a range, not an enumeration.
        Valid("import torch\nsteps = torch.arange(0.5, 1, 0.25)\n"),
        Valid("import torch\ndef f(n, step):\n    return torch.arange(0.5, n, step)\n"),
        Valid("import torch\nt = torch.arange(0, n, 2)\n"),
        Valid("import torch\nt = torch.arange(0.0, n, 1.0, dtype=torch.int64).float()\n"),
        Valid("import numpy\nt = numpy.arange(0.0, n, 1.0)\n"),
    )
