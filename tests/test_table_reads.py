"""The rope codemod moves a rotary class's tables off the module, and rewrites only its own class's reads of them: code
elsewhere in the package that reads a table off the module (an attention layer that hands
`self.rotary_emb.cos_sin_cache` to its kernel) would get a float32 CPU attribute instead of the buffer on the module's
device. `fix` leaves the class where the package reads one (rope_lint/rules/analysis/table_reads.py); `check`, which
reads one file, counts the fix as available."""

from __future__ import annotations

import sys
from pathlib import Path

import libcst as cst
import pytest
import torch
from helpers import rope_lint
from rope_lint.codemods import rope_tables
from rope_lint.codemods.codemod_file import CodemodFile

from rope_lint import api
from rope_lint.engine import Settings, check_paths
from rope_lint.rules import select_rules
from rope_lint.rules.analysis import callers

ROTARY = """import torch
from torch import nn


class CacheRotaryEmbedding(nn.Module):
    def __init__(self, dim: int, max_positions: int = 64):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        angles = torch.outer(torch.arange(max_positions, dtype=torch.int64).float(), inv_freq)
        self.register_buffer("cos_sin_cache", torch.cat((angles.cos(), angles.sin()), dim=-1), persistent=False)

    def rebuilt(self, cache: torch.Tensor) -> torch.Tensor:
        return cache.clone()

    def forward(self, positions: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.cos_sin_cache[positions].to(x.dtype)
"""

# An attention layer that hands its rotary module's table to a kernel of its own, which wants it where the
# activations are: what inference engines do.
ATTENTION = """import torch
from torch import nn

from .rotary import CacheRotaryEmbedding


def rotate_kernel(q: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor) -> torch.Tensor:
    if cos_sin_cache.device != q.device:
        raise RuntimeError(f"the cache is on {cos_sin_cache.device}, the query on {q.device}")
    cos, sin = cos_sin_cache[positions].chunk(2, dim=-1)
    return q * torch.cat((cos, cos), dim=-1) + q.flip(-1) * torch.cat((sin, sin), dim=-1)


class Attention(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.rotary_emb = CacheRotaryEmbedding(dim)

    def forward(self, positions: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return rotate_kernel(q, positions, self.rotary_emb.cos_sin_cache)
"""

# How other code can name the table, by whether the rewrite would change what it gets.
READS = {
    "handed to a function": ("def use(module, q):\n    return kernel(q, module.cos_sin_cache)\n", True),
    "off an attribute": ("def use(layer):\n    return layer.rotary_emb.cos_sin_cache[0]\n", True),
    "its dtype": ("def use(module):\n    return module.cos_sin_cache.dtype\n", True),
    "its device": ("def use(module, q):\n    return q.to(module.cos_sin_cache.device)\n", True),
    "written into in place": ("def use(module, value):\n    module.cos_sin_cache.copy_(value)\n", False),
    "an init function's destination": ("def use(module, value):\n    init.copy_(module.cos_sin_cache, value)\n", False),
    "its shape": ("def use(module):\n    return module.cos_sin_cache.shape[0]\n", False),
    "replaced": ("def use(module, value):\n    module.cos_sin_cache = value\n", False),
    "its data replaced": ("def use(module, value):\n    module.cos_sin_cache.data = value\n", False),
    "copied into another table": ("def use(new, old):\n    new.cos_sin_cache.data = old.cos_sin_cache\n", False),
    "handed to the module's own method": ("def use(module):\n    return module.rebuilt(module.cos_sin_cache)\n", False),
    "a string": ('NAMES = ["rotary_emb.cos_sin_cache"]\n', False),
    "off self in a class of its own": (
        "class Other:\n    def use(self):\n        return self.cos_sin_cache\n",
        False,
    ),
}


def package(root: Path, modules: dict[str, str]) -> Path:
    folder = root / "pkg"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text("")
    for name, text in {"rotary.py": ROTARY, **modules}.items():
        (folder / name).write_text(text)
    return folder


def class_fixed(folder: Path) -> bool:
    """Whether `fix --unsafe-fixes` rewrites the rotary class (its one RPL202 finding)."""
    report = api.fix([str(folder / "rotary.py")], api.Options(select=["RPL202"]), unsafe=True, diff=True)
    assert len(report.fixed) + len(report.remaining) == 1, "the table is flagged"
    assert bool(report.fixed) == ("rotary.py" in report.diff)
    return bool(report.fixed)


@pytest.mark.parametrize("how", READS)
def test_the_class_is_fixed_only_where_no_other_code_reads_its_tables(tmp_path: Path, how: str) -> None:
    reader, changes = READS[how]
    folder = package(tmp_path, {"reader.py": reader})
    assert class_fixed(folder) == (not changes)
    # The codemod, run alone as LibCST's tool runs it, asks the package too.
    rewritten = rope_tables.rewrite(cst.parse_module(ROTARY), CodemodFile(str(folder / "rotary.py")))
    assert (rewritten.code == ROTARY) == changes


def test_a_table_that_another_module_hands_to_a_kernel_stays_where_the_module_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fix leaves the class as it is, and the layer built on another device (`meta`, for an accelerator) still
    hands its kernel a table there: the rewritten class's table was a float32 attribute on the CPU."""
    folder = package(tmp_path, {"attention.py": ATTENTION})
    fixed = rope_lint("fix", "--unsafe-fixes", str(folder), cwd=tmp_path)
    assert fixed.returncode == 1, fixed.stdout + fixed.stderr  # the findings remain, without a fix
    assert (folder / "rotary.py").read_text() == ROTARY
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [name for name in sys.modules if name == "pkg" or name.startswith("pkg.")]:
        monkeypatch.delitem(sys.modules, name)
    from pkg.attention import Attention  # type: ignore[import-not-found]

    with torch.device("meta"):
        layer = Attention(8)
        out = layer(torch.arange(4), torch.ones(4, 8))
    assert out.device.type == "meta"


def test_a_check_reads_no_other_module_for_it_and_counts_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pre-commit check of one file must not read its whole package for every rotary class: `check` counts the
    class fix as available, and `fix` (above) withholds it."""
    folder = package(tmp_path, {"attention.py": ATTENTION})
    read: list[str] = []
    real = callers.read_regular
    monkeypatch.setattr(callers, "read_regular", lambda path, *rest: read.append(path) or real(path, *rest))
    found = check_paths([str(folder / "rotary.py")], Settings(select_rules(["RPL202"], []), str(tmp_path)))
    assert [d.fix is not None for d in found] == [True]
    assert read == []


def test_the_tables_a_class_stores_are_found_in_every_way_it_stores_them() -> None:
    """`rotary.stored_tables`: the names the fix's availability rests on (`Fix.moves_tables`)."""
    import ast

    from rope_lint.rules.analysis import rotary

    cls = ast.parse(
        "class R:\n"
        "    def __init__(self, prefix, inv_freq):\n"
        '        self.register_buffer("inv_freq", inv_freq, persistent=False)\n'
        '        self.register_buffer(f"{prefix}long_inv_freq", inv_freq)\n'
        '        setattr(self, "original_inv_freq", inv_freq)\n'
        "        self.cos_cached, self.sin_cached = inv_freq.cos(), inv_freq.sin()\n"
        "        self.inv_freq_fp32 = inv_freq\n"
        "        self.scaling = 1.0\n"
        "        other.sin_table = inv_freq\n"
    ).body[0]
    assert isinstance(cls, ast.ClassDef)
    assert rotary.stored_tables(cls) == {"inv_freq", "long_inv_freq", "original_inv_freq", "cos_cached", "sin_cached"}
