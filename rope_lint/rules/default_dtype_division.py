from __future__ import annotations

import ast
from collections.abc import Iterator

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import Fix, FixSafety
from rope_lint.prefilter import PrefilterSpec, screens
from rope_lint.rules.analysis import enumerations
from rope_lint.rules.analysis.context import FileContext
from rope_lint.rules.analysis.dtypes import is_floating_dtype
from rope_lint.rules.base import FixAvailability, Flagged, Invalid, Rule, Valid

if TYPE_CHECKING:
    import libcst as cst

# Calls on an enumeration that keep it integer, between the `arange` and the division.
_INTEGER_PRESERVING_METHODS = frozenset({"to", "unsqueeze", "view", "reshape", "expand", "repeat", "flip", "cpu"})


def _is_float_cast(ctx: FileContext, dtype: ast.expr) -> bool:
    """Whether `.to(dtype)` makes the enumeration floating: a floating dtype, or `torch.promote_types(...)` of one,
    which RPL101's int64 rewrite casts back with (a second fix must find nothing to change)."""
    if isinstance(dtype, ast.Call) and ctx.qualified_name(dtype.func) == "torch.promote_types":
        return any(is_floating_dtype(ctx, arg) for arg in dtype.args)
    return bool(is_floating_dtype(ctx, dtype))


def _to_arguments(call: ast.Call) -> list[ast.expr]:
    """What `.to(...)` may read a dtype from: its positional arguments and `dtype=`."""
    return [*call.args, *(keyword.value for keyword in call.keywords if keyword.arg == "dtype")]


class DefaultDtypeDivision(Rule):
    """
    An integer enumeration is true-divided, so the result takes the default dtype.

    ## What it does
    Flags an integer `torch.arange` (no dtype, or an integer dtype) that is an operand of `/`, as in
    the RoPE frequency line `base ** (torch.arange(0, dim, 2) / dim)`, where the division may run while a
    model is built, as RPL101 reads it (`runs_only_after_construction`): in `__init__`, the methods it reaches,
    initialisers and cache builders, at module level, and in a module-level function, a plain class's initialiser
    or a table of functions' entry with a caller that may, in its file or its package. A cast to a floating
    dtype before the division (`.float()`, `.to(torch.float32)`, `.to(dtype=torch.float32)`) makes the
    quotient that dtype's, and is not flagged.

    ## Why is this bad?
    True division of integer tensors returns the default floating dtype. `from_pretrained(torch_dtype=
    torch.bfloat16)` makes that bf16 while `__init__` runs, so the exponents, and with them every
    inverse frequency, are rounded to 8 bits of mantissa. Adding `dtype=torch.int64` does not help:
    transformers PR #28760 did exactly that, and the division still yields the default dtype.

    ## Example
    ```python
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64) / dim))
    ```

    ## Use instead
    ```python
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    ```

    ## Fix safety
    Safe: under the default default dtype the quotient was float32 already, and `.float()` keeps it so.

    ## Known problems
    A division in a method that `__init__` does not reach (`forward`, a decoding step) is not flagged:
    `from_pretrained(torch_dtype=...)` sets the default dtype only while the model is built, so at run time
    the quotient is float32. A program that calls `torch.set_default_dtype(torch.bfloat16)` itself keeps
    that default at run time too, and gets bf16 quotients there that this rule does not report; `.float()`
    before the division is right in either case. Callers outside the package are not seen (RPL101's Known
    problems).
    """

    code = "RPL103"
    name = "default-dtype-division"
    prefilter = PrefilterSpec(triggers=(b"arange",), screen=screens.arange_may_be_hazard)
    fix_availability = FixAvailability.ALWAYS
    fix_safeties = frozenset({FixSafety.SAFE})
    # No payload: the fix appends `.float()` to the enumeration, whatever it is.

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        for call in ctx.calls("torch.arange"):
            dtype = enumerations.dtype_argument(call)
            if enumerations.float_literals(call) or (dtype is not None and is_floating_dtype(ctx, dtype) is not False):
                continue
            if not self._is_divided(ctx, call):
                continue
            after_unless = enumerations.runs_only_after_construction(ctx, call)
            if after_unless == frozenset():
                continue
            yield self.report(
                call,
                "true division of an integer enumeration yields the default dtype (bf16 under "
                "`from_pretrained(torch_dtype=...)`); cast with `.float()` before dividing",
                Fix(FixSafety.SAFE),
                tuple(sorted(after_unless or ())),
            )

    @staticmethod
    def _is_divided(ctx: FileContext, call: ast.Call) -> bool:
        """Whether the enumeration, through integer-preserving calls, is an operand of `/`."""
        node: ast.AST = call
        while True:
            parent = ctx.parent(node)
            if isinstance(parent, ast.BinOp):
                return isinstance(parent.op, ast.Div)
            if isinstance(parent, ast.Subscript) and parent.value is node:
                node = parent
                continue
            grandparent = ctx.parent(parent) if parent is not None else None
            if (
                isinstance(parent, ast.Attribute)
                and parent.attr in _INTEGER_PRESERVING_METHODS
                and isinstance(grandparent, ast.Call)
                and grandparent.func is parent
                and not (parent.attr == "to" and any(_is_float_cast(ctx, arg) for arg in _to_arguments(grandparent)))
            ):
                node = grandparent
                continue
            return False

    def fix(self, node: cst.CSTNode, payload: None) -> cst.CSTNode:
        from rope_lint.rules import edits

        return edits.with_method(node, "float()")

    examples = (
        Invalid(
            "import torch\ninv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2) / dim))\n",
            fixed="import torch\ninv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\ninv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64) / dim))\n",
            fixed="import torch\ninv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nexponent = torch.arange(0, dim, 2).to(device) / dim\n",
            fixed="import torch\nexponent = torch.arange(0, dim, 2).float().to(device) / dim\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "from torch import arange\nratio = arange(n)[: n // 2] / n\n",
            fixed="from torch import arange\nratio = arange(n).float()[: n // 2] / n\n",
            safety=FixSafety.SAFE,
        ),
        Valid("import torch\ninv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))\n"),
        Valid("import torch\nhalf = torch.arange(0, dim, 2) // 2\n"),
        Valid("import torch\nscaled = torch.arange(0, dim, 2).to(torch.float32) / dim\n"),
        Valid("import torch\nscaled = torch.arange(0, dim, 2, dtype=torch.int64).to(dtype=torch.float32) / dim\n"),
        # Near miss: `.to(dtype=...)` with an integer dtype keeps the enumeration integer.
        Invalid(
            "import torch\nscaled = torch.arange(0, dim, 2).to(dtype=torch.int32) / dim\n",
            fixed="import torch\nscaled = torch.arange(0, dim, 2).float().to(dtype=torch.int32) / dim\n",
            safety=FixSafety.SAFE,
        ),
        # A division at run time: the load-time default dtype no longer holds there.
        Valid(
            "import torch\n"
            "class Decoder(torch.nn.Module):\n"
            "    def __init__(self, overlap):\n"
            "        self.overlap = overlap\n"
            "    def forward(self, x):\n"
            "        ramp = torch.arange(self.overlap) / self.overlap\n"
            "        return x * ramp\n"
        ),
        # ... and the same division in a method that `__init__` calls stays reported.
        Invalid(
            "import torch\n"
            "class Embedder(torch.nn.Module):\n"
            "    def __init__(self, n):\n"
            "        self.bands = self.make(n)\n"
            "    def make(self, n):\n"
            "        return 100 ** (torch.arange(n) / n)\n",
            fixed="import torch\n"
            "class Embedder(torch.nn.Module):\n"
            "    def __init__(self, n):\n"
            "        self.bands = self.make(n)\n"
            "    def make(self, n):\n"
            "        return 100 ** (torch.arange(n).float() / n)\n",
            safety=FixSafety.SAFE,
        ),
        # RPL101's int64 rewrite of an enumeration in a runtime dtype: floating already.
        Valid(
            "import torch\n"
            "scaled = torch.arange(0, dim, 2, dtype=torch.int64).to(torch.promote_types(x.dtype, torch.float32)) / n\n"
        ),
    )
