"""Metrics, the float64 reference and the textbook RoPE."""

from __future__ import annotations

import math

import pytest
import torch

from rope_lint.probe.build import Tables
from rope_lint.probe.reference import float64_math, textbook_tables
from rope_lint.probe.report import Yardstick


def test_measure_reports_max_errors_first_wrong_position_and_fraction():
    reference = textbook_tables(dim=8, base=10000.0, positions=10)
    cos = reference.cos.clone()
    sin = reference.sin.clone()
    cos[6, 1] += 0.01
    sin[8, 0] -= 0.5
    sin[9, 2] += 0.001  # below the threshold: not wrong
    measurement = Yardstick(reference, threshold=4e-3).measure(Tables(cos, sin))
    assert measurement.cos_max_abs_error == pytest.approx(0.01)
    assert measurement.sin_max_abs_error == pytest.approx(0.5)
    assert measurement.first_wrong_position == 6
    assert measurement.wrong_fraction == pytest.approx(2 / (2 * 10 * 8))


def test_measure_clean_and_nan():
    reference = textbook_tables(dim=8, base=10000.0, positions=10)
    clean = Yardstick(reference, threshold=4e-3).measure(reference)
    assert (clean.cos_max_abs_error, clean.first_wrong_position, clean.wrong_fraction) == (0.0, None, 0.0)
    broken_cos = reference.cos.clone()
    broken_cos[3, 3] = math.nan
    broken = Yardstick(reference, threshold=4e-3).measure(Tables(broken_cos, reference.sin))
    assert broken.cos_max_abs_error == math.inf
    assert broken.first_wrong_position == 3


def test_threshold_scales_with_values_above_one():
    # A table scaled by 1.5 (an attention factor) rounds to bf16 with errors up to 1.5x one rounding of 1.
    reference = Tables(torch.full((4, 2), 1.5, dtype=torch.float64), torch.zeros(4, 2, dtype=torch.float64))
    rounded = Tables(reference.cos + 0.005, reference.sin)
    assert Yardstick(reference, threshold=4e-3).measure(rounded).first_wrong_position is None
    assert Yardstick(reference, 4e-3).measure(Tables(reference.cos + 0.007, reference.sin)).first_wrong_position == 0


def test_float64_math_widens_every_floating_request():
    with float64_math():
        assert torch.arange(4, dtype=torch.float32).dtype == torch.float64
        assert torch.ones(2).float().dtype == torch.float64
        assert torch.ones(2).to(torch.bfloat16).dtype == torch.float64
        assert torch.ones(2).half().dtype == torch.float64
        assert torch.tensor(1.5).dtype == torch.float64
        assert (torch.arange(0, 8, 2) / 8).dtype == torch.float64
        assert torch.arange(4).dtype == torch.int64
    assert torch.ones(2).float().dtype == torch.float32
    assert torch.get_default_dtype() == torch.float32


def test_textbook_tables():
    tables = textbook_tables(dim=4, base=100.0, positions=3, linear_scaling=2.0)
    # inv_freq = [1, 1/10]; position p is scaled to p / 2; the halves repeat.
    expected = torch.tensor([[0.0, 0.0], [0.5, 0.05], [1.0, 0.1]], dtype=torch.float64)
    expected = torch.cat((expected, expected), dim=-1)
    torch.testing.assert_close(tables.cos, expected.cos(), rtol=0, atol=1e-15)
    torch.testing.assert_close(tables.sin, expected.sin(), rtol=0, atol=1e-15)
