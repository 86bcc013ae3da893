from __future__ import annotations

import ast
from collections.abc import Iterator

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import FixSafety
from rope_lint.prefilter import PrefilterSpec, screens
from rope_lint.rules.analysis import enumerations
from rope_lint.rules.analysis.context import FileContext
from rope_lint.rules.analysis.dtypes import is_floating_dtype, qualified_dtype
from rope_lint.rules.base import FixAvailability, Flagged, Invalid, Rule, Valid

if TYPE_CHECKING:
    import libcst as cst


class FloatArange(Rule):
    """
    `torch.arange` enumerates integer positions in a floating dtype.

    ## What it does
    Flags `torch.arange` with integer-valued bounds and a floating `dtype=`: a `torch.float*`,
    `torch.half`, `torch.bfloat16`, `torch.get_default_dtype()`, or the `.dtype` of a tensor that the
    surrounding code shows to be floating (an `inv_freq` computed by division, an activation such as
    `hidden_states`, a `dtype` parameter defaulting to a float dtype).

    ## Why is this bad?
    DeepSpeed's `zero.Init()` casts every floating tensor that a constructor returns to the training
    dtype, and a runtime dtype taken from an activation is bf16 or fp16 in mixed-precision training.
    bf16 holds integers exactly only up to 256 (fp16: 2048): position 257 becomes 256, and every RoPE
    angle built from it is wrong. transformers 4.37's Llama rotary table is off by up to 2.0 in cos under
    `zero.Init`. An int64 enumeration is never cast.

    ## Example
    ```python
    def positions(hidden_states):
        batch, length, _ = hidden_states.shape
        return torch.arange(length, dtype=torch.float32)
    ```

    ## Use instead
    ```python
    def positions(hidden_states):
        batch, length, _ = hidden_states.shape
        return torch.arange(length, dtype=torch.int64).float()
    ```

    ## Fix safety
    The int64 rewrite is offered only where the start, the end and the step are proven integral (integer
    literals, `len(...)`, `.shape[...]`, `.size(...)`, `int(...)`, `//`, parameters annotated `int`, and
    names bound only to such values): `torch.arange(-t, t + 0.1, 1)` has one element more in float32
    than in int64, and a step of `4 / dim` becomes 0 in int64. Where only the end is not proven, and the
    step is a literal, the end is rounded up (`math.ceil`, `math.floor` for a negative step), which keeps
    every element for any real end: `torch.arange(math.ceil(self.max_seq_len_cached), dtype=torch.int64)`
    (with `import math` added where the file has none). A dtype is never lowered:
    - float32: `.float()`, safe: the same float32 tensor, without the rounding.
    - float64: `.double()`, safe: the same values in the same dtype.
    - bf16, fp16: `.float()`, unsafe: the result becomes float32.
    - a dtype known only at run time (`x.dtype`, a parameter, `torch.get_default_dtype()`), which may be
      float64: `.to(torch.promote_types(<dtype>, torch.float32))`, unsafe: bf16 becomes float32, while
      float32 and float64 stay as they were.

    Where the start or the step is not proven integral, the enumeration stays floating. A dtype known only at run
    time becomes `torch.promote_types(<dtype>, torch.float32)`, unsafe for the same reason, and only in a
    method that no constructor runs (neither `__init__`, a method it reaches through `self.`, nor a
    cache builder) of a class that defines its own `__init__`: there neither zero.Init nor a bf16
    default dtype can cast the result. Elsewhere, and for a literal dtype, no fix is offered: in a
    constructor zero.Init casts any floating enumeration; outside one, a literal float32 is already what
    a fix would write, float64 must not be lowered, and a literal bf16 or fp16 made float32 would still
    be flagged here, so the fix could not clear its finding.

    ## Known problems
    A method is taken to run outside construction when the class's own `__init__` does not reach it; a
    constructor of another class that calls it, or a forward pass run by a constructor, is not seen. Bounds
    read from attributes (`self.max_seq_len`, `config.hidden_size`) are not proven integral: as an end
    they are rounded up, as a start or a step they leave the finding without a fix.
    """

    code = "RPL101"
    name = "float-arange"
    prefilter = PrefilterSpec(triggers=(b"arange",), screen=screens.arange_may_be_hazard)
    fix_availability = FixAvailability.SOMETIMES  # none where the file has no name for torch to write `torch.int64`
    fix_safeties = frozenset({FixSafety.SAFE, FixSafety.UNSAFE})
    fix_payloads = (enumerations.Int64Enumeration, enumerations.PromotedDtype)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        for call in ctx.calls("torch.arange"):
            dtype = enumerations.dtype_argument(call)
            if dtype is None or enumerations.is_fractional(call) or not is_floating_dtype(ctx, dtype):
                continue
            hazard = (
                f"`torch.arange` enumerates positions in floating dtype `{ast.unparse(dtype)}`, which zero.Init "
                "and bf16 runs round above 256"
            )
            rounding = enumerations.end_rounding(ctx, call)
            if rounding is not None:
                fix = enumerations.int64_fix(ctx, call, dtype, rounding)
                yield self.report(call, f"{hazard}; {enumerations.int64_hint(ctx, dtype, rounding)}", fix)
            else:
                # An int64 enumeration of bounds not proven integral could lose elements or raise: at most a wider
                # dtype, where the dtype is known only at run time and zero.Init cannot cast the result.
                runtime_dtype = qualified_dtype(ctx, dtype) is None
                fix = enumerations.promoted_dtype_fix(ctx, call, dtype) if runtime_dtype else None
                yield self.report(
                    call, f"{hazard}; its start or step is not proven integral, so int64 may change it", fix
                )

    def fix(
        self, node: cst.CSTNode, payload: enumerations.Int64Enumeration | enumerations.PromotedDtype
    ) -> cst.CSTNode:
        from rope_lint.rules import edits

        if isinstance(payload, enumerations.PromotedDtype):
            return edits.promoted_dtype(node, payload)
        return edits.int64_enumeration(node, payload)

    examples = (
        Invalid(
            "import torch\nt = torch.arange(4096, dtype=torch.float32)\n",
            fixed="import torch\nt = torch.arange(4096, dtype=torch.int64).float()\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch as t\ndef f(n: int):\n    return t.arange(0, n, 2, dtype=t.bfloat16)\n",
            fixed="import torch as t\ndef f(n: int):\n    return t.arange(0, n, 2, dtype=t.int64).float()\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            "from torch import arange, float16\nimport torch\nx = arange(10, dtype=float16)\n",
            fixed="from torch import arange, float16\nimport torch\nx = arange(10, dtype=torch.int64).float()\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            # float64 stays float64: same values, same dtype.
            "import torch\ndef f(x):\n    return torch.arange(len(x), dtype=torch.float64)\n",
            fixed="import torch\ndef f(x):\n    return torch.arange(len(x), dtype=torch.int64).double()\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # A dtype known only at run time may be float64: it is promoted to float32 at least, never lowered.
            "import torch\nt = torch.arange(8, dtype=torch.get_default_dtype())\n",
            fixed="import torch\n"
            "t = torch.arange(8, dtype=torch.int64)"
            ".to(torch.promote_types(torch.get_default_dtype(), torch.float32))\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            "import torch\n"
            "class Rotary(torch.nn.Module):\n"
            "    def __init__(self, dim, base=10000):\n"
            "        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))\n"
            '        self.register_buffer("inv_freq", inv_freq)\n'
            "    def cache(self, seq_len: int, device):\n"
            "        t = torch.arange(seq_len, device=device, dtype=self.inv_freq.dtype).float()\n",
            fixed="import torch\n"
            "class Rotary(torch.nn.Module):\n"
            "    def __init__(self, dim, base=10000):\n"
            "        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))\n"
            '        self.register_buffer("inv_freq", inv_freq)\n'
            "    def cache(self, seq_len: int, device):\n"
            "        t = torch.arange(seq_len, device=device, dtype=torch.int64).float()\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            "import torch\n"
            "def f(hidden_states):\n"
            "    batch, length, _ = hidden_states.shape\n"
            "    return torch.arange(length, dtype=hidden_states.dtype)\n",
            fixed="import torch\n"
            "def f(hidden_states):\n"
            "    batch, length, _ = hidden_states.shape\n"
            "    return torch.arange(length, dtype=torch.int64)"
            ".to(torch.promote_types(hidden_states.dtype, torch.float32))\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            "import torch\n"
            "def f(x, window: int):\n"
            "    beg, end = x.size(1) + window, -(window // 2)\n"
            "    return torch.arange(beg, end, -1.0, dtype=torch.float)\n",
            fixed="import torch\n"
            "def f(x, window: int):\n"
            "    beg, end = x.size(1) + window, -(window // 2)\n"
            "    return torch.arange(beg, end, -1, dtype=torch.int64).float()\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\ndef f(n: int):\n    return torch.arange(n, dtype=torch.float64).float()\n",
            fixed="import torch\ndef f(n: int):\n    return torch.arange(n, dtype=torch.int64).float()\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # An end not proven integral (a fraction would be truncated by int64): rounded up with `math.ceil`, which
            # keeps the elements, since the start and the step are integral.
            "import torch\ndef f(t: int):\n    return torch.arange(-t, t + 0.1, 1, dtype=torch.float32)\n",
            fixed="import torch\nimport math\n\n"
            "def f(t: int):\n"
            "    return torch.arange(-t, math.ceil(t + 0.1), 1, dtype=torch.int64).float()\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import math\nimport torch\ndef f(n):\n    return torch.arange(n, dtype=torch.float64)\n",
            fixed="import math\nimport torch\n"
            "def f(n):\n"
            "    return torch.arange(math.ceil(n), dtype=torch.int64).double()\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # A start not proven integral, a dtype known only at run time, in a method that no constructor runs: the
            # enumeration stays floating, at float32 or wider.
            "import torch\n"
            "class Positions(torch.nn.Module):\n"
            "    def __init__(self, length):\n"
            "        self.length = length\n"
            "    def forward(self, x):\n"
            "        return torch.arange(-self.length, self.length, dtype=x.dtype)\n",
            fixed="import torch\n"
            "class Positions(torch.nn.Module):\n"
            "    def __init__(self, length):\n"
            "        self.length = length\n"
            "    def forward(self, x):\n"
            "        return torch.arange(-self.length, self.length, dtype=torch.promote_types(x.dtype, torch.float32))\n",  # noqa: E501
            safety=FixSafety.UNSAFE,
        ),
        # A fractional or unknown step, or a start not proven integral: an int64 enumeration could lose an element or
        # raise, so no fix.
        Invalid("import torch\ndef f(dim):\n    return torch.arange(0, 1, 4 / dim, dtype=torch.float32)\n"),
        Invalid("import torch\ndef f(n: int, step):\n    return torch.arange(0, n, step, dtype=torch.float32)\n"),
        Invalid("import torch\ndef f(start, n):\n    return torch.arange(start, n, dtype=torch.float64)\n"),
        Invalid(
            # At construction, zero.Init casts a floating enumeration whatever its dtype.
            "import torch\n"
            "class Positions(torch.nn.Module):\n"
            "    def __init__(self, length, x):\n"
            "        self.table = torch.arange(-length / 2, length / 2, dtype=x.dtype)\n"
        ),
        Invalid(
            # No name for torch itself to write `torch.int64` with: flagged, not fixed.
            "from torch import arange, float32\nt = arange(8, dtype=float32)\n",
        ),
        Valid("import torch\nt = torch.arange(n, dtype=torch.int64).float()\n"),
        Valid("import torch\ndef f(bbox):\n    return torch.arange(4, dtype=bbox.dtype)\n"),
        Valid("import torch\ndef f(input_ids):\n    return torch.arange(input_ids.shape[1], dtype=input_ids.dtype)\n"),
        Valid(
            "import torch\n"
            "def f(input_ids):\n"
            "    dtype, device = input_ids.dtype, input_ids.device\n"
            "    return torch.arange(8, dtype=dtype, device=device)\n"
        ),
        Valid(
            "import torch\n"
            "def f(durations):\n"
            "    predicted_lengths = torch.clamp_min(torch.ceil(durations), 1).long()\n"
            "    return torch.arange(predicted_lengths.max(), dtype=predicted_lengths.dtype)\n"
        ),
        Valid("import torch\nsteps = torch.arange(0, 1, 0.1, dtype=torch.float32)\n"),
        Valid("import numpy as np\nx = np.arange(10, dtype=np.float32)\n"),
        Valid("def arange(n, dtype):\n    pass\nx = arange(10, dtype=float)\n"),
    )
