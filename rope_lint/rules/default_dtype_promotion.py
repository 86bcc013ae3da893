from __future__ import annotations

import ast
from collections.abc import Iterator

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import Fix, FixSafety
from rope_lint.prefilter import PrefilterSpec, screens
from rope_lint.rules.analysis import dtypes, enumerations
from rope_lint.rules.analysis.context import FileContext, walk
from rope_lint.rules.analysis.dtypes import is_floating_dtype
from rope_lint.rules.base import FixAvailability, Flagged, Invalid, Rule, Valid

if TYPE_CHECKING:
    import libcst as cst

# Calls on an enumeration that keep it integer, between the `arange` and the operation that makes it floating.
_INTEGER_PRESERVING_METHODS = frozenset({"to", "unsqueeze", "view", "reshape", "expand", "repeat", "flip", "cpu"})


def _is_float_cast(ctx: FileContext, dtype: ast.expr) -> bool:
    """Whether `.to(dtype)` makes the enumeration floating: a floating dtype, `torch.promote_types(...)` of one, or a
    choice between such dtypes. RPL101's int64 rewrite casts back with `torch.promote_types(d, torch.float32)`, or,
    where only a guess says `d` is floating, with `torch.promote_types(d, torch.float32) if d.is_floating_point else
    d`: a second fix must find nothing to change."""
    if isinstance(dtype, ast.IfExp):
        return _is_float_cast(ctx, dtype.body) and _is_float_cast(ctx, dtype.orelse)
    if isinstance(dtype, ast.Call) and ctx.qualified_name(dtype.func) == "torch.promote_types":
        return any(is_floating_dtype(ctx, arg) for arg in dtype.args)
    return bool(is_floating_dtype(ctx, dtype))


def _mentions(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(name, ast.Name) and name.id in names for name in walk(node))


def _to_arguments(call: ast.Call) -> list[ast.expr]:
    """What `.to(...)` may read a dtype from: its positional arguments and `dtype=`."""
    return [*call.args, *(keyword.value for keyword in call.keywords if keyword.arg == "dtype")]


class DefaultDtypePromotion(Rule):
    """
    An integer enumeration is true-divided or meets a Python float, so the result takes the default dtype.

    ## What it does
    Flags an integer `torch.arange` (no dtype, or an integer dtype) that is an operand of `/`, as in
    the RoPE frequency line `base ** (torch.arange(0, dim, 2) / dim)`, or of `*`, `+`, `-`, `**` or `%` with
    a Python float, as in the sinusoid line `torch.exp(torch.arange(0, dim, 2) * (-math.log(10000.0) / dim))`:
    a float literal, a float of `math` (or of NumPy, of numbers), arithmetic that takes one, or a name bound to
    one. Integer arithmetic on the way (`-torch.arange(n)`, `torch.arange(n) * 2`) keeps it an enumeration. It
    is flagged where the operation may run while a model is built, as RPL101 reads it
    (`runs_only_after_construction`): in `__init__`, the methods it reaches, initialisers and cache builders,
    at module level, and in a module-level function, a plain class's initialiser or a table of functions'
    entry with a caller that may, in its file or its package. A cast to a floating
    dtype before the operation (`.float()`, `.to(torch.float32)`, `.to(dtype=torch.float32)`) makes the
    result that dtype's, and is not flagged; so is an operand that is a tensor, whose dtype the result takes.

    ## Why is this bad?
    True division of integer tensors, and arithmetic of an integer tensor with a Python float, return the
    default floating dtype. `from_pretrained(torch_dtype=torch.bfloat16)` makes that bf16 while `__init__`
    runs, so the exponents, and with them every inverse frequency, are rounded to 8 bits of mantissa, and
    the angles that positions take from them are off by whole radians. Adding `dtype=torch.int64` does not
    help: transformers PR #28760 did exactly that, and the division still yields the default dtype.

    ## Example
    ```python
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64) / dim))
    ```

    ## Use instead
    ```python
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    ```

    ## Fix safety
    Safe: under the default default dtype the result was float32 already, and `.float()` keeps it so. Unsafe where
    what the enumeration computes meets a tensor made in the default dtype (`torch.kaiser_window(k) *
    torch.sinc(time)`, followed through the function's names): under a bf16 default the product was bf16 and becomes
    float32, so a tensor the code keeps from it (a filter, a buffer) changes dtype, and a convolution or a matmul of
    it with bf16 inputs raises. Cast the finished product to the default dtype where it is kept. A program that
    builds its model under a float64 default (`torch.set_default_dtype(torch.float64)`, as scientific code may)
    got float64 and gets float32 from `.float()`: write `.to(torch.promote_types(torch.get_default_dtype(),
    torch.float32))` there. The fix writes `.float()`, as transformers PR #28760 did, since nothing in a file tells
    the default dtype its program sets.

    ## Known problems
    An operation in a method that `__init__` does not reach (`forward`, a decoding step) is not flagged:
    `from_pretrained(torch_dtype=...)` sets the default dtype only while the model is built, so at run time
    the result is float32. A program that calls `torch.set_default_dtype(torch.bfloat16)` itself keeps
    that default at run time too, and gets bf16 results there that this rule does not report; `.float()`
    before the operation is right in either case. A float that the rule cannot prove a Python float (an
    attribute such as `self.scale`, a parameter) is not flagged, and neither is a floating function of an
    integer enumeration (`torch.exp(torch.arange(n))`), which rounds once, as its destination would. Callers
    outside the package are not seen (RPL101's Known problems).
    """

    code = "RPL103"
    name = "default-dtype-promotion"
    prefilter = PrefilterSpec(triggers=(b"arange",), screen=screens.arange_may_be_hazard)
    fix_availability = FixAvailability.ALWAYS
    fix_safeties = frozenset({FixSafety.SAFE, FixSafety.UNSAFE})
    # No payload: the fix appends `.float()` to the enumeration, whatever it is.

    # What the finding says, by the operation that makes the enumeration floating.
    _DIVISION = (
        "true division of an integer enumeration yields the default dtype (bf16 under "
        "`from_pretrained(torch_dtype=...)`); cast with `.float()` before dividing"
    )
    _FLOAT_OPERAND = (
        "arithmetic of an integer enumeration with a Python float yields the default dtype (bf16 under "
        "`from_pretrained(torch_dtype=...)`); cast with `.float()` first"
    )

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        for call in ctx.calls("torch.arange"):
            dtype = dtypes.dtype_argument(call)
            if enumerations.float_literals(call) or (dtype is not None and is_floating_dtype(ctx, dtype) is not False):
                continue
            if any(enumerations.is_python_float(ctx, bound) for bound in enumerations.bounds(call)):
                continue  # a floating enumeration already, in the default dtype: RPL102's, where its bound is literal
            operation = self._made_floating_by(ctx, call)
            if operation is None:
                continue
            after_unless = enumerations.runs_only_after_construction(ctx, call)
            if after_unless == frozenset():
                continue
            safety = FixSafety.UNSAFE if self._meets_a_default_dtype_tensor(ctx, call) else FixSafety.SAFE
            yield self.report(
                call,
                self._DIVISION if isinstance(operation.op, ast.Div) else self._FLOAT_OPERAND,
                Fix(safety),
                tuple(sorted(after_unless or ())),
            )

    @staticmethod
    def _meets_a_default_dtype_tensor(ctx: FileContext, call: ast.Call) -> bool:
        """Whether what the enumeration computes, followed through the names its function binds, is an operand of
        arithmetic with a tensor made in the default dtype (`kaiser_window(k) * torch.sinc(time)`): bf16 under a bf16
        default before the fix, float32 after, so that a tensor the code keeps (a convolution's filter) changes
        dtype, and an operation of it with bf16 inputs may raise."""
        function = next(ctx.enclosing_functions(call), None)
        if function is None:
            return False
        statement: ast.AST | None = call
        while statement is not None and not isinstance(statement, ast.stmt):
            statement = ctx.parent(statement)
        derived, defaults = set(), set()
        assignments = [node for node in walk(function) if isinstance(node, ast.Assign)]
        for _ in range(len(assignments)):  # names bound from names bound before: to a fixed point
            before = len(derived) + len(defaults)
            for node in assignments:
                # Names bound, not tensors written into (`pe[:, 0::2] = ...` keeps the dtype of `pe`).
                targets = {
                    name.id
                    for target in node.targets
                    for name in ([target] if isinstance(target, ast.Name) else getattr(target, "elts", []))
                    if isinstance(name, ast.Name)
                }
                if node is statement or _mentions(node.value, derived):
                    derived |= targets
                if dtypes.made_in_default_dtype(ctx, node.value) or _mentions(node.value, defaults):
                    defaults |= targets
            if len(derived) + len(defaults) == before:
                break

        def from_default(operand: ast.expr) -> bool:
            return _mentions(operand, defaults) or any(dtypes.made_in_default_dtype(ctx, n) for n in walk(operand))

        def from_enumeration(operand: ast.expr) -> bool:
            return _mentions(operand, derived) or any(n is call for n in walk(operand))

        return any(
            (from_enumeration(node.left) and from_default(node.right))
            or (from_default(node.left) and from_enumeration(node.right))
            for node in walk(function)
            if isinstance(node, ast.BinOp)
        )

    @staticmethod
    def _made_floating_by(ctx: FileContext, call: ast.Call) -> ast.BinOp | None:
        """The operation that the enumeration, through integer-preserving calls and arithmetic, is an operand of and
        that yields the default dtype: `/`, or arithmetic with a Python float. None if there is none."""
        node: ast.AST = call
        while True:
            parent = ctx.parent(node)
            if isinstance(parent, ast.BinOp):
                other = parent.right if parent.left is node else parent.left
                if isinstance(parent.op, ast.Div) or enumerations.is_python_float(ctx, other):
                    return parent
                if not enumerations.keeps_integral(ctx, parent, other):
                    return None
                node = parent
                continue
            if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub | ast.UAdd):
                node = parent
                continue
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
            return None

    def fix(self, node: cst.CSTNode, payload: None) -> cst.CSTNode:
        from rope_lint.rules import edits

        return edits.with_method(node, "float()")

    examples = (
        # A sinusoid's timescales: an enumeration times a Python float, in a function that `__init__` calls.
        Invalid(
            "import math\n"
            "import torch\n"
            "def sinusoids(length, channels):\n"
            "    step = math.log(10000) / (channels // 2 - 1)\n"
            "    scales = torch.exp(-step * torch.arange(channels // 2))\n"
            "    angles = torch.arange(length)[:, None] * scales[None, :]\n"
            "    return torch.cat([angles.sin(), angles.cos()], dim=1)\n"
            "class Encoder(torch.nn.Module):\n"
            "    def __init__(self, n_ctx, width):\n"
            "        super().__init__()\n"
            "        self.register_buffer('positions', sinusoids(n_ctx, width))\n",
            fixed="import math\n"
            "import torch\n"
            "def sinusoids(length, channels):\n"
            "    step = math.log(10000) / (channels // 2 - 1)\n"
            "    scales = torch.exp(-step * torch.arange(channels // 2).float())\n"
            "    angles = torch.arange(length)[:, None] * scales[None, :]\n"
            "    return torch.cat([angles.sin(), angles.cos()], dim=1)\n"
            "class Encoder(torch.nn.Module):\n"
            "    def __init__(self, n_ctx, width):\n"
            "        super().__init__()\n"
            "        self.register_buffer('positions', sinusoids(n_ctx, width))\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import math\nimport torch\ndiv = torch.exp(torch.arange(0, d, 2) * -(math.log(10000.0) / d))\n",
            fixed="import math\nimport torch\n"
            "div = torch.exp(torch.arange(0, d, 2).float() * -(math.log(10000.0) / d))\n",
            safety=FixSafety.SAFE,
        ),
        # A low-pass filter: the half-integer times meet a window made in the default dtype, so under a bf16 default
        # the kept filter was bf16, and is float32 after the fix: unsafe.
        Invalid(
            "import torch\n"
            "class LowPass(torch.nn.Module):\n"
            "    def __init__(self, half, cutoff):\n"
            "        super().__init__()\n"
            "        window = torch.kaiser_window(2 * half, periodic=False)\n"
            "        time = torch.arange(-half, half) + 0.5\n"
            "        self.register_buffer('taps', 2 * cutoff * window * torch.sinc(2 * cutoff * time))\n",
            fixed="import torch\n"
            "class LowPass(torch.nn.Module):\n"
            "    def __init__(self, half, cutoff):\n"
            "        super().__init__()\n"
            "        window = torch.kaiser_window(2 * half, periodic=False)\n"
            "        time = torch.arange(-half, half).float() + 0.5\n"
            "        self.register_buffer('taps', 2 * cutoff * window * torch.sinc(2 * cutoff * time))\n",
            safety=FixSafety.UNSAFE,
        ),
        # Integer arithmetic first keeps it an enumeration: the float comes after.
        Invalid(
            "import torch\ncentres = (torch.arange(n) * 2 + 1) * 0.5\n",
            fixed="import torch\ncentres = (torch.arange(n).float() * 2 + 1) * 0.5\n",
            safety=FixSafety.SAFE,
        ),
        Valid("import torch\nodd = torch.arange(n) * 2 + 1\n"),
        # A tensor operand: the result takes its dtype, not the default one.
        Valid(
            "import torch\n"
            "inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))\n"
            "angles = torch.arange(n)[:, None] * inv_freq[None, :]\n"
        ),
        # Not provably a Python float: an attribute may hold a tensor.
        Valid("import torch\nangles = torch.arange(n) * self.scale\n"),
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
        # ... and its form where only a name's words say the dtype is floating, which keeps an integer one: the
        # enumeration was floating where the dtype is, and stays so.
        Valid(
            "import math\n"
            "import torch\n"
            "class BoxBias(torch.nn.Module):\n"
            "    def __init__(self, h):\n"
            "        self.grid = self.make(h, torch.zeros(4, 4))\n"
            "    def make(self, h, ref_boxes):\n"
            "        return torch.arange(math.ceil(h), dtype=torch.int64).to(\n"
            "            torch.promote_types(ref_boxes.dtype, torch.float32)\n"
            "            if ref_boxes.dtype.is_floating_point\n"
            "            else ref_boxes.dtype\n"
            "        ) / h\n"
        ),
    )
