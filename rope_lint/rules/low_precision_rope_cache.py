from __future__ import annotations

from collections.abc import Iterator

from rope_lint.diagnostics import FixSafety
from rope_lint.prefilter import PrefilterSpec
from rope_lint.rules.analysis import rotary
from rope_lint.rules.analysis.context import FileContext
from rope_lint.rules.base import FixAvailability, Flagged, Invalid, Rule, Valid
from rope_lint.rules.payloads import ClassRewrite


class LowPrecisionRopeCache(Rule):
    """
    RoPE cos/sin tables are stored in a runtime or low-precision dtype.

    ## What it does
    Flags a table store (`register_buffer("cos_cached", ...)`, `self.sin_cached = ...`, and `inv_freq`, or a
    table under another name that RPL202 tells by its computation or use) whose value is cast on the way in:
    `.to(dtype)` with a runtime dtype (`torch.get_default_dtype()` passed down, `x.dtype` on a rebuild),
    `.half()`, `.bfloat16()` or `.type_as(x)`.

    ## Why is this bad?
    The table is computed once and reused for every token. Stored in bf16 it is rounded for good: a rebuild
    from `forward` with `x.dtype` rounds it again, and code that later multiplies or interpolates it in fp32
    cannot get the precision back. Storing float32 and casting once, at the end of `forward`, costs nothing.

    ## Example
    ```python
    self.register_buffer("cos_cached", emb.cos().to(dtype), persistent=False)
    ```

    ## Use instead
    ```python
    self.cos_cached = emb.cos()  # float32; forward returns self.cos_cached[:n].to(device=x.device, dtype=x.dtype)
    ```

    ## Fix safety
    Unsafe, and made by the rope codemod on the whole class, as RPL202's fix is: the stored table's dtype changes to
    float32, and `forward` casts at the end instead. A forward that returns its tables, or what it computes from
    them, without a cast to a dtype returns float32 in a module cast to bf16, where it returned bf16; review its
    callers. The fix is withheld where RPL202's Fix safety says: among others, a class whose methods return tables
    without taking a tensor (a sequence length, a shape), which leaves no device to move the table to; a table that
    the codemod does not know by name; a file written for TorchScript; and, in `fix`, a class whose tables other
    code of the package reads off the module.

    ## Known problems
    Only a cast of the stored value itself is read. A cast made under another name before the store (`cos =
    emb.cos().to(dtype)`, then `register_buffer("cos_cached", cos)`) is not seen, nor a cast of the angles before
    `cos` and `sin` (`emb.to(dtype).cos()`), which rounds the table worse; RPL202 flags such a table all the same
    where it is a buffer. A complex table (`torch.polar`) is not read as a table: its cast to `torch.complex32` is
    not flagged.
    """

    code = "RPL201"
    name = "low-precision-rope-cache"
    prefilter = PrefilterSpec(
        triggers=rotary.STORE_TRIGGERS,
        parses_whole_class=rotary.may_hold_table,
        requires=rotary.may_store_a_table,
    )
    # None for a class whose tables have no device to move to, or a table the codemod does not know by name.
    fix_availability = FixAvailability.SOMETIMES
    fix_safeties = frozenset({FixSafety.UNSAFE})
    fix_payloads = (ClassRewrite,)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        for store in rotary.table_stores(ctx):
            if rotary.is_low_precision_cast(ctx, store.value):
                cls = ctx.enclosing_class(store.node)
                yield self.report(
                    store.value,
                    f"the RoPE table `{store.name}` is stored in a runtime dtype, rounding it for every token; "
                    "store float32 and cast at the end of forward",
                    rotary.rope_class_fix(ctx, cls) if store.rewritten else None,
                )

    examples = (
        Invalid(
            'self.register_buffer("cos_cached", emb.cos().to(dtype), persistent=False)\n',
            fixed="self.cos_cached = emb.cos()\n",
            safety=FixSafety.UNSAFE,
            count=1,
        ),
        Invalid("self.sin_cached = emb.sin().half()\n", fixed="self.sin_cached = emb.sin()\n", safety=FixSafety.UNSAFE),
        Invalid(
            # A call that only lays the table out keeps the cast under it (megatron-core's YaRN cache).
            'self.register_buffer("cos_cached", emb.cos().to(dtype).contiguous(), persistent=False)\n',
            fixed="self.cos_cached = emb.cos().contiguous()\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            "self._cos_cached = emb.cos().to(x.dtype)\n",
            fixed="self._cos_cached = emb.cos()\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            "self.cos_cached = emb.cos().type_as(hidden_states)\n",
            fixed="self.cos_cached = emb.cos()\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            # forward takes no tensor: the table would have no device to move to, so the codemod leaves the class.
            "class RotaryEmbedding:\n"
            "    def __init__(self, emb, dtype):\n"
            "        self.cos_cached = emb.cos().to(dtype)\n"
            "    def forward(self, seq_len):\n"
            "        return self.cos_cached[:seq_len]\n"
        ),
        Invalid(
            # A table under a name of its own, told by its computation: no fix, the codemod does not know it.
            "import torch\n"
            "class Positions(torch.nn.Module):\n"
            "    def __init__(self, n, dtype):\n"
            "        angles = torch.outer(torch.arange(n), 10000 ** -(torch.arange(0, 64, 2) / 64))\n"
            '        self.register_buffer("angles", angles.to(dtype), persistent=False)\n'
            "    def forward(self, pos):\n"
            "        return self.angles[pos].cos(), self.angles[pos].sin()\n"
        ),
        Valid("self.cos_cached = emb.cos()\n"),
        Valid("import torch\nself.cos_cached = emb.cos().to(torch.float32)\n"),
        Valid("self.cos_cached = emb.cos().to(x.device)\n"),
        Valid("cos = emb.cos().to(dtype)\n"),
    )
