from __future__ import annotations

import ast
from collections.abc import Iterator

from rope_lint.diagnostics import Fix, FixSafety
from rope_lint.prefilter import PrefilterSpec, screens
from rope_lint.rules.analysis import rotary
from rope_lint.rules.analysis.context import FileContext
from rope_lint.rules.base import ClassRewrite, FixAvailability, Flagged, Invalid, Rule, Valid


class RopeDeviceMath(Rule):
    """
    RoPE frequencies or tables are computed on the accelerator.

    ## What it does
    In the methods of a rotary class that build its tables (`__init__`, the methods it reaches, and cache
    builders), flags
    `torch.arange(..., device=device)` with a device other than the CPU, an enumeration with no device at all
    (DeepSpeed's `zero.Init()` fills in the accelerator), and `.to(device)` applied to an enumeration before
    the `pow`, `outer`, `cos` and `sin` that build the tables.

    ## Why is this bad?
    The tables are computed once and reused for every token, so they should be computed once, exactly. GPU
    `pow`, `cos` and `sin` round differently from the CPU's and from one another across GPU generations, so
    the same checkpoint gets different tables on different machines; and under `zero.Init` an enumeration
    with no device is built on the accelerator in the training dtype. Computing on the CPU in float32 and
    moving the result costs a copy of a few kilobytes, once.

    ## Example
    ```python
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float().to(device) / dim))
    ```

    ## Use instead
    ```python
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64, device="cpu").float() / dim))
    ```

    ## Fix safety
    Unsafe, and made by the rope codemod on the whole class: the tables then live on the CPU until `forward`
    moves them to the device of a tensor it takes. The codemod places each enumeration on the CPU and leaves
    its dtype to RPL101. A class whose methods return tables without taking a tensor (a sequence length, a
    shape) has no device to move them to, and the codemod leaves it as it is.
    """

    code = "RPL203"
    name = "rope-device-math"
    prefilter = PrefilterSpec(
        triggers=(b"inv_freq", *rotary.ROTARY_NAME_TRIGGERS),  # the table, or a rotary class by its name
        screen=screens.rotary_name_may_be_class,
        parses_whole_class=rotary.may_be_rotary,
    )
    fix_availability = FixAvailability.SOMETIMES  # none for a class whose tables have no device to move to
    fix_safeties = frozenset({FixSafety.UNSAFE})
    fix_payloads = (ClassRewrite,)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        for cls in rotary.rotary_classes(ctx):
            rewrite = (
                Fix(FixSafety.UNSAFE, ClassRewrite("rope_tables", cls.name)) if rotary.rewritable(ctx, cls) else None
            )
            construction = rotary.construction_methods(cls)
            for method in rotary.methods(cls):
                if method.name not in construction:
                    continue
                for node in ast.walk(method):
                    if not isinstance(node, ast.Call):
                        continue
                    if ctx.qualified_name(node.func) == "torch.arange" and not _on_cpu(ctx, node):
                        yield self.report(
                            node,
                            "RoPE positions or frequencies are enumerated on the accelerator (or left to zero.Init "
                            'to place there); compute the tables on the CPU (`device="cpu"`) and move them',
                            rewrite,
                        )
                    elif _moves_enumeration(ctx, node):
                        yield self.report(
                            node,
                            "the enumeration moves to the accelerator before the RoPE math; compute on the CPU "
                            "and move the finished table",
                            rewrite,
                        )

    examples = (
        Invalid(
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim, device=None):\n"
            "        inv_freq = 1.0 / (10000 ** (\n"
            "            torch.arange(0, dim, 2).float().to(device) / dim))\n",
            fixed="import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim, device=None):\n"
            "        inv_freq = 1.0 / (10000 ** (\n"
            '            torch.arange(0, dim, 2, device="cpu").float() / dim))\n',
            safety=FixSafety.UNSAFE,
            count=2,
        ),
        Invalid(
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def _set_cache(self, seq_len, device):\n"
            "        t = torch.arange(seq_len, device=device, dtype=torch.int64)\n",
            fixed="import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def _set_cache(self, seq_len, device):\n"
            '        t = torch.arange(seq_len, device="cpu", dtype=torch.int64)\n',
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            # forward takes no tensor: the tables would have no device to move to, so the codemod leaves the class.
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            '        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))\n'
            "    def forward(self, seq_len):\n"
            "        return torch.outer(torch.arange(seq_len, device=self.inv_freq.device).float(), self.inv_freq)\n"
        ),
        Valid(
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            '        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, device="cpu").float() / dim))\n'
            "    def forward(self, x, position_ids):\n"
            "        return torch.arange(x.shape[1], device=x.device)\n"
        ),
        Valid(
            # The finished table goes where a buffer registered without a move would be: not math on a device.
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim, n):\n"
            '        freqs = 1.0 / (10000 ** (torch.arange(0, dim, 2, device="cpu").float() / dim))\n'
            '        angles = torch.outer(torch.arange(n, device="cpu").float(), freqs)\n'
            '        self.register_buffer("angles", angles.to(torch.get_default_device()), persistent=False)\n'
            '        self.register_buffer("steps", torch.arange(n, device="cpu").to(torch.get_default_device()))\n'
        ),
        Valid(
            "import torch\n"
            "class Attention(torch.nn.Module):\n"
            "    def mask(self, n, device):\n"
            "        return torch.arange(n, device=device)\n"
        ),
    )


def _on_cpu(ctx: FileContext, call: ast.Call) -> bool:
    device = next((kw.value for kw in call.keywords if kw.arg == "device"), None)
    if isinstance(device, ast.Constant) and device.value == "cpu":
        return True
    # torch.device("cpu")
    return (
        isinstance(device, ast.Call)
        and ctx.qualified_name(device.func) == "torch.device"
        and bool(device.args)
        and isinstance(device.args[0], ast.Constant)
        and device.args[0].value == "cpu"
    )


def _moves_enumeration(ctx: FileContext, call: ast.Call) -> bool:
    """`<expression with torch.arange>.to(device)`: a move to a device named by a variable. Not a move to
    `torch.get_default_device()`, which places a finished table where a buffer registered without a move would be
    (the rope codemod's own placement of a buffer it keeps)."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "to"):
        return False
    targets = [*call.args, *(kw.value for kw in call.keywords if kw.arg == "device")]
    if any(isinstance(t, ast.Call) and ctx.qualified_name(t.func) == "torch.get_default_device" for t in targets):
        return False
    moves = any("device" in (ast.unparse(target) if not isinstance(target, ast.Constant) else "") for target in targets)
    return moves and any(
        isinstance(node, ast.Call) and ctx.qualified_name(node.func) == "torch.arange"
        for node in ast.walk(call.func.value)
    )
