"""RPL105's facts, in torch and DeepSpeed: bf16 rounds `torch.linspace` points one apart as far as
`enumerations.bf16_holds_up_to` says, a bf16 default dtype reaches a `torch.linspace` without `dtype=`, and zero.Init
leaves an explicit float32 `torch.linspace` alone (so RPL105, unlike RPL101, never flags one)."""

from __future__ import annotations

import pytest
import torch

from rope_lint.probe.triggers import ZERO_INIT_CONSTRUCTORS, deepspeed_zero_init, default_dtype
from rope_lint.rules.analysis.enumerations import bf16_holds_up_to


@pytest.mark.parametrize("offset", [0.0, 0.5, 0.25])
def test_bf16_holds_points_one_apart_exactly_as_far_as_the_rule_says(offset: float) -> None:
    limit = bf16_holds_up_to(offset)
    assert limit == {0.0: 256, 0.5: 128, 0.25: 64}[offset]
    held = int(limit - offset) + 1  # the points up to the limit
    points = torch.linspace(offset, offset + held - 1, held, dtype=torch.bfloat16)
    assert torch.equal(points.double(), torch.arange(held, dtype=torch.float64) + offset)
    one_more = torch.linspace(offset, offset + held, held + 1, dtype=torch.bfloat16)
    assert one_more[-1].item() != offset + held


def test_a_bf16_grid_300_cells_wide_has_278_distinct_points_off_by_up_to_2() -> None:
    """The figures of RPL105's "Why is this bad?"."""
    points = torch.linspace(0, 299, 300, dtype=torch.bfloat16)
    assert points.unique().numel() == 278
    assert (points.double() - torch.arange(300, dtype=torch.float64)).abs().max().item() == 2.0


def test_a_bf16_default_dtype_reaches_linspace_without_a_dtype() -> None:
    with default_dtype(torch.bfloat16):
        points = torch.linspace(0, 299, 300)
    assert points.dtype == torch.bfloat16
    assert points.unique().numel() < 300


def test_zero_init_casts_an_explicit_float32_arange_and_leaves_linspace_alone() -> None:
    assert "linspace" not in ZERO_INIT_CONSTRUCTORS  # the probe's stand-in patches what DeepSpeed patches
    with deepspeed_zero_init():
        enumeration = torch.arange(300, dtype=torch.float32)
        points = torch.linspace(0, 299, 300, dtype=torch.float32)
    assert enumeration.dtype == torch.bfloat16
    assert points.dtype == torch.float32
    assert torch.equal(points.cpu(), torch.arange(300, dtype=torch.float32))
