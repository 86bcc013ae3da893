"""What the original and the fixed code return, compared: structure, dtypes, shapes and values in fp32."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from rope_lint.probe.build import describe

# The largest relative difference allowed between the original's and the fixed code's fp32 results.
TOLERANCE = 1e-6


class Mismatch(Exception):
    """The results differ; the message says where and how."""


class Incomparable(Exception):
    """A result that can only be compared by identity (a function, most objects): two runs never give the same one,
    so nothing is proven either way; the message says what it is."""


def relative_difference(original: Any, fixed: Any, where: str = "result") -> float:
    """The largest relative difference between two results of the same structure: tensors compared as
    max|fixed - original| / max|original| (NaN and infinities must sit where the original's do), numbers likewise,
    tuples, lists and dicts item by item, anything else by equality. Raises Mismatch for a different structure,
    dtype or shape, or different values; Incomparable for values that compare only by identity."""
    if isinstance(original, torch.Tensor) or isinstance(fixed, torch.Tensor):
        return _tensor_difference(original, fixed, where)
    if isinstance(original, (tuple, list)) and type(original) is type(fixed):
        if len(original) != len(fixed):
            raise Mismatch(f"{where}: {len(original)} items became {len(fixed)}")
        items = [
            relative_difference(a, b, f"{where}[{index}]")
            for index, (a, b) in enumerate(zip(original, fixed, strict=True))
        ]
        return max(items, default=0.0)
    if isinstance(original, Mapping) and isinstance(fixed, Mapping):
        if list(original) != list(fixed):
            raise Mismatch(f"{where}: keys {list(original)} became {list(fixed)}")
        return max((relative_difference(original[k], fixed[k], f"{where}[{k!r}]") for k in original), default=0.0)
    if isinstance(original, (int, float)) and type(original) is type(fixed) and not isinstance(original, bool):
        return _number_difference(float(original), float(fixed), where)
    if type(original) is not type(fixed):
        raise Mismatch(f"{where}: {type(original).__name__} became {type(fixed).__name__}")
    if type(original).__eq__ is object.__eq__ or callable(original):
        raise Incomparable(f"{where} is a {type(original).__name__}, which compares only by identity")
    try:
        equal = bool(original == fixed)
    except Exception as error:
        raise Incomparable(f"{where} is a {type(original).__name__}, which cannot be compared") from error
    if not equal:
        raise Mismatch(f"{where}: {original!r} became {fixed!r}")
    return 0.0


def _number_difference(original: float, fixed: float, where: str) -> float:
    if (math.isnan(original) and math.isnan(fixed)) or original == fixed:
        return 0.0
    if not (math.isfinite(original) and math.isfinite(fixed)):
        raise Mismatch(f"{where}: {original!r} became {fixed!r}")
    return abs(fixed - original) / max(abs(original), abs(fixed))


def _tensor_difference(original: Any, fixed: Any, where: str) -> float:
    if not (isinstance(original, torch.Tensor) and isinstance(fixed, torch.Tensor)):
        raise Mismatch(f"{where}: {type(original).__name__} became {type(fixed).__name__}")
    if original.dtype != fixed.dtype:
        raise Mismatch(f"{where}: dtype {original.dtype} became {fixed.dtype}")
    if original.shape != fixed.shape:
        raise Mismatch(f"{where}: shape {tuple(original.shape)} became {tuple(fixed.shape)}")
    if original.device.type == "meta" or fixed.device.type == "meta" or original.numel() == 0:
        return 0.0
    original, fixed = original.detach().cpu(), fixed.detach().cpu()
    # Most fixed results are the originals bit for bit (a fix is exact in fp32): no float64 copies for those.
    if torch.equal(original, fixed):
        return 0.0
    if not (original.is_floating_point() or original.is_complex()):
        raise Mismatch(f"{where}: integer values differ")
    wide = torch.complex128 if original.is_complex() else torch.float64
    original, fixed = original.to(wide), fixed.to(wide)
    finite = original.isfinite()
    # NaN stays NaN and an infinity the same infinity: anything else where the original is not finite is a change.
    same_special = (original.isnan() & fixed.isnan()) | (original == fixed)
    if not bool((finite | same_special).all()) or not bool(fixed[finite].isfinite().all()):
        raise Mismatch(f"{where}: non-finite values differ")
    if not bool(finite.any()):
        return 0.0
    scale = original[finite].abs().max().item()
    difference = (fixed[finite] - original[finite]).abs().max().item()
    if difference == 0.0:
        return 0.0
    return difference / scale if scale > 0 else math.inf


def in_float64(value: Any) -> Any:
    """The value with each floating tensor in it (in tuples, lists and dicts too) made float64: the inputs of a run
    that rounds only where the code itself asks for a lower precision."""
    if isinstance(value, torch.Tensor):
        return value.double() if value.is_floating_point() else value
    if isinstance(value, (tuple, list)):
        return type(value)(in_float64(item) for item in value)
    if isinstance(value, dict):
        return {key: in_float64(item) for key, item in value.items()}
    return value


def agreement(
    original: Any, fixed: Any, difference: float, run_in_float64: Callable[[], tuple[Any, Any]]
) -> str | None:
    """The words for the fp32 results' `difference` where it proves nothing changed ("fp32 max rel diff 0"), or None
    where it does not. A difference beyond TOLERANCE passes only as rounding removed: the two versions run in float64
    (`run_in_float64` gives what each returns with its floating inputs and parameters made float64; where it raises,
    nothing can be judged), where rounding is 2^29 times smaller, must agree within TOLERANCE, and the fixed fp32
    result must be no farther from that float64 result than the original's is, give or take TOLERANCE (two roundings
    of the same value differ by noise). A rewrite may remove rounding (`log1p` for `log(1 + x)`) and nothing else:
    in float64 only a change of what is computed still shows, and a rewrite that added rounding would be farther
    from it."""
    words = f"fp32 max rel diff {difference:.3g}"
    if difference <= TOLERANCE:
        return words
    try:
        original_in_float64, fixed_in_float64 = run_in_float64()
    except Exception:  # code that mixes its own float32 with float64 inputs: no reference to judge rounding by
        return None
    try:
        in_float64_difference = relative_difference(original_in_float64, fixed_in_float64)
        original_error = relative_difference(_rounded_like(original_in_float64, original), original)
        fixed_error = relative_difference(_rounded_like(original_in_float64, fixed), fixed)
    except (Mismatch, Incomparable):
        return None
    if in_float64_difference > TOLERANCE or fixed_error > original_error + TOLERANCE:
        return None
    return f"{words} (rounding: {in_float64_difference:.3g} in float64)"


def _rounded_like(reference: Any, result: Any) -> Any:
    """The float64 reference with each tensor in the dtype of the result's tensor in its place."""
    if isinstance(reference, torch.Tensor) and isinstance(result, torch.Tensor):
        return reference.to(result.dtype)
    if isinstance(reference, (tuple, list)) and isinstance(result, (tuple, list)) and len(reference) == len(result):
        return type(result)(_rounded_like(item, like) for item, like in zip(reference, result, strict=True))
    if isinstance(reference, Mapping) and isinstance(result, Mapping) and list(reference) == list(result):
        return {key: _rounded_like(reference[key], result[key]) for key in reference}
    return reference


def state_dict_difference(original: torch.nn.Module, fixed: torch.nn.Module) -> str | None:
    """How the fixed module's `state_dict` keys or shapes differ from the original's (what a checkpoint holds and
    loads), or None when they agree."""
    before = {key: tuple(value.shape) for key, value in original.state_dict().items()}
    after = {key: tuple(value.shape) for key, value in fixed.state_dict().items()}
    if before == after:
        return None
    lost, gained = sorted(before.keys() - after.keys()), sorted(after.keys() - before.keys())
    if lost or gained:
        return f"state_dict keys differ (lost {lost or 'none'}, gained {gained or 'none'})"
    key = next(key for key in before if before[key] != after[key])
    return f"state_dict {key!r} has shape {after[key]}, the original {before[key]}"


def placement_difference(build_original: Callable[[], nn.Module], build_fixed: Callable[[], nn.Module]) -> str | None:
    """Where, built under a default device (`with torch.device("meta")`, as training frameworks build models), the
    fixed module fails or keeps a parameter or buffer elsewhere than the original does (a tensor made on the CPU that
    the original made on the default device, and that nothing moves), said in a few words; None where it does not, or
    where the original cannot be built there (it reads values while it is built)."""
    try:
        with torch.device("meta"):
            original = build_original()
    except Exception:
        return None
    try:
        with torch.device("meta"):
            fixed = build_fixed()
    except Exception as error:
        return f"the fixed code fails to build under a default device: {describe(error)}"
    placed = {name: tensor.device for name, tensor in _held_tensors(original)}
    elsewhere = sorted(
        f"{name} ({tensor.device.type})"
        for name, tensor in _held_tensors(fixed)
        if name in placed and tensor.device != placed[name]
    )
    if elsewhere:
        return f"built under a default device, it keeps {', '.join(elsewhere)} off it, as the original does not"
    return None


def _held_tensors(module: nn.Module) -> list[tuple[str, torch.Tensor]]:
    return [*module.named_parameters(), *module.named_buffers()]
