from __future__ import annotations

import ast
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


class Float32ArangeAfterConstruction(Rule):
    """
    `torch.arange` enumerates integer positions in an explicit float32 in code that runs after construction.

    ## What it does
    An informational rule, off unless selected by its full code (`--select RPL104`; `ALL` and `RPL1` leave it off).
    Flags what RPL101 leaves out on purpose: `torch.arange` with integer-valued bounds and an explicit float32
    `dtype=` (a literal, a name bound to one, a `dtype` parameter that defaults to one and that no caller in the
    file overrides, or a dtype that a helper picks from literal dtypes alone,
    `adjust_for_device(torch.float32, device)`) in code that runs only after the model is built: `forward`, a
    pipeline's `__call__`, a scheduler step, the methods that only these call, and module-level helpers that only
    these call (for a public helper, in every module of its package, as RPL101 reads it); and in code that the rules
    do not see run at all, which code outside may run anywhere: a public helper that its package never calls, a
    dataclass that nothing makes, an entry of a table of functions that is never run. Its findings are notes
    (SARIF `note`, GitHub `::notice`), not errors; where it is selected, they make `check` exit 1 like any finding.

    ## Why is this bad?
    Where it runs, it is exact: float32 holds every integer up to 2**24, and neither DeepSpeed's `zero.Init()`
    nor the bf16 default dtype that `from_pretrained(torch_dtype=torch.bfloat16)` sets while a model is built
    acts on an explicit dtype after construction. It is reported for a stricter policy, the one of
    transformers' PR #28760, which enumerated every position in int64, forward passes included: the code then
    stays exact if a later change moves it into a constructor, or gives it an activation's dtype. Code that the
    rules do not see run is a hazard only where its caller is a constructor: select this rule to review it.

    ## Example
    ```python
    class SinePositions(nn.Module):
        def forward(self, pixel_values):
            dim_t = torch.arange(self.dim, dtype=torch.float32, device=pixel_values.device)
            return self.scale * dim_t / self.dim
    ```

    ## Use instead
    ```python
    class SinePositions(nn.Module):
        def forward(self, pixel_values):
            dim_t = torch.arange(self.dim, dtype=torch.int64, device=pixel_values.device).float()
            return self.scale * dim_t / self.dim
    ```

    ## Fix safety
    Safe: the int64 enumeration made float32 is the same tensor. It is offered where RPL101 would offer it: the
    start and the step proven integral, an end not proven rounded up with `math.ceil`. A dtype named at run time
    (a parameter, a name, a helper's choice) is cast back with `.to(torch.promote_types(<dtype>, torch.float32))`:
    unsafe, as in RPL101. It keeps the float32 or float64 that the file shows, but a caller that the rules do not
    see may pass bf16, which becomes float32.

    ## Known problems
    What runs after construction is read as RPL101 reads it (see its Known problems): a constructor elsewhere
    that calls a method, or a caller outside the package, is not seen. The flake8 plugin runs the rules that
    `ALL` selects, so it never reports this one.
    """

    code = "RPL104"
    name = "float32-arange-after-construction"
    prefilter = PrefilterSpec(triggers=(b"arange",), screen=screens.arange_may_be_hazard)
    fix_availability = FixAvailability.SOMETIMES
    fix_safeties = frozenset({FixSafety.SAFE, FixSafety.UNSAFE})
    fix_payloads = (payloads.Int64Enumeration,)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        for call in ctx.calls("torch.arange"):
            dtype = dtypes.dtype_argument(call)
            if dtype is None or enumerations.is_fractional(call) or enumerations.fractional_start(call):
                continue
            literals = enumerations.literal_dtypes(ctx, dtype)
            after = enumerations.explicit_float32_after_construction(ctx, call, literals)
            if after is None:
                continue
            message = (
                f"`torch.arange` enumerates positions in `{ast.unparse(dtype)}` in code that runs after construction, "
                "exact to 2**24"
            )
            rounding = enumerations.end_rounding(ctx, call)
            fix = None if rounding is None else enumerations.int64_fix(ctx, call, dtype, rounding)
            if fix is not None:
                message += f"; for a stricter policy, {enumerations.int64_hint(ctx, dtype, rounding)}"
            yield self.report(call, message, fix, tuple(sorted(after)))

    def fix(self, node: cst.CSTNode, payload: payloads.Int64Enumeration) -> cst.CSTNode:
        from rope_lint.rules import edits

        return edits.int64_enumeration(node, payload)

    examples = (
        Invalid(
            "import torch\n"
            "class SinePositions(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            "        super().__init__()\n"
            "        self.dim = dim\n"
            "    def forward(self, pixel_values):\n"
            "        return torch.arange(self.dim, dtype=torch.float32, device=pixel_values.device)\n",
            fixed="import torch\nimport math\n\n"
            "class SinePositions(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            "        super().__init__()\n"
            "        self.dim = dim\n"
            "    def forward(self, pixel_values):\n"
            "        return torch.arange(math.ceil(self.dim), dtype=torch.int64, device=pixel_values.device).float()\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # A private helper that only forward calls.
            "import torch\n"
            "def _grid(n: int):\n"
            "    return torch.arange(n, dtype=torch.float)\n"
            "class Positions(torch.nn.Module):\n"
            "    def forward(self, x):\n"
            "        return x + _grid(x.shape[1])\n",
            fixed="import torch\n"
            "def _grid(n: int):\n"
            "    return torch.arange(n, dtype=torch.int64).float()\n"
            "class Positions(torch.nn.Module):\n"
            "    def forward(self, x):\n"
            "        return x + _grid(x.shape[1])\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # A public helper that the file calls only in forward, and no other module of its package calls at
            # construction (here, a file alone: tests/test_package_callers.py has packages).
            "import torch\n"
            "def relative_positions(length: int):\n"
            "    return torch.arange(length, 0, -1.0, dtype=torch.float)\n"
            "class Relative(torch.nn.Module):\n"
            "    def forward(self, x):\n"
            "        return relative_positions(x.shape[1])\n",
            fixed="import torch\n"
            "def relative_positions(length: int):\n"
            "    return torch.arange(length, 0, -1, dtype=torch.int64).float()\n"
            "class Relative(torch.nn.Module):\n"
            "    def forward(self, x):\n"
            "        return relative_positions(x.shape[1])\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # A dtype that a helper picks from literal dtypes alone: float32 or float64 here.
            "import torch\n"
            "from .utils import pick_dtype\n"
            "class Rotary(torch.nn.Module):\n"
            "    def forward(self, ids, dim: int):\n"
            "        dtype = pick_dtype(torch.float32, torch.float64, ids.device)\n"
            "        return torch.arange(0, dim, 2, dtype=dtype, device=ids.device)\n",
            fixed="import torch\n"
            "from .utils import pick_dtype\n"
            "class Rotary(torch.nn.Module):\n"
            "    def forward(self, ids, dim: int):\n"
            "        dtype = pick_dtype(torch.float32, torch.float64, ids.device)\n"
            "        return torch.arange(0, dim, 2, dtype=torch.int64, device=ids.device)"
            ".to(torch.promote_types(dtype, torch.float32))\n",
            safety=FixSafety.UNSAFE,
        ),
        # A step not proven integral: reported, with no int64 rewrite.
        Invalid(
            "import torch\n"
            "class Positions(torch.nn.Module):\n"
            "    def forward(self, x, step):\n"
            "        return torch.arange(0, x.shape[1], step, dtype=torch.float32)\n"
        ),
        # At construction it is RPL101's hazard, not a note.
        Valid(
            "import torch\n"
            "class Positions(torch.nn.Module):\n"
            "    def __init__(self, n: int):\n"
            "        super().__init__()\n"
            '        self.register_buffer("positions", torch.arange(n, dtype=torch.float32))\n'
        ),
        # A public helper that the file calls at import as well: it may run at construction (RPL101).
        Valid(
            "import torch\n"
            "def timestep_embedding(t, dim: int):\n"
            "    return t[:, None] * torch.arange(dim, dtype=torch.float32)\n"
            "NULL_EMBEDDING = timestep_embedding(torch.zeros(1), 8)\n"
        ),
        # A helper given an activation's dtype may return it (RPL101).
        Valid(
            "import torch\n"
            "from .utils import adjust_for_device\n"
            "class Rotary(torch.nn.Module):\n"
            "    def forward(self, x, dim: int):\n"
            "        dtype = adjust_for_device(torch.float32, x.dtype)\n"
            "        return torch.arange(0, dim, 2, dtype=dtype, device=x.device)\n"
        ),
        # An activation's dtype follows the model into bf16 (RPL101); float64 is exact to 2**53; int64 is exact.
        Valid("import torch\ndef f(x):\n    return torch.arange(x.shape[1], dtype=x.dtype)\n"),
        Valid("import torch\ndef f(x):\n    return torch.arange(x.shape[1], dtype=torch.float64)\n"),
        Valid("import torch\ndef f(x):\n    return torch.arange(x.shape[1], dtype=torch.int64).float()\n"),
    )
