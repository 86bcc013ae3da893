from __future__ import annotations

import ast
from collections.abc import Iterator

from rope_lint.diagnostics import Fix, FixSafety
from rope_lint.prefilter import PrefilterSpec
from rope_lint.rules.analysis import autocast, rotary
from rope_lint.rules.analysis.context import FileContext
from rope_lint.rules.base import ClassRewrite, FixAvailability, Flagged, Invalid, Rule, Valid


class RopeAutocast(Rule):
    """
    A RoPE frequency product in `forward` runs under autocast, in bf16 or fp16.

    ## What it does
    In the `forward` of a rotary class, flags the product of positions and inverse frequencies (`@`,
    `torch.matmul`, `torch.outer`, `torch.einsum`) when neither its operands are upcast to float32 nor an
    enclosing `torch.autocast(..., enabled=False)` turns autocast off.

    ## Why is this bad?
    Under `torch.autocast`, matrix products run in the autocast dtype whatever their inputs are. The angle
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

    ## Fix safety
    Safe: the product and the tables come out in float32, and `forward` casts them to the input dtype at the
    end as before. The autocast codemod (`codemods/rope_autocast.py`) makes the edit: it wraps each run of
    statements holding such a product in one autocast-off block and upcasts the product's operands. No fix
    for a `forward` that takes no tensor (a sequence length alone): the block has no device type to name.
    """

    code = "RPL204"
    name = "rope-autocast"
    prefilter = PrefilterSpec(triggers=(b"inv_freq",), parses_whole_class=rotary.may_be_rotary)
    fix_availability = FixAvailability.SOMETIMES  # none for a forward that takes no tensor to name a device type
    fix_safeties = frozenset({FixSafety.SAFE})
    fix_payloads = (ClassRewrite,)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        for cls in rotary.rotary_classes(ctx):
            for method in rotary.methods(cls):
                if method.name == "forward":
                    # The autocast block names the device type of a tensor forward takes; without one, no fix.
                    has_device = rotary.device_source(method) is not None
                    rewrite = Fix(FixSafety.SAFE, ClassRewrite("rope_autocast", cls.name)) if has_device else None
                    yield from self._check_forward(ctx, method.body, rewrite, autocast_off=False)

    def _check_forward(
        self, ctx: FileContext, body: list[ast.stmt], rewrite: Fix | None, autocast_off: bool
    ) -> Iterator[Flagged]:
        for statement in body:
            if isinstance(statement, ast.With | ast.AsyncWith):
                inner_off = autocast_off or any(_disables_autocast(item.context_expr) for item in statement.items)
                yield from self._check_forward(ctx, statement.body, rewrite, inner_off)
                continue
            nested = [getattr(statement, field, []) for field in ("body", "orelse", "finalbody")]
            if any(nested):
                for block in nested:
                    yield from self._check_forward(ctx, block, rewrite, autocast_off)
                continue
            if autocast_off:
                continue
            for node in ast.walk(statement):
                operands = _product_operands(ctx, node)
                if operands and not all(_is_upcast(ctx, operand) for operand in operands):
                    yield self.report(
                        node,
                        "the RoPE frequency product runs in the autocast dtype; upcast its operands with `.float()` "
                        "and wrap it in `torch.autocast(..., enabled=False)`",
                        rewrite,
                    )

    examples = (
        Invalid(
            "import torch\n"
            "class LlamaRotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, x, position_ids):\n"
            "        freqs = (self.inv_freq[None, :, None] @ position_ids[:, None, :]).mT\n"
            "        return freqs.cos(), freqs.sin()\n",
            fixed="import torch\n"
            "class LlamaRotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, x, position_ids):\n"
            "        with torch.autocast(device_type=position_ids.device.type, enabled=False):\n"
            "            freqs = (self.inv_freq[None, :, None].float() @ position_ids[:, None, :].float()).mT\n"
            "        return freqs.cos(), freqs.sin()\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, x, seq_len):\n"
            "        t = torch.arange(seq_len, device=x.device)\n"
            "        # the angles\n"
            "        freqs = torch.outer(t, self.inv_freq)\n"
            "        emb = torch.einsum('i,j->ij', t, self.inv_freq)\n"
            "        return freqs.cos(), emb\n",
            fixed="import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, x, seq_len):\n"
            "        t = torch.arange(seq_len, device=x.device)\n"
            "        # the angles\n"
            "        with torch.autocast(device_type=x.device.type, enabled=False):\n"
            "            freqs = torch.outer(t.float(), self.inv_freq.float())\n"
            "            emb = torch.einsum('i,j->ij', t.float(), self.inv_freq.float())\n"
            "        return freqs.cos(), emb\n",
            safety=FixSafety.SAFE,
            count=2,
        ),
        Invalid(
            # forward takes a sequence length alone: the autocast block has no device type to name.
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def forward(self, seq_len):\n"
            "        t = torch.arange(seq_len, device=self.inv_freq.device)\n"
            "        return torch.outer(t, self.inv_freq)\n"
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
    )


# The facts of `autocast`'s description, read from `ast`; the codemod reads the same from LibCST.
def _product_operands(ctx: FileContext, node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return [node.left, node.right]
    if isinstance(node, ast.Call) and autocast.is_product_function(name := ctx.qualified_name(node.func)):
        return autocast.product_operands(name, node.args)
    return []


def _is_upcast(ctx: FileContext, node: ast.expr) -> bool:
    """`t.float()`, `t.double()`, `t.to(torch.float32)`, `t.to(device=d, dtype=torch.float)`."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    dtypes = [*node.args, *(kw.value for kw in node.keywords if kw.arg == "dtype")]
    return autocast.is_upcast(node.func.attr, (ctx.qualified_name(dtype) for dtype in dtypes))


def _disables_autocast(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    enabled_false = any(
        kw.arg == "enabled" and isinstance(kw.value, ast.Constant) and kw.value.value is False for kw in node.keywords
    )
    return autocast.disables_autocast(ast.unparse(node.func), enabled_false)
