from __future__ import annotations

import ast
from collections.abc import Iterator

from rope_lint.diagnostics import Fix, FixSafety
from rope_lint.prefilter import PrefilterSpec, candidates
from rope_lint.rules.analysis import autocast, rotary
from rope_lint.rules.analysis.context import FileContext, walk, written_for_torchscript
from rope_lint.rules.base import FixAvailability, Flagged, Invalid, Rule, Valid
from rope_lint.rules.payloads import ClassRewrite


class RopeAutocast(Rule):
    """
    A RoPE frequency product in `forward` runs under autocast, in bf16 or fp16.

    ## What it does
    In the `forward` of a rotary class, flags a product of positions and frequencies that autocast runs in its
    lower-precision dtype, unless autocast is off around it (an enclosing `with torch.autocast(..., enabled=False)`,
    or such a decorator on `forward`) or every operand is float64 (`.double()`), which autocast leaves alone. Operands
    upcast with `.float()` do not escape: autocast casts float32 inputs to its dtype.

    Which products autocast lowers is torch's own list (torch 2.13, `rules/analysis/autocast.py`'s `LOWERING`):
    - `@`, `torch.matmul`, `mm`, `bmm`: on CUDA and CPU;
    - `torch.einsum`: on CUDA whatever the equation (its inputs are cast before it runs), on CPU when the equation
      contracts an index (it runs as `bmm`);
    - `torch.mv` on CUDA, `torch.tensordot` on CPU.
    `torch.outer` and `torch.ger` run as elementwise `mul`, which autocast leaves in float32: never flagged.

    A product is a frequency product when an operand derives, through `forward`'s local assignments, from a tensor
    the module holds (`self.inv_freq`), a method of the class or an enumeration (`torch.arange`), and none derives
    from the activation (a submodule's output, `self.qkv(x)`): the attention products `q @ k.transpose(-2, -1)`
    and `attn @ v` of a RoPE attention class are not.

    Autocast is off for the whole of a `forward` decorated with `@torch.autocast(..., enabled=False)`
    (`torch.amp.autocast` alike), with a module-level name bound to one, or with a module-level decorator that
    calls the function it wraps inside `with torch.autocast(..., enabled=False):`.

    ## Why is this bad?
    Under `torch.autocast`, these products run in the autocast dtype whatever their inputs are. The angle
    `position * inv_freq` reaches thousands of radians, so a bf16 product misplaces it by whole radians, and
    cos/sin of it are noise. (Elementwise `*` is not autocast; RPL202 covers its operands' precision.)

    ## Example
    ```python
    freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
    ```

    ## Use instead
    ```python
    with torch.autocast(device_type=x.device.type, enabled=False):
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
    ```
    or `freqs = torch.outer(positions.float(), inv_freq.float())`, which autocast does not lower.

    ## Fix safety
    Safe: the product and the tables come out in float32, or in float64 where they were, and `forward` casts what
    it returns to a dtype (`cos.to(dtype=x.dtype)`) as before, so its results keep their dtypes. The autocast
    codemod (`codemods/rope_autocast.py`) makes the edit: it wraps each run of statements holding such a product in
    one autocast-off block, and upcasts the operands that are not upcast yet, through the names they are bound to:
    to the dtype of one that is (`.float()`), else with `.to(torch.promote_types(t.dtype, torch.float32))`, so that
    a float64 module's product stays float64. No fix for a `forward` that takes no tensor (a sequence length
    alone): the block has no device type to name. Nor for one that returns a value without such a cast
    (`return emb * self.scale`): in a module cast to bf16 the product was bf16, and a float32 result would fail in
    the bf16 layers that take it. Nor in a file written for TorchScript (`torch.jit.Final`, `@torch.jit.ignore`,
    `torch.jit.is_scripting()`): `torch.jit.script` takes only a constant device type in `torch.autocast`, and
    would no longer compile the class.

    ## Known problems
    An activation that no submodule makes reads as no activation: in `x @ self.w_q`, with `x` an argument and `w_q`
    a weight held as a tensor, the held weight reads as frequencies, and the product is flagged. A decorator is
    read in the same file only; one imported from another module is not known to turn autocast off. Any cast
    counts as the cast at the end, even one to the dtype of a value computed from the product itself
    (`cos.type_as(freqs)`), which keeps its float32.
    """

    code = "RPL204"
    name = "rope-autocast"
    prefilter = PrefilterSpec(triggers=(b"inv_freq",), parses_whole_class=rotary.may_be_rotary)
    # None for a forward that takes no tensor to name a device type, or that returns a value it does not cast, and
    # in a file written for TorchScript.
    fix_availability = FixAvailability.SOMETIMES
    fix_safeties = frozenset({FixSafety.SAFE})
    fix_payloads = (ClassRewrite,)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        off_decorators: frozenset[str] | None = None
        for cls in rotary.rotary_classes(ctx):
            methods = rotary.methods(cls)
            for method in methods:
                if method.name != "forward":
                    continue
                if off_decorators is None and any(isinstance(d, ast.Name) for d in method.decorator_list):
                    # The module-level code that holds no trigger may be left out of `ctx.tree`: read what names
                    # autocast, where such a decorator is made.
                    off_decorators = ctx.derived(_autocast_off_decorators)
                if not autocast.decorated_autocast_off(method, off_decorators or frozenset()):
                    # The autocast block names the device type of a tensor forward takes; without one, no fix. Nor
                    # where the float32 product could reach the caller (`autocast.returns_cast`), or where the class
                    # may be scripted.
                    fixable = (
                        rotary.device_source(method) is not None
                        and autocast.returns_cast(ctx, method)
                        and not written_for_torchscript(ctx.source)
                    )
                    rewrite = Fix(FixSafety.SAFE, ClassRewrite("rope_autocast", cls.name)) if fixable else None
                    inputs = autocast.ProductInputs(method, {other.name for other in methods})
                    yield from self._check_forward(ctx, method.body, inputs, rewrite, autocast_off=False)

    def _check_forward(
        self,
        ctx: FileContext,
        body: list[ast.stmt],
        inputs: autocast.ProductInputs,
        rewrite: Fix | None,
        autocast_off: bool,
    ) -> Iterator[Flagged]:
        for statement in body:
            if isinstance(statement, ast.With | ast.AsyncWith):
                inner_off = autocast_off or any(
                    autocast.disables_autocast_call(item.context_expr) for item in statement.items
                )
                yield from self._check_forward(ctx, statement.body, inputs, rewrite, inner_off)
                continue
            nested = [getattr(statement, field, []) for field in ("body", "orelse", "finalbody")]
            if any(nested):
                for block in nested:
                    yield from self._check_forward(ctx, block, inputs, rewrite, autocast_off)
                continue
            if autocast_off:
                continue
            for node in walk(statement):
                product = _product(ctx, node)
                if product is None:
                    continue
                devices, operands = product
                upcasts = (inputs.upcast(ctx, operand) for operand in operands)
                if inputs.is_frequency_product(operands) and not autocast.runs_in_float64(upcasts):
                    yield self.report(
                        node,
                        f"the RoPE frequency product runs in the autocast dtype on {' and '.join(devices)}; wrap it in "
                        "`torch.autocast(..., enabled=False)` with its operands in float32 or wider",
                        rewrite,
                    )

    examples = (
        Invalid(
            # A table read through its copy on the input's device (the rope codemod's rewrite) is a held table.
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, x, position_ids):\n"
            '        inv_freq = _rope_table_on_device(self, "inv_freq", x.device)[None, :, None]\n'
            "        freqs = (inv_freq @ position_ids[:, None, :].float()).mT\n"
            "        return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)\n",
            fixed="import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, x, position_ids):\n"
            '        inv_freq = _rope_table_on_device(self, "inv_freq", x.device)[None, :, None]\n'
            "        with torch.autocast(device_type=x.device.type, enabled=False):\n"
            "            freqs = (inv_freq.float() @ position_ids[:, None, :].float()).mT\n"
            "        return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # Operands upcast with `.float()`, here through the names they are bound to (a move to a device keeps
            # the dtype), do not escape autocast: it casts float32 inputs to its dtype. The block is the whole fix.
            "import torch\n"
            "class LlamaRotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, x, position_ids):\n"
            "        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)\n"
            "        inv_freq_expanded = inv_freq_expanded.to(x.device)\n"
            "        position_ids_expanded = position_ids[:, None, :].float()\n"
            "        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)\n"
            "        return freqs.cos().to(dtype=x.dtype), freqs.sin().to(dtype=x.dtype)\n",
            fixed="import torch\n"
            "class LlamaRotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, x, position_ids):\n"
            "        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)\n"
            "        inv_freq_expanded = inv_freq_expanded.to(x.device)\n"
            "        position_ids_expanded = position_ids[:, None, :].float()\n"
            "        with torch.autocast(device_type=x.device.type, enabled=False):\n"
            "            freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)\n"
            "        return freqs.cos().to(dtype=x.dtype), freqs.sin().to(dtype=x.dtype)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # No operand is upcast: their dtype is known at run time only. `.float()` would compute a float64
            # module's product in float32; the promotion keeps float64 and raises bf16 to float32.
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, x):\n"
            "        t = torch.arange(x.shape[1], device=x.device).type_as(self.inv_freq)\n"
            "        freqs = t[:, None] @ self.inv_freq[None, :]\n"
            "        return freqs.cos().type_as(x), freqs.sin().type_as(x)\n",
            fixed="import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, x):\n"
            "        t = torch.arange(x.shape[1], device=x.device).type_as(self.inv_freq)\n"
            "        with torch.autocast(device_type=x.device.type, enabled=False):\n"
            "            freqs = t[:, None].to(torch.promote_types(t.dtype, torch.float32)) @ self.inv_freq[None, :].to(torch.promote_types(self.inv_freq.dtype, torch.float32))\n"  # noqa: E501
            "        return freqs.cos().type_as(x), freqs.sin().type_as(x)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # CUDA casts an einsum's inputs whatever the equation; `torch.outer` is elementwise `mul`, never lowered.
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, x, seq_len):\n"
            "        t = torch.arange(seq_len, device=x.device)\n"
            "        # the angles\n"
            "        freqs = torch.outer(t, self.inv_freq)\n"
            "        emb = torch.einsum('i,j->ij', t.float(), self.inv_freq)\n"
            "        return freqs.cos().type_as(x), emb.type_as(x)\n",
            fixed="import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, x, seq_len):\n"
            "        t = torch.arange(seq_len, device=x.device)\n"
            "        # the angles\n"
            "        freqs = torch.outer(t, self.inv_freq)\n"
            "        with torch.autocast(device_type=x.device.type, enabled=False):\n"
            "            emb = torch.einsum('i,j->ij', t.float(), self.inv_freq.float())\n"
            "        return freqs.cos().type_as(x), emb.type_as(x)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # forward takes a sequence length alone: the autocast block has no device type to name.
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, seq_len):\n"
            "        t = torch.arange(seq_len, device=self.inv_freq.device)\n"
            "        return torch.einsum('..., f -> ... f', t, self.inv_freq)\n"
        ),
        Valid(
            # Products that autocast never lowers: `outer`, `ger`, and elementwise `*`.
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, x, seq_len):\n"
            "        t = torch.arange(seq_len, device=x.device)\n"
            "        freqs = torch.outer(t, self.inv_freq) + torch.ger(t, self.inv_freq) + t[:, None] * self.inv_freq\n"
            "        return freqs.cos(), freqs.sin()\n"
        ),
        Valid(
            "import torch\n"
            "class LlamaRotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, x, position_ids):\n"
            "        with torch.autocast(device_type=x.device.type, enabled=False):\n"
            "            freqs = (self.inv_freq[None, :, None] @ position_ids[:, None, :]).transpose(1, 2)\n"
            "        return freqs.cos(), freqs.sin()\n"
        ),
        Valid(
            "import torch\n"
            "class LlamaRotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, x, position_ids):\n"
            "        freqs = position_ids[..., None].float() * self.inv_freq.to(device=x.device, dtype=torch.float)\n"
            "        return freqs.cos(), freqs.sin()\n"
        ),
        Valid(
            # Operands in float64: autocast leaves float64 alone.
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, x, position_ids):\n"
            "        freqs = self.inv_freq[:, None].double() @ position_ids[None, :].double()\n"
            "        return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)\n"
        ),
        Valid(
            # Autocast is off for the whole of forward, by its decorator.
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    @torch.autocast(device_type='cuda', enabled=False)\n"
            "    def forward(self, x, position_ids):\n"
            "        return (self.inv_freq[:, None] @ position_ids[None, :]).cos()\n"
            "class RotaryEmbedding3D(torch.nn.Module):\n"
            "    @torch.amp.autocast('cuda', enabled=False)\n"
            "    def forward(self, x, position_ids):\n"
            "        return torch.einsum('i,j->ij', position_ids, self.inv_freq).cos()\n"
        ),
        Valid(
            # A module-level name bound to an autocast-off context, and a module-level decorator that calls the
            # function it wraps inside one.
            "import functools\n"
            "import torch\n"
            "no_autocast = torch.autocast('cuda', enabled=False)\n"
            "def in_float32(fn):\n"
            "    @functools.wraps(fn)\n"
            "    def wrapper(*args, **kwargs):\n"
            "        with torch.autocast('cuda', enabled=False):\n"
            "            return fn(*args, **kwargs)\n"
            "    return wrapper\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    @no_autocast\n"
            "    def forward(self, x, position_ids):\n"
            "        return (self.inv_freq[:, None] @ position_ids[None, :]).cos()\n"
            "class RotaryEmbedding2D(torch.nn.Module):\n"
            "    @in_float32\n"
            "    def forward(self, x, position_ids):\n"
            "        return (self.inv_freq[:, None] @ position_ids[None, :]).cos()\n"
        ),
        Invalid(
            # A decorator that wraps nothing in an autocast-off block leaves autocast on.
            "import torch\n"
            "def traced(fn):\n"
            "    with torch.autocast('cuda', enabled=False):\n"
            "        pass\n"
            "    return fn\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    @traced\n"
            "    def forward(self, position_ids):\n"
            "        return (self.inv_freq[:, None] @ torch.arange(8)[None, :]).cos()\n"
        ),
        Invalid(
            # A forward that returns what it computes from the product without a cast: no fix. The tables of a
            # module cast to bf16 are bf16, and so is the product; a float32 product would make the result
            # float32, and the bf16 layers that add it to their input or multiply it with their weights would fail.
            "import torch\n"
            "class ScaledRotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, x):\n"
            "        positions = torch.arange(x.shape[1], device=x.device)\n"
            "        emb = torch.einsum('i, j -> i j', positions, self.inv_freq)\n"
            "        return torch.cat((emb.sin(), emb.cos()), dim=-1) * self.scale\n"
        ),
        Invalid(
            # A file written for TorchScript: `torch.jit.script` would not compile the block. No fix.
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    fused: torch.jit.Final[bool]\n"
            "    def forward(self, x, position_ids):\n"
            "        freqs = (self.inv_freq[:, None].float() @ position_ids[None, :].float()).mT\n"
            "        return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)\n"
        ),
        Invalid(
            # In a RoPE attention class, the frequency product is flagged; the attention products, whose operands
            # derive from the activation, are not. No fix: the float32 angles would make the queries, the keys
            # and the result float32.
            "import torch\n"
            "class RoPEAttention(torch.nn.Module):\n"
            "    def forward(self, hidden_states, position_ids):\n"
            "        angles = self.inv_freq[:, None] @ position_ids[None, :]\n"
            "        cos, sin = angles.mT.cos(), angles.mT.sin()\n"
            "        q, k, v = self.qkv(hidden_states).chunk(3, dim=-1)\n"
            "        q, k = q * cos + q.roll(1, -1) * sin, k * cos + k.roll(1, -1) * sin\n"
            "        attn = (q @ k.transpose(-2, -1)).softmax(-1)\n"
            "        return attn @ v\n"
        ),
        Valid(
            # q, k and v are forward's arguments: no operand derives from frequencies or positions.
            "import torch\n"
            "class RopeSelfAttention(torch.nn.Module):\n"
            "    def forward(self, q, k, v, freqs_cis):\n"
            "        q, k = apply_rotary(q, freqs_cis), apply_rotary(k, freqs_cis)\n"
            "        return torch.matmul(torch.matmul(q, k.transpose(-2, -1)).softmax(-1), v)\n"
        ),
    )


# The facts of `autocast`'s description, read from `ast`; the codemod reads the same from LibCST.
def _product(ctx: FileContext, node: ast.AST) -> tuple[tuple[str, ...], list[ast.expr]] | None:
    """The devices on which autocast lowers a product, and its operands; None for anything else."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return autocast.lowered_on(autocast.MATMUL_OPERATOR), [node.left, node.right]
    if not (isinstance(node, ast.Call) and autocast.is_product_function(name := ctx.qualified_name(node.func))):
        return None
    assert name is not None
    equation = node.args[0] if node.args else None
    literal = equation.value if isinstance(equation, ast.Constant) and isinstance(equation.value, str) else None
    devices = autocast.lowered_on(name, literal)
    return (devices, autocast.product_operands(name, node.args)) if devices else None


def _autocast_off_decorators(ctx: FileContext) -> frozenset[str]:
    if not ctx.occurrences.positions(("autocast",)):
        return frozenset()
    around = candidates.parse(ctx.source, ctx.occurrences, ("autocast",), None, ctx.path)
    return autocast.autocast_off_decorators(around)
