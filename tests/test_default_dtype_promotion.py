"""RPL103 on an integer enumeration that meets a Python float (a sinusoid's timescales): the hazard is real while a
model is built in bf16, and the safe fix removes it without changing what float32 computes."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from helpers import load_module

from rope_lint import api

torch = pytest.importorskip("torch")

# A sinusoidal position table built at construction, of the shape of an audio encoder's: the timescales are an
# integer enumeration times a Python float, so they take the default dtype.
SINUSOIDS = """\
import math

import torch
from torch import nn


def sinusoids(length, channels):
    step = math.log(10000) / (channels // 2 - 1)
    timescales = torch.exp(-step * torch.arange(channels // 2))
    angles = torch.arange(length)[:, None] * timescales[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=1)


class AudioEncoder(nn.Module):
    def __init__(self, n_ctx, width):
        super().__init__()
        self.register_buffer("positions", sinusoids(n_ctx, width))
"""


def built(module: ModuleType, default_dtype: torch.dtype) -> torch.Tensor:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(default_dtype)  # what `from_pretrained(torch_dtype=...)` does while a model is built
    try:
        return module.AudioEncoder(1500, 384).positions
    finally:
        torch.set_default_dtype(previous)


def test_the_fix_of_a_float_operand_removes_the_error_of_a_bf16_build_and_keeps_float32(tmp_path: Path) -> None:
    original_path, fixed_path = tmp_path / "original.py", tmp_path / "fixed.py"
    original_path.write_text(SINUSOIDS)
    fixed_path.write_text(SINUSOIDS)
    found = api.check([str(original_path)], api.Options(select=["RPL103"])).findings
    assert [(d.code, d.start.line) for d in found] == [("RPL103", 9)]
    report = api.fix([str(fixed_path)], api.Options(select=["RPL103"]))
    assert len(report.fixed) == 1 and report.remaining == []
    assert "torch.exp(-step * torch.arange(channels // 2).float())" in fixed_path.read_text()
    original, fixed = load_module(original_path, "sinusoids_original"), load_module(fixed_path, "sinusoids_fixed")

    reference = built(original, torch.float64)
    original_error = (built(original, torch.bfloat16).double() - reference).abs().max().item()
    fixed_table = built(fixed, torch.bfloat16)
    fixed_error = (fixed_table.double() - reference).abs().max().item()
    print(f"max abs error against float64, built in bf16: original {original_error:.4f}, fixed {fixed_error:.2e}")
    assert original_error > 1.0  # angles of positions near 1,500 rounded by whole radians
    assert fixed_error < 1e-3  # float32 timescales, angles and table
    assert torch.equal(built(fixed, torch.float32), built(original, torch.float32))  # safe: float32 as before
