from __future__ import annotations

import ast
from collections.abc import Iterator

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import FixSafety
from rope_lint.prefilter import PrefilterSpec, screens
from rope_lint.rules.analysis import enumerations
from rope_lint.rules.analysis.context import FileContext
from rope_lint.rules.analysis.dtypes import FLOAT32_DTYPES, is_floating_dtype, qualified_dtype
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
    `zero.Init`, with 44% of its elements wrong. An int64 enumeration is never cast.

    ## Example
    ```python
    t = torch.arange(seq_len, device=device, dtype=self.inv_freq.dtype)
    ```

    ## Use instead
    ```python
    t = torch.arange(seq_len, device=device, dtype=torch.int64).float()
    ```

    ## Fix safety
    Safe when the dtype was float32: the result is the same float32 tensor, without the rounding.
    Unsafe otherwise, because the result becomes float32 where it was bf16, fp16, float64 or a runtime
    dtype; code that relied on that dtype may need a cast.
    """

    code = "RPL101"
    name = "float-arange"
    prefilter = PrefilterSpec(triggers=(b"arange",), screen=screens.arange_may_be_hazard)
    fix_availability = FixAvailability.SOMETIMES  # none where the file has no name for torch to write `torch.int64`
    fix_safeties = frozenset({FixSafety.SAFE, FixSafety.UNSAFE})
    fix_payloads = (enumerations.Int64Enumeration,)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        for call in ctx.calls("torch.arange"):
            dtype = enumerations.dtype_argument(call)
            if dtype is None or enumerations.is_fractional(call) or not is_floating_dtype(ctx, dtype):
                continue
            safety = FixSafety.SAFE if qualified_dtype(ctx, dtype) in FLOAT32_DTYPES else FixSafety.UNSAFE
            yield self.report(
                call,
                f"`torch.arange` enumerates positions in floating dtype `{ast.unparse(dtype)}`, which zero.Init "
                "and bf16 runs round above 256; enumerate in int64, then `.float()`",
                enumerations.int64_fix(ctx, call, safety),
            )

    def fix(self, node: cst.CSTNode, payload: enumerations.Int64Enumeration) -> cst.CSTNode:
        from rope_lint.rules import edits

        return edits.int64_enumeration(node, payload)

    examples = (
        Invalid(
            "import torch\nt = torch.arange(4096, dtype=torch.float32)\n",
            fixed="import torch\nt = torch.arange(4096, dtype=torch.int64).float()\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch as t\npos = t.arange(0, n, 2, dtype=t.bfloat16)\n",
            fixed="import torch as t\npos = t.arange(0, n, 2, dtype=t.int64).float()\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            "from torch import arange, float16\nimport torch\nx = arange(10, dtype=float16)\n",
            fixed="from torch import arange, float16\nimport torch\nx = arange(10, dtype=torch.int64).float()\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            "import torch\nt = torch.arange(n, dtype=torch.get_default_dtype())\n",
            fixed="import torch\nt = torch.arange(n, dtype=torch.int64).float()\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            "import torch\n"
            "class Rotary(torch.nn.Module):\n"
            "    def __init__(self, dim, base=10000):\n"
            "        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))\n"
            '        self.register_buffer("inv_freq", inv_freq)\n'
            "    def cache(self, seq_len, device):\n"
            "        t = torch.arange(seq_len, device=device, dtype=self.inv_freq.dtype)\n",
            fixed="import torch\n"
            "class Rotary(torch.nn.Module):\n"
            "    def __init__(self, dim, base=10000):\n"
            "        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))\n"
            '        self.register_buffer("inv_freq", inv_freq)\n'
            "    def cache(self, seq_len, device):\n"
            "        t = torch.arange(seq_len, device=device, dtype=torch.int64).float()\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            "import torch\n"
            "def encoding(n: int, dtype: torch.dtype = torch.float32):\n"
            "    return torch.arange(n, dtype=dtype).unsqueeze(1)\n",
            fixed="import torch\n"
            "def encoding(n: int, dtype: torch.dtype = torch.float32):\n"
            "    return torch.arange(n, dtype=torch.int64).float().unsqueeze(1)\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            "import torch\ndef f(hidden_states):\n    return torch.arange(8, dtype=hidden_states.dtype)\n",
            fixed="import torch\ndef f(hidden_states):\n    return torch.arange(8, dtype=torch.int64).float()\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            "import torch\nfwd = torch.arange(beg, end, -1.0, dtype=torch.float)\n",
            fixed="import torch\nfwd = torch.arange(beg, end, -1, dtype=torch.int64).float()\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\nt = torch.arange(n, dtype=torch.float32).float()\n",
            fixed="import torch\nt = torch.arange(n, dtype=torch.int64).float()\n",
            safety=FixSafety.SAFE,
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
