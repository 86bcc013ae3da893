from __future__ import annotations

from collections.abc import Iterator

from rope_lint.diagnostics import FixSafety
from rope_lint.prefilter import PrefilterSpec
from rope_lint.rules.analysis import rotary
from rope_lint.rules.analysis.context import FileContext
from rope_lint.rules.base import FixAvailability, Flagged, Invalid, Rule, Valid
from rope_lint.rules.payloads import ClassRewrite


class RopeBufferDowncast(Rule):
    """
    A RoPE `inv_freq` or cos/sin table is a floating buffer, which `module.to(torch.bfloat16)` rounds.

    ## What it does
    Flags `register_buffer("inv_freq", ...)`, `self.inv_freq = nn.Buffer(...)` and the same for cos/sin
    caches (`cos_cached`, `_sin_cached`, ...), including the `f"{prefix}inv_freq"` names of dynamic updates.
    A table is told by its computation as well as by its name: a buffer under any name (`angles`, `args_{i}`,
    `freqs_base_t`, `bands`) whose value is frequencies (a power or an exponential of an enumeration), an angle
    (positions times frequencies) or its cos/sin, computed in the method or in the class's methods and the file's
    functions that it calls; a buffer that the class multiplies with positions as frequencies, or raises a base to
    as their exponents (`theta ** self.exponents`, whose cos/sin it takes); a buffer whose name
    says it is frequencies or a cos/sin table (`freqs`, `freqs_cos`). So is a buffer created empty
    (`torch.empty(n, d, dtype=torch.float32)`) and filled later with such a table (`self.table.copy_(...)`,
    `self.table[:] = ...`): zero.Init and the load-time dtype cast the empty buffer, and the values are rounded as
    they are copied in. Frequencies held as an `nn.Parameter` are flagged as well: `module.to(dtype)` casts
    parameters as it casts buffers.

    A store of integers or bools stays silent whatever its name (a mask, a count, an int64 enumeration, told by its
    computation: a comparison, `.sum()` of a mask, `torch.arange(n)`, `.long()`; or a name that counts, such as
    `num_bands_per_freq`): `module.to(dtype)` casts floating tensors only.

    A sinusoidal table of absolute positions outside a rotary class stays silent: its entries are cos/sin values
    in [-1, 1], which bf16 rounds as it rounds any activation, while its angles stay exact. So do frequencies of a
    class that takes no cos/sin of them (the decays of a linear attention).

    Stays silent where the class guards its table: no code reads the stored values (it reads only their
    `.dtype`/`.device`, or `forward` stores the table anew, in float32, before every use, or reads it only where it is
    float32: in the `else` of `if self.inv_freq.dtype != torch.float32:`, whose branch computes it anew), or an
    `_apply` override stores it anew after the parent's `_apply` has cast it (always, or whenever the cast changed its
    dtype).

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
    A forward that returns what it computes from the tables without casting it to a dtype (angles, or `cos, sin`
    not cast to the input's) returns float32 in a module cast to bf16, where it returned bf16: code after it that
    meets bf16 tensors in an operation that does not promote (a matmul, `einsum`) raises; review its callers.
    No fix for a class whose methods return tables without taking a tensor (a sequence length, a shape): there
    is no device to move the table to. None for a class whose code after construction uses what its construction
    code returns (a buffer made again under `with torch.device(...)` after `to_empty()`, a forward that returns
    what construction computes): the codemod makes construction's tensors on the CPU, and that code would get them
    there. None for a class whose persistent table only makes room (`torch.empty(n)`, `torch.zeros(n)`) for the
    values that a checkpoint brings: its float32 copy, made at construction, would never hold them. `fix` leaves the
    class where other code of the package reads one of its tables off the module (an attention layer that hands
    `self.rotary_emb.cos_sin_cache` to its kernel, a loader that asks `rotary_emb.inv_freq.is_meta`): it would get
    the float32 CPU attribute. Such code is told by the table's name, in any module of the package; a write into the
    table, a read of its shape, a copy into another table and a read in the class's own methods do not count. `check`
    does not read the rest of the package for this (a check of one file would read all of it), and counts the fix as
    available; `fix` reports the class's findings as remaining. None in
    a file written for TorchScript (`torch.jit.Final`, `@torch.jit.ignore`, `torch.jit.is_scripting()`): the rewrite
    reads tables through a Python function that `torch.jit.script` cannot compile. No fix either for a table the
    codemod does not know by name (one found by its computation, its use or a name such as `freqs`), nor for a
    parameter: make it a float32 plain attribute by hand. None for a buffer registered on another module
    (`self.rotary_emb.register_buffer(...)`), nor for a persistent one that a function registers on a module it
    takes: no class would read the float32 copy that the codemod puts beside a persistent buffer.

    ## Known problems
    A trained `nn.Parameter` of frequencies (learned RoPE frequencies) cannot become a plain attribute: the
    optimizer must see it. Keep it float32 while the rest of the model is cast (`_keep_in_fp32_modules`, or a
    float32 master copy in mixed-precision training) and cast it at the end of forward. Frequencies that the
    class reads under a local name, or broadcasts without a new axis on each side, are not recognized (random
    Fourier features are, as `x[:, None] * self.W[None, :]`). A model-level guard such as
    `_keep_in_fp32_modules` is not seen; `module.to(torch.bfloat16)` rounds such a table all the same.
    """

    code = "RPL202"
    name = "rope-buffer-downcast"
    prefilter = PrefilterSpec(
        triggers=rotary.STORE_TRIGGERS,
        parses_whole_class=rotary.may_hold_table,
        requires=rotary.may_store_a_table,
    )
    # None for a class whose tables have no device to move to, a table the codemod does not know, or a parameter.
    fix_availability = FixAvailability.SOMETIMES
    fix_safeties = frozenset({FixSafety.UNSAFE})
    fix_payloads = (ClassRewrite,)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        # A persistent buffer with a float32 copy beside it is what the fix leaves: the class reads the copy.
        beside_a_copy = {id(store.node) for store in rotary.stores_beside_a_copy(ctx)}
        for store in rotary.table_stores(ctx):
            cls = ctx.enclosing_class(store.node)
            if not (store.as_buffer or store.parameter) or id(store.node) in beside_a_copy:
                continue
            if rotary.guarded(ctx, store):
                continue
            fix = rotary.rope_class_fix(ctx, cls) if store.rewritten and not store.parameter else None
            yield self.report(store.node, _message(store), fix)

    examples = (
        Invalid(
            # The exponents of the frequencies, held: forward raises the base to them, so a cast rounds the frequencies
            # it makes as it rounds frequencies held as they are.
            "import torch\n"
            "class Axes(torch.nn.Module):\n"
            "    def __init__(self, dim, theta=10000.0):\n"
            "        self.theta = theta\n"
            '        self.register_buffer("exponents", torch.arange(0, dim, 2).float() / dim, persistent=False)\n'
            "    def forward(self, x, positions):\n"
            "        freqs = 1.0 / (self.theta ** self.exponents.to(x.device))\n"
            "        angles = torch.outer(positions.float(), freqs)\n"
            "        return angles.cos(), angles.sin()\n"
        ),
        Invalid(
            # A table under a name of its own, told by its computation through a function of the file.
            "import torch\n"
            "def get_freqs(dim, period):\n"
            "    return torch.exp(-torch.log(period) * torch.arange(dim, dtype=torch.float32) / dim)\n"
            "class Positions(torch.nn.Module):\n"
            "    def __init__(self, dim, max_pos):\n"
            "        freq = get_freqs(dim // 2, 10000.0)\n"
            "        pos = torch.arange(max_pos, dtype=freq.dtype)\n"
            '        self.register_buffer("args", torch.outer(pos, freq), persistent=False)\n'
            "    def forward(self, pos):\n"
            "        return torch.cos(self.args[pos]), torch.sin(self.args[pos])\n"
        ),
        Invalid(
            # One buffer per axis under computed names, through a method of the class.
            "import torch\n"
            "class Grid(torch.nn.Module):\n"
            "    def __init__(self, dims, theta):\n"
            "        self.theta = theta\n"
            "        for i, dim in enumerate(dims):\n"
            '            self.register_buffer(f"bands_{i}", self._bands(dim), persistent=False)\n'
            "    def _bands(self, dim):\n"
            "        return 1.0 / (self.theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))\n"
            "    def forward(self, x, t):\n"
            "        return torch.outer(t, self.bands_0).cos()\n"
        ),
        Invalid(
            # Frequencies by their use: the class multiplies the buffer with positions and takes the sine.
            "import torch\n"
            "class Fourier(torch.nn.Module):\n"
            "    def __init__(self, bands):\n"
            '        self.register_buffer("scales", bands)\n'
            "    def forward(self, x):\n"
            "        steps = torch.arange(x.shape[1], device=x.device)\n"
            "        return torch.outer(steps, self.scales).sin()\n"
        ),
        Invalid(
            # A cos/sin table by its name, computed in another file.
            "from .embeddings import rotary_table\n"
            "class Video(torch.nn.Module):\n"
            "    def __init__(self, dim, n):\n"
            "        cos, sin = rotary_table(dim, n)\n"
            '        self.register_buffer("freqs_cos", cos, persistent=False)\n'
        ),
        Invalid(
            # Created empty and filled later: zero.Init casts the empty buffer, so the copy is rounded.
            "import torch\n"
            "class RotaryCache(torch.nn.Module):\n"
            "    def __init__(self, dim, n):\n"
            '        self.register_buffer("table", torch.empty(n, dim, dtype=torch.float32), persistent=False)\n'
            "        freqs = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))\n"
            "        self.table.copy_(torch.outer(torch.arange(n).float(), freqs).cos())\n"
        ),
        Invalid(
            # Frozen frequencies as a parameter: `.to(torch.bfloat16)` casts them as a buffer.
            "import torch\n"
            "class Frozen(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            "        freqs = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))\n"
            "        self.freqs = torch.nn.Parameter(freqs, requires_grad=False)\n"
        ),
        Invalid(
            # Random Fourier features: a frozen parameter in an outer product whose sine is taken.
            "import torch\n"
            "class FourierProjection(torch.nn.Module):\n"
            "    def __init__(self, size, scale):\n"
            "        self.W = torch.nn.Parameter(torch.randn(size) * scale, requires_grad=False)\n"
            "    def forward(self, x):\n"
            "        x_proj = x[:, None] * self.W[None, :] * 6.28\n"
            "        return torch.cat([torch.sin(x_proj), torch.cos(x_proj)], dim=-1)\n"
        ),
        Valid(
            # A learned periodic activation (Snake): the parameter scales the activation, no outer product.
            "import torch\n"
            "class Snake(torch.nn.Module):\n"
            "    def __init__(self, channels):\n"
            "        self.alpha = torch.nn.Parameter(torch.ones(channels))\n"
            "    def forward(self, x):\n"
            "        alpha = self.alpha[None, :, None]\n"
            "        return x + torch.sin(alpha * x) ** 2 / alpha\n"
        ),
        Invalid(
            # Learned frequencies: trained, so no plain attribute can hold them (see Known problems).
            "import torch\n"
            "class Model(torch.nn.Module):\n"
            "    def __init__(self, heads, dim):\n"
            "        self.pos_frequencies = torch.nn.Parameter(torch.zeros(3, heads, dim // 2))\n"
        ),
        Valid(
            # forward stores the frequencies anew, in float32, before it reads them: the buffer is never used.
            "import torch\n"
            "class ScaledRotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            "        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))\n"
            '        self.register_buffer("inv_freq", inv_freq, persistent=False)\n'
            "    def forward(self, x, factors):\n"
            "        dim = x.shape[-1]\n"
            "        self.inv_freq = 1.0 / (factors * 10000 ** (torch.arange(0, dim, 2).float() / dim))\n"
            "        return self.inv_freq[None, :, None].float()\n"
        ),
        Valid(
            # Only the buffer's dtype and device are read; the table is computed in float32 on every call.
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            '        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2) / dim)))\n'
            "    def forward(self, n):\n"
            "        return table(n, dtype=self.inv_freq.dtype, device=self.inv_freq.device)\n"
        ),
        Valid(
            # An `_apply` override stores the table anew after the cast.
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            "        self.dim = dim\n"
            '        self.register_buffer("inv_freq", self._inv_freq(), persistent=False)\n'
            "    def _inv_freq(self):\n"
            "        return 1.0 / (10000 ** (torch.arange(0, self.dim, 2).float() / self.dim))\n"
            "    def _apply(self, fn, recurse=True):\n"
            "        super()._apply(fn, recurse)\n"
            "        self.inv_freq = self._inv_freq().to(self.inv_freq.device)\n"
            "        return self\n"
        ),
        Valid(
            # ... or when the cast changed its dtype, which is when it needs it (timm's MRoPE).
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            "        self.dim = dim\n"
            '        self.register_buffer("inv_freq", self._inv_freq(), persistent=False)\n'
            "    def _inv_freq(self, device=None):\n"
            "        return 1.0 / (10000 ** (torch.arange(0, self.dim, 2, device=device).float() / self.dim))\n"
            "    def _apply(self, fn, *args, **kwargs):\n"
            "        module = super()._apply(fn, *args, **kwargs)\n"
            "        if kept_dtype(self.inv_freq.dtype) != self.inv_freq.dtype:\n"
            '            self.register_buffer("inv_freq", self._inv_freq(self.inv_freq.device), persistent=False)\n'
            "        return module\n"
            "    def forward(self, t):\n"
            "        return torch.outer(t, self.inv_freq).cos()\n"
        ),
        Invalid(
            # A store only when the dtype is float32 already does not undo the cast.
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            "        self.dim = dim\n"
            '        self.register_buffer("inv_freq", self._inv_freq(), persistent=False)\n'
            "    def _inv_freq(self):\n"
            "        return 1.0 / (10000 ** (torch.arange(0, self.dim, 2).float() / self.dim))\n"
            "    def _apply(self, fn, *args, **kwargs):\n"
            "        module = super()._apply(fn, *args, **kwargs)\n"
            "        if self.inv_freq.dtype == torch.float32:\n"
            '            self.register_buffer("inv_freq", self._inv_freq(), persistent=False)\n'
            "        return module\n"
            "    def forward(self, t):\n"
            "        return torch.outer(t, self.inv_freq).cos()\n",
            count=2,
        ),
        Valid(
            # Decays of a linear attention: a power of an enumeration, but no cos/sin is taken of it.
            "import torch\n"
            "class Decay(torch.nn.Module):\n"
            "    def __init__(self, heads, block):\n"
            "        slopes = 2 ** (-8 * torch.arange(1, heads + 1) / heads)\n"
            '        self.register_buffer("decay", torch.exp(-slopes[:, None] * torch.arange(block)))\n'
            "    def forward(self, x):\n"
            "        return x * self.decay\n"
        ),
        Valid(
            # A sinusoidal table of absolute positions: its values are in [-1, 1], rounded as any activation.
            "import torch\n"
            "class Sinusoids(torch.nn.Module):\n"
            "    def __init__(self, n, dim):\n"
            "        freqs = torch.exp(torch.arange(0, dim, 2) * (-9.2 / dim))\n"
            "        table = torch.zeros(n, dim)\n"
            "        table[:, 0::2] = torch.sin(torch.arange(n)[:, None] * freqs)\n"
            "        table[:, 1::2] = torch.cos(torch.arange(n)[:, None] * freqs)\n"
            '        self.register_buffer("table", table)\n'
            "    def forward(self, x):\n"
            "        return x + self.table[: x.shape[1]]\n"
        ),
        Valid(
            # Integers and bools, whatever their names: `module.to(dtype)` casts floating tensors only. A name that
            # counts (`num_`) says no frequencies, even one per frequency.
            "import torch\n"
            "class BandSplit(torch.nn.Module):\n"
            "    def __init__(self, bank, n):\n"
            "        in_band = bank > 0\n"
            "        num_bands_per_freq = reduce(in_band, 'b f -> f', 'sum')\n"
            '        self.register_buffer("pos_freq", torch.arange(n), persistent=False)\n'
            '        self.register_buffer("band_freq", in_band, persistent=False)\n'
            '        self.register_buffer("num_bands_per_freq", num_bands_per_freq, persistent=False)\n'
            "    def forward(self, x):\n"
            "        return torch.outer(self.pos_freq, x).cos()[self.band_freq] / self.num_bands_per_freq\n"
        ),
        Valid(
            # An enumeration of positions is no table, nor is a learned weight.
            "import torch\n"
            "class Embeddings(torch.nn.Module):\n"
            "    def __init__(self, n, dim):\n"
            '        self.register_buffer("position_ids", torch.arange(n).expand((1, -1)), persistent=False)\n'
            "        self.scale = torch.nn.Parameter(torch.ones(dim))\n"
            "    def forward(self, x):\n"
            "        return x * self.scale + self.position_ids.float().cos()\n"
        ),
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
        Invalid(
            # Another class's float32 copy says nothing of this class's buffer (and this forward takes no tensor).
            "class CopiedRotary:\n"
            "    def __init__(self, inv_freq):\n"
            '        self.register_buffer("inv_freq", inv_freq)\n'
            "        self.inv_freq_fp32 = inv_freq\n"
            "class PlainRotary:\n"
            "    def __init__(self, inv_freq):\n"
            '        self.register_buffer("inv_freq", inv_freq, persistent=False)\n'
            "    def forward(self, seq_len, offset=0):\n"
            "        return self.inv_freq * (seq_len + offset)\n"
        ),
        Invalid(
            # A function that gives a module its table: the buffer becomes a plain attribute of that module.
            'module.register_buffer("inv_freq", inv_freq, persistent=False)\n',
            fixed="module.inv_freq = inv_freq\n",
            safety=FixSafety.UNSAFE,
        ),
        # No fix for a persistent buffer that a function registers on a module it takes: no class would read a float32
        # copy beside it. Nor for a buffer registered on another module (a child): the codemod rewrites its class.
        Invalid('module.register_buffer("inv_freq", inv_freq)\n'),
        Invalid('self.rotary_emb.register_buffer("inv_freq", inv_freq, persistent=False)\n'),
        Valid('self.register_buffer("position_ids", torch.arange(n).expand((1, -1)), persistent=False)\n'),
        Valid("self.inv_freq = inv_freq\n"),
    )


def _message(store: rotary.TableStore) -> str:
    if store.parameter:
        trained = "learned frequencies: keep them float32" if store.trained else "keep a float32 plain attribute"
        return (
            f"`{store.name}` holds frequencies as an `nn.Parameter`, which `module.to(torch.bfloat16)` rounds as "
            f"it rounds a buffer; {trained}"
        )
    kept = " (persistent: it stays in the state_dict)" if store.persistent else ""
    return (
        f"`{store.name}` is a floating buffer{kept}, so `module.to(torch.bfloat16)` rounds it; keep a "
        "float32 plain attribute and move it to the input's device on use"
    )
