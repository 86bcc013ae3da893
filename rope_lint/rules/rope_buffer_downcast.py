from __future__ import annotations

from collections.abc import Iterator

from rope_lint.diagnostics import Fix, FixSafety
from rope_lint.prefilter import PrefilterSpec
from rope_lint.rules.analysis import rotary
from rope_lint.rules.analysis.context import FileContext
from rope_lint.rules.base import ClassRewrite, FixAvailability, Flagged, Invalid, Rule, Valid


class RopeBufferDowncast(Rule):
    """
    A RoPE `inv_freq` or cos/sin table is a floating buffer, which `module.to(torch.bfloat16)` rounds.

    ## What it does
    Flags `register_buffer("inv_freq", ...)`, `self.inv_freq = nn.Buffer(...)` and the same for cos/sin
    caches (`cos_cached`, `_sin_cached`, ...), including the `f"{prefix}inv_freq"` names of dynamic updates.

    ## Why is this bad?
    `model.to(torch.bfloat16)`, `.half()` and `from_pretrained(torch_dtype=...)` cast every floating buffer.
    An `inv_freq` rounded to bf16 carries a relative error of up to 2^-9 into every angle, and the angle of
    position 4095 is off by several radians: after `model.to(torch.bfloat16)`, transformers 5.24 Llama's cos
    table is off by up to 2.0 from position 4, with 59.4% of its elements wrong (`rope-lint probe`).

    ## Example
    ```python
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    self.register_buffer("inv_freq", inv_freq, persistent=False)
    ```

    ## Use instead
    A float32 plain attribute, which `module.to()` leaves alone, read through its copy on the input's device (made
    once per device):
    ```python
    self.inv_freq = inv_freq
    ```

    ## Fix safety
    Unsafe, and made by the rope codemod (`codemods/rope_tables.py`) on the whole class: the table stops
    following `module.to(device)`, so every use reads its copy on the input's device, and the codemod rewrites
    those uses too (the copy is made on the first forward on a device, then reused). A
    persistent buffer stays registered (its state_dict key stays), and the class computes from a float32 copy.
    No fix for a class whose methods return tables without taking a tensor (a sequence length, a shape): there
    is no device to move the table to.
    """

    code = "RPL202"
    name = "rope-buffer-downcast"
    prefilter = PrefilterSpec(triggers=rotary.TABLE_TRIGGERS, parses_whole_class=rotary.may_be_rotary)
    fix_availability = FixAvailability.SOMETIMES  # none for a class whose tables have no device to move to
    fix_safeties = frozenset({FixSafety.UNSAFE})
    fix_payloads = (ClassRewrite,)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        stores = list(rotary.table_stores(ctx))
        float32_copies = {store.name for store in stores if not store.as_buffer and store.name.endswith("_fp32")}
        for store in stores:
            # A persistent buffer with a float32 copy beside it is what the fix leaves: the class reads the copy.
            if store.as_buffer and f"{store.name}_fp32" not in float32_copies:
                kept = " (persistent: it stays in the state_dict)" if store.persistent else ""
                cls = ctx.enclosing_class(store.node)
                yield self.report(
                    store.node,
                    f"`{store.name}` is a floating buffer{kept}, so `module.to(torch.bfloat16)` rounds it; keep a "
                    "float32 plain attribute and move it to the input's device on use",
                    Fix(FixSafety.UNSAFE, ClassRewrite("rope_tables", cls.name if cls else None))
                    if rotary.rewritable(ctx, cls)
                    else None,
                )

    examples = (
        Invalid(
            'self.register_buffer("inv_freq", inv_freq, persistent=False)\n',
            fixed="self.inv_freq = inv_freq\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            'self.register_buffer("cos_cached", emb.cos().to(dtype), persistent=False)\n',
            fixed="self.cos_cached = emb.cos()\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            "from torch import nn\nself.inv_freq = nn.Buffer(inv_freq, persistent=False)\n",
            fixed="from torch import nn\nself.inv_freq = inv_freq\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            # A dynamic update: `setattr` updates a buffer and a plain attribute alike.
            'self.register_buffer(f"{prefix}inv_freq", inv_freq, persistent=False)\n',
            fixed='setattr(self, f"{prefix}inv_freq", inv_freq)\n',
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            # Persistent: checkpoints carry the key, so the buffer stays and the class reads a float32 copy.
            'self.register_buffer("inv_freq", inv_freq)\n',
            fixed='self.register_buffer("inv_freq", inv_freq)\nself.inv_freq_fp32 = inv_freq\n',
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            # forward takes no tensor: the table would have no device to move to, so the codemod leaves the class.
            "class RotaryEmbedding:\n"
            "    def __init__(self, inv_freq):\n"
            '        self.register_buffer("inv_freq", inv_freq, persistent=False)\n'
            "    def forward(self, seq_len, offset=0):\n"
            "        return self.inv_freq * (seq_len + offset)\n"
        ),
        Valid('self.register_buffer("position_ids", torch.arange(n).expand((1, -1)), persistent=False)\n'),
        Valid("self.inv_freq = inv_freq\n"),
    )
