"""What the log-domain fixes do to the numbers: each hazard fixture's functions against their fixed twins' (which
test_fixtures.py pins to the output of `rope-lint fix`), run with torch on random inputs and at the overflow points.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from helpers import REPO

DTYPES = [torch.float32, torch.float64]
# Agreement where the original is finite: within 1e-6 of max(|original|, 1). Below magnitude 1 the comparison is
# absolute, because there the originals lose relative precision to the very cancellations that the fixes remove.
TOLERANCE = 1e-6
# exp overflows above 88.72 in float32 and 709.78 in float64: an lse just past it, and two merged values 800 apart.
OVERFLOW = {torch.float32: 89.0, torch.float64: 710.0}
GAP = 800.0


def functions(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The functions of fixture `name`, as written (hazards/) and as fixed (fixed/)."""
    loaded = []
    for folder in ("hazards", "fixed"):
        path = REPO / "fixtures" / folder / f"{name}.py"
        namespace: dict[str, Any] = {"__name__": f"{folder}_{name}"}
        exec(compile(path.read_text(), str(path), "exec"), namespace)
        loaded.append(namespace)
    return loaded[0], loaded[1]


MERGE, MERGE_FIXED = functions("logdomain_attention_merge")
LOSSES, LOSSES_FIXED = functions("logdomain_losses")
NAMES, NAMES_FIXED = functions("logdomain_imported_names")

# Merges of two log-sum-exps, by what they return: a new tensor, or the first argument updated in place.
RETURNING_MERGES = [
    (MERGE, MERGE_FIXED, "merged_lse"),
    (MERGE, MERGE_FIXED, "merged_lse_methods"),
    (MERGE, MERGE_FIXED, "merged_lse_shifted"),
    (MERGE, MERGE_FIXED, "merged_lse_shifted_log"),
    (NAMES, NAMES_FIXED, "merged_lse"),
]
IN_PLACE_MERGES = [
    "merge_lse_in_place",
    "merge_lse_in_double",
    "merge_lse_one_line",
    "merge_lse_chained",
    "merge_lse_augmented",
]


def call_merge(namespace: dict[str, Any], name: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The merged lse, from a returning merge or from the tensor that an in-place one updated (inputs are copied)."""
    a, b = a.clone(), b.clone()
    result = namespace[name](a, b)
    return a if name in IN_PLACE_MERGES else result


ALL_MERGES = [*RETURNING_MERGES, *((MERGE, MERGE_FIXED, name) for name in IN_PLACE_MERGES)]
MERGE_IDS = [f"{namespace['__name__']}.{name}" for namespace, _, name in ALL_MERGES]


def assert_agree(original: torch.Tensor, fixed: torch.Tensor) -> None:
    assert fixed.dtype == original.dtype and fixed.shape == original.shape
    finite = torch.isfinite(original)
    assert finite.any()
    error = (fixed[finite] - original[finite]).abs() / original[finite].abs().clamp(min=1)
    assert error.max().item() <= TOLERANCE


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("original", "fixed", "name"), ALL_MERGES, ids=MERGE_IDS)
def test_merges_agree_where_the_original_is_finite(original, fixed, name, dtype) -> None:
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(64, 16, generator=generator, dtype=dtype) * 10
    b = torch.randn(64, 16, generator=generator, dtype=dtype) * 10
    assert_agree(call_merge(original, name, a, b), call_merge(fixed, name, a, b))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("original", "fixed", "name"), ALL_MERGES, ids=MERGE_IDS)
def test_merges_are_finite_where_the_original_overflows(original, fixed, name, dtype) -> None:
    limit = OVERFLOW[dtype]
    # (0, 800) overflows every form; (limit, limit - 1) those that exponentiate the lse itself, not the difference.
    a = torch.tensor([0.0, limit, -GAP], dtype=dtype)
    b = torch.tensor([GAP, limit - 1, 0.0], dtype=dtype)
    before, after = call_merge(original, name, a, b), call_merge(fixed, name, a, b)
    assert not torch.isfinite(before[0])
    if "shifted" not in name:
        assert not torch.isfinite(before[1])
    assert torch.isfinite(after).all()
    expected = [max(x, y) + math.log1p(math.exp(-abs(x - y))) for x, y in zip(a.tolist(), b.tolist(), strict=True)]
    assert_agree(torch.tensor(expected, dtype=dtype), after)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("original", "fixed", "name"), ALL_MERGES, ids=MERGE_IDS)
def test_two_empty_blocks_merge_to_minus_inf(original, fixed, name, dtype) -> None:
    minus_inf = torch.full((3,), -math.inf, dtype=dtype)
    merged = call_merge(fixed, name, minus_inf, minus_inf)
    assert torch.equal(merged, minus_inf), "(-inf, -inf) must merge to -inf, not nan"
    if "shifted" in name:  # b - a is nan: the original form gives nan
        assert torch.isnan(call_merge(original, name, minus_inf, minus_inf)).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", IN_PLACE_MERGES)
def test_in_place_merge_updates_the_callers_buffer_through_a_view(name: str, dtype) -> None:
    generator = torch.Generator().manual_seed(1)
    buffer = torch.randn(6, 8, generator=generator, dtype=dtype) * 10
    block = torch.randn(2, 8, generator=generator, dtype=dtype) * 10
    before = buffer.clone()
    MERGE_FIXED[name](buffer[2:4], block)  # a slice: a view of the caller's buffer
    assert torch.equal(buffer[:2], before[:2]) and torch.equal(buffer[4:], before[4:])
    assert_agree(torch.logaddexp(before[2:4], block), buffer[2:4])
    # And at the overflow point, where the original wrote inf into the buffer:
    buffer[2:4] = OVERFLOW[dtype]
    MERGE_FIXED[name](buffer[2:4], torch.full_like(block, OVERFLOW[dtype]))
    assert torch.allclose(buffer[2:4], torch.full_like(block, OVERFLOW[dtype] + math.log(2)))


def test_merged_outputs_are_not_zeroed_at_a_gap_of_800() -> None:
    generator = torch.Generator().manual_seed(3)
    out, block_out = (torch.randn(2, 4, generator=generator, dtype=torch.float64) for _ in range(2))
    lse = torch.randn(2, generator=generator, dtype=torch.float64)
    for block_lse in (lse + 1, torch.randn(2, generator=generator, dtype=torch.float64)):
        before = MERGE["merge_outputs"](out, lse, block_out, block_lse)
        after = MERGE_FIXED["merge_outputs"](out, lse, block_out, block_lse)
        for original, fixed in zip(before, after, strict=True):
            assert_agree(original, fixed)
    lse, block_lse = torch.zeros(2, dtype=torch.float64), torch.full((2,), GAP, dtype=torch.float64)
    before, before_lse = MERGE["merge_outputs"](out, lse, block_out, block_lse)
    after, after_lse = MERGE_FIXED["merge_outputs"](out, lse, block_out, block_lse)
    assert not torch.isfinite(before_lse).any() and not before.any(), "the original silently zeroes the output"
    assert torch.equal(after_lse, block_lse) and torch.allclose(after, block_out)


def _logits(generator: torch.Generator, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    return (torch.randn(32, 16, generator=generator, dtype=dtype) * 3,)


def _moderate(generator: torch.Generator, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    # Where 1 - sigmoid(x) keeps its digits in float32: the original is accurate, so the comparison tests the fix.
    return (torch.rand(32, 16, generator=generator, dtype=dtype) * 6 - 3,)


def _likelihood(generator: torch.Generator, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    return (*_moderate(generator, dtype), torch.rand(32, 16, generator=generator, dtype=dtype))


def _ratio(generator: torch.Generator, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    return (torch.rand(32, 16, generator=generator, dtype=dtype) * 4 - 0.5,)


def _growth(generator: torch.Generator, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    rate = torch.rand(32, 16, generator=generator, dtype=dtype) + 0.5
    return rate, torch.randn(32, 16, generator=generator, dtype=dtype)


Inputs = Callable[[torch.Generator, torch.dtype], tuple[torch.Tensor, ...]]
# (hazard functions, fixed functions, name, inputs where the original is accurate, an overflow point or None)
ELEMENTWISE: list[tuple[dict[str, Any], dict[str, Any], str, Inputs, Callable[[torch.dtype], tuple] | None]] = [
    (LOSSES, LOSSES_FIXED, "binary_log_likelihood", _likelihood, lambda d: ([-GAP, GAP], [0.5, 0.5])),
    (LOSSES, LOSSES_FIXED, "token_log_probs", _logits, lambda d: ([[GAP, 0.0]],)),
    (LOSSES, LOSSES_FIXED, "token_log_probs_methods", _logits, lambda d: ([[0.0, -GAP]],)),
    (LOSSES, LOSSES_FIXED, "sequence_log_partition", _logits, lambda d: ([[OVERFLOW[d], OVERFLOW[d] - 1]],)),
    (LOSSES, LOSSES_FIXED, "sequence_log_partition_kept", _logits, lambda d: ([[OVERFLOW[d], 0.0]],)),
    (LOSSES, LOSSES_FIXED, "positive_scale", _logits, lambda d: ([OVERFLOW[d], GAP],)),
    (LOSSES, LOSSES_FIXED, "positive_scale_log1p", _logits, lambda d: ([OVERFLOW[d], GAP],)),
    (LOSSES, LOSSES_FIXED, "log_ratio", _ratio, None),
    (LOSSES, LOSSES_FIXED, "log_ratio_method", _ratio, None),
    (LOSSES, LOSSES_FIXED, "growth", _growth, None),
    (LOSSES, LOSSES_FIXED, "growth_method", _growth, None),
    (NAMES, NAMES_FIXED, "positive_scale", _logits, lambda d: ([OVERFLOW[d], GAP],)),
    (NAMES, NAMES_FIXED, "log_survival", _moderate, lambda d: ([GAP],)),
    (NAMES, NAMES_FIXED, "log_ratio", _ratio, None),
]
ELEMENTWISE_IDS = [f"{namespace['__name__']}.{name}" for namespace, _, name, _, _ in ELEMENTWISE]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("original", "fixed", "name", "inputs", "overflow"), ELEMENTWISE, ids=ELEMENTWISE_IDS)
def test_functions_agree_and_stay_finite(original, fixed, name, inputs, overflow, dtype) -> None:
    arguments = inputs(torch.Generator().manual_seed(2), dtype)
    assert_agree(original[name](*arguments), fixed[name](*arguments))
    if overflow is not None:
        point = [torch.tensor(value, dtype=dtype) for value in overflow(dtype)]
        assert not torch.isfinite(original[name](*point)).all()
        assert torch.isfinite(fixed[name](*point)).all()


@pytest.mark.parametrize(
    ("name", "arguments", "reference"),
    [
        ("log_ratio", (1e-10,), math.log1p(1e-10)),
        ("growth", (1.0, 1e-10), math.expm1(1e-10)),
    ],
)
def test_small_arguments_keep_their_digits(name: str, arguments: tuple[float, ...], reference: float) -> None:
    tensors = [torch.tensor([value], dtype=torch.float32) for value in arguments]
    assert LOSSES[name](*tensors).item() == 0.0, "the original rounds the small argument away"
    assert abs(LOSSES_FIXED[name](*tensors).item() - reference) <= TOLERANCE * reference
