"""RPL204's table of what autocast lowers (issue 20): the CPU column is torch's own behaviour, an einsum's equation
decides on CPU, and the rule and its codemod agree on every product of the table. Its safe fix keeps the dtype of
what `forward` returns, in a model cast to bf16."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest
import torch
from helpers import load_module
from libcst.codemod import CodemodContext
from rope_lint.codemods.commands import RopeAutocastCommand

from rope_lint.engine import Settings, check_source
from rope_lint.fix.apply import apply_fixes, fixable
from rope_lint.rules.analysis import autocast
from rope_lint.rules.analysis.context import FileContext
from rope_lint.rules.base import Invalid, Valid
from rope_lint.rules.rope_autocast import RopeAutocast


@pytest.mark.parametrize(
    ("equation", "contracts"),
    [
        ("i,j->ij", False),
        ("..., f -> ... f", False),
        ("bi,bj->bij", False),
        ("i,j", False),
        ("ij,jk->ik", True),
        ("i,i->", True),
        ("ij,ij", True),
        ("...i,...i->...", True),
        (None, False),
    ],
)
def test_an_einsum_contracts_by_its_equation(equation: str | None, contracts: bool) -> None:
    assert autocast.einsum_contracts(equation) is contracts


# Each product of the table on CPU tensors, with the einsum equation that its CPU column needs.
_CPU_CALLS = {
    autocast.MATMUL_OPERATOR: lambda m, v: m @ m,
    "torch.matmul": lambda m, v: torch.matmul(m, m),
    "torch.mm": lambda m, v: torch.mm(m, m),
    "torch.bmm": lambda m, v: torch.bmm(m[None], m[None]),
    "torch.mv": lambda m, v: torch.mv(m, v),
    "torch.tensordot": lambda m, v: torch.tensordot(m, m, dims=1),
    "torch.outer": lambda m, v: torch.outer(v, v),
    "torch.ger": lambda m, v: torch.ger(v, v),
    "torch.dot": lambda m, v: torch.dot(v, v),
    "torch.vdot": lambda m, v: torch.vdot(v, v),
}


@pytest.mark.parametrize("function", sorted(autocast.LOWERING))
def test_the_cpu_column_is_what_torch_does(function: str) -> None:
    m, v = torch.ones(4, 4), torch.ones(4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        if function == "torch.einsum":
            lowered = {eq: torch.einsum(eq, m, m).dtype == torch.bfloat16 for eq in ("ij,jk->ik", "ij,ik->ijk")}
            assert lowered == {"ij,jk->ik": True, "ij,ik->ijk": False}
            assert autocast.lowered_on(function, "ij,jk->ik") == (autocast.CUDA, autocast.CPU)
            assert autocast.lowered_on(function, "ij,ik->ijk") == (autocast.CUDA,)
            return
        lowered_here = _CPU_CALLS[function](m, v).dtype == torch.bfloat16
    assert (autocast.CPU in autocast.lowered_on(function)) is lowered_here


SOURCE = """\
import torch as t


class RotaryEmbedding(t.nn.Module):
    def forward(self, x, positions):
        freqs = {product}
        return freqs.cos(), freqs.sin()
"""
PRODUCTS = {
    "torch.matmul": "t.matmul(positions, self.inv_freq)",
    "torch.mm": "t.mm(positions, self.inv_freq)",
    "torch.bmm": "t.bmm(positions, self.inv_freq)",
    "torch.mv": "t.mv(positions, self.inv_freq)",
    "torch.einsum": 't.einsum("i,j->ij", positions, self.inv_freq)',
    "torch.tensordot": "t.tensordot(positions, self.inv_freq)",
    "torch.outer": "t.outer(positions, self.inv_freq)",
    "torch.ger": "t.ger(positions, self.inv_freq)",
    "torch.dot": "t.dot(positions, self.inv_freq)",
    "torch.vdot": "t.vdot(positions, self.inv_freq)",
}


def test_every_function_of_the_table_is_tried() -> None:
    assert set(PRODUCTS) == set(autocast.LOWERING) - {autocast.MATMUL_OPERATOR}


@pytest.mark.parametrize("function", sorted(PRODUCTS))
def test_the_rule_and_the_codemod_agree_on_each_product(function: str) -> None:
    source = SOURCE.format(product=PRODUCTS[function])
    found = check_source("rotary.py", source, Settings([RopeAutocast()], Path(".")))
    rewritten = RopeAutocastCommand(CodemodContext()).transform_module(cst.parse_module(source)).code
    lowered = bool(autocast.lowered_on(function, "i,j->ij"))
    assert [finding.code for finding in found] == (["RPL204"] if lowered else [])
    # The codemod rewrites where the rule offers its fix: where `positions` shows itself a tensor to name a device
    # type by the functions `rotary.device_source` knows.
    assert (rewritten != source) is any(finding.fix is not None for finding in found)


@pytest.mark.parametrize("example", RopeAutocast.examples, ids=lambda example: type(example).__name__)
def test_the_codemod_on_its_own_makes_each_example_what_the_rule_says(example: Valid | Invalid) -> None:
    """Run as `python -m libcst.tool codemod` runs it, on the whole module: a silent example and one without a fix
    are left as they are (a decorator that turns autocast off, an attention product, `torch.outer`)."""
    rewritten = RopeAutocastCommand(CodemodContext()).transform_module(cst.parse_module(example.code)).code
    fixed = example.fixed if isinstance(example, Invalid) and example.fixed is not None else example.code
    assert rewritten == fixed


# Two rotary classes whose frequency product autocast lowers: one returns what it computes as it is, the other casts
# it to the input's dtype. In a module cast with `.to(torch.bfloat16)`, both products are bf16.
_RETURNS_THE_PRODUCT = """\
import torch


class ScaledRotaryEmbedding(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(1) * dim**-0.5)
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim), persistent=False)

    def forward(self, x):
        positions = torch.arange(x.shape[1], device=x.device)
        emb = torch.einsum("i, j -> i j", positions, self.inv_freq)
        return torch.cat((emb.sin(), emb.cos()), dim=-1) * self.scale
"""
_CASTS_WHAT_IT_RETURNS = _RETURNS_THE_PRODUCT.replace(
    "return torch.cat((emb.sin(), emb.cos()), dim=-1) * self.scale",
    "return (torch.cat((emb.sin(), emb.cos()), dim=-1) * self.scale).to(dtype=x.dtype)",
)


def _safely_fixed(source: str) -> str:
    found = check_source("model.py", source, Settings([RopeAutocast()], Path(".")))
    assert [d.code for d in found] == ["RPL204"]
    return apply_fixes(source, fixable(found, unsafe=False)).text


def _in_a_model(source: str, dtype: torch.dtype) -> torch.Tensor:
    """What a layer makes of its input plus the class's embedding, in a model cast with `.to(dtype)`."""
    namespace: dict = {}
    exec(compile(source, "model.py", "exec"), namespace)
    torch.manual_seed(0)
    embedding, layer = namespace["ScaledRotaryEmbedding"](16), torch.nn.Linear(16, 16)
    torch.nn.ModuleList([embedding, layer]).to(dtype)
    x = torch.randn(1, 8, 16, dtype=dtype)
    return layer(x + embedding(x))


def test_the_safe_fix_leaves_a_forward_that_returns_its_product_uncast() -> None:
    """A float32 product would make the embedding float32, and the bf16 layer that takes it would fail ("mat1 and mat2
    must have the same dtype"): no fix is offered, and the safe fix changes nothing."""
    assert _safely_fixed(_RETURNS_THE_PRODUCT) == _RETURNS_THE_PRODUCT
    assert _in_a_model(_RETURNS_THE_PRODUCT, torch.bfloat16).dtype == torch.bfloat16


def test_the_safe_fix_of_a_forward_that_casts_what_it_returns_keeps_its_dtype_and_fp32_values() -> None:
    fixed = _safely_fixed(_CASTS_WHAT_IT_RETURNS)
    assert "enabled=False" in fixed and "promote_types(positions.dtype, torch.float32)" in fixed
    in_bf16 = _in_a_model(fixed, torch.bfloat16), _in_a_model(_CASTS_WHAT_IT_RETURNS, torch.bfloat16)
    assert [result.dtype for result in in_bf16] == [torch.bfloat16, torch.bfloat16]
    assert torch.equal(_in_a_model(fixed, torch.float32), _in_a_model(_CASTS_WHAT_IT_RETURNS, torch.float32))


def test_the_safe_fix_keeps_a_float64_module_in_float64() -> None:
    """DESIGN §8: a dtype is never lowered. No operand is upcast, so their dtype is known at run time only: `.float()`
    would compute the float64 product in float32 (-0.74777740 for -0.7477773956818 at position 4999); the promotion
    keeps every value."""
    fixed = _safely_fixed(_CASTS_WHAT_IT_RETURNS)
    assert torch.equal(_in_a_model(fixed, torch.float64), _in_a_model(_CASTS_WHAT_IT_RETURNS, torch.float64))
    assert "promote_types(self.inv_freq.dtype, torch.float32)" in fixed


# A Llama-shaped forward whose operands are upcast with `.float()`, through the names they are bound to, and whose
# product runs with autocast on: autocast casts float32 inputs to its dtype, `.float()` or not.
_UPCAST_UNDER_AUTOCAST = """\
import torch


class RotaryEmbedding(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim), persistent=False)

    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
        return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
"""


def _cos_under_cpu_autocast(source: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The class's cos table in fp32, and under CPU autocast to bf16, for positions up to 4,096."""
    namespace: dict = {}
    exec(compile(source, "rotary.py", "exec"), namespace)
    rotary, x = namespace["RotaryEmbedding"](64), torch.randn(1, 4096, 64)
    positions = torch.arange(4096)[None]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        under_autocast = rotary(x, positions)[0]
    return rotary(x, positions)[0], under_autocast


@pytest.mark.parametrize(
    "product",
    ["inv_freq_expanded @ position_ids_expanded", "inv_freq_expanded.float() @ position_ids_expanded.float()"],
)
def test_operands_upcast_with_float_are_flagged_and_the_fix_is_the_block_alone(product: str) -> None:
    source = _UPCAST_UNDER_AUTOCAST.replace("inv_freq_expanded @ position_ids_expanded", product)
    reference, lowered = _cos_under_cpu_autocast(source)
    assert (reference - lowered).abs().max() > 0.5  # the angles of a bf16 product are off by whole radians
    fixed = _safely_fixed(source)
    assert fixed == source.replace(
        f"        freqs = ({product}).transpose(1, 2)\n",
        "        with torch.autocast(device_type=x.device.type, enabled=False):\n"
        f"            freqs = ({product}).transpose(1, 2)\n",
    )
    reference_fixed, under_autocast = _cos_under_cpu_autocast(fixed)
    assert torch.equal(reference_fixed, reference) and torch.equal(under_autocast, reference)


# A 2D vision RoPE in a file written for TorchScript, as timm writes them: `torch.jit.script` compiles it.
_SCRIPTED = """\
from typing import List, Tuple

import torch


class Rope2D(torch.nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim), persistent=False)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        tables: List[torch.Tensor] = []
        for axis in range(2):
            freqs = (inv_freq_expanded @ position_ids[:, None, :, axis].float()).transpose(1, 2)
            tables.append(freqs.cos())
        cos = torch.cat(tables, dim=-1).to(dtype=x.dtype)
        return cos, cos

    @torch.jit.ignore
    def extra_repr(self) -> str:
        return "2D"
"""


def _runs_scripted(tmp_path: Path, source: str, name: str) -> bool:
    """Whether the class compiled by `torch.jit.script`, from a file of its own (TorchScript reads the source),
    runs."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    scripted = torch.jit.script(load_module(path, name).Rope2D(8))
    try:
        scripted(torch.randn(1, 4, 8), torch.randint(0, 16, (1, 4, 2)))
    except RuntimeError:  # "Autocast device argument must be a constant"
        return False
    return True


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_no_fix_in_a_file_written_for_torchscript(tmp_path: Path) -> None:
    """TorchScript takes only a constant device type in `torch.autocast`: the scripted class would fail with the
    block."""
    found = check_source("rope.py", _SCRIPTED, Settings([RopeAutocast()], Path(".")))
    assert [(finding.code, finding.fix) for finding in found] == [("RPL204", None)]
    codemod = RopeAutocastCommand(CodemodContext())
    assert codemod.transform_module(cst.parse_module(_SCRIPTED)).code == _SCRIPTED
    assert _runs_scripted(tmp_path, _SCRIPTED, "original")
    # Why: the same class in a file with no sign of TorchScript gets the block, which TorchScript does not compile.
    unmarked = _SCRIPTED.replace("    @torch.jit.ignore\n", "")
    rewritten = codemod.transform_module(cst.parse_module(unmarked)).code
    assert "enabled=False" in rewritten
    assert not _runs_scripted(tmp_path, rewritten, "rewritten")


@pytest.mark.parametrize(
    ("binding", "expected"),
    [
        ("t = self.inv_freq.float()", autocast.Upcast.FLOAT32),
        ("t = self.inv_freq[None, :, None].double().expand(2, -1, 1)", autocast.Upcast.FLOAT64),
        ("t = self.inv_freq.to(torch.float32)\n    t = t.to(x.device)", autocast.Upcast.FLOAT32),
        ("t = self.inv_freq.to(dtype=torch.promote_types(x.dtype, torch.float32))", autocast.Upcast.AT_LEAST_FLOAT32),
        ("t = self.inv_freq.to(torch.promote_types(x.dtype, torch.float32))", autocast.Upcast.AT_LEAST_FLOAT32),
        ("t = self.inv_freq.to(x.device, torch.float64).contiguous()", autocast.Upcast.FLOAT64),
        ("t = self.inv_freq.to(torch.bfloat16)", None),
        # A move to another tensor takes its dtype too; a name bound to values of two dtypes has none.
        ("t = self.inv_freq.float().to(x)", None),
        ("t = self.inv_freq.float()\n    t = self.inv_freq.double()", None),
        ("t = self.inv_freq", None),
    ],
)
def test_how_an_operand_is_upcast_through_the_names_it_is_bound_to(
    binding: str, expected: autocast.Upcast | None
) -> None:
    source = f"import torch\ndef forward(self, x):\n    {binding}\n    return t @ t\n"
    tree = ast.parse(source)
    function = tree.body[1]
    assert isinstance(function, ast.FunctionDef)
    ctx = FileContext("rotary.py", source, tree, ())
    inputs = autocast.ProductInputs(function, ())
    assert inputs.upcast(ctx, ast.parse("t[:, None]", mode="eval").body) is expected


def test_the_codemods_read_the_files_imports_from_the_text_and_tree_that_rope_lint_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """rope-lint hands a codemod a run of the file's statements, with the file's whole text and the syntax tree that
    the fix parsed: the codemod reads the file's imports from them, and neither reads the file again nor parses it."""
    from rope_lint.codemods import apply_codemods

    example = next(e for e in RopeAutocast.examples if isinstance(e, Invalid) and e.fixed is not None)
    assert example.fixed is not None

    def aliased(code: str) -> str:  # torch under a name that only the file's imports tell
        return code.replace("import torch\n", "import torch as th\n").replace("torch.", "th.")

    source = aliased(example.code)
    chunk = source[source.index("class ") :]  # the class, without the import
    parsed: list[str] = []
    parse = ast.parse
    tree = parse(source)
    monkeypatch.setattr(ast, "parse", lambda text, *args, **kwargs: parsed.append(text) or parse(text, *args, **kwargs))
    module = cst.parse_module(chunk)
    fixed = apply_codemods(module, ["rope_autocast"], filename="not/on/disk.py", text=source, tree=tree)
    fixed_source = aliased(example.fixed)
    assert fixed.code == fixed_source[fixed_source.index("class ") :]
    assert source not in parsed
