"""A rotary class, original and fixed, built the way the probe builds it and compared.

The probe works out how to build the original class and call its forward, within its default memory budget
(`probe.runner.recipes_within_budget`); the fixed class is built and called the same way. In fp32 their forward
outputs for positions 0..N-1 must agree to within `compare.TOLERANCE` (relative), or differ only by rounding
(`compare.agreement`: both classes built and run in float64 agree), with the same structure, dtypes and shapes, and
their `state_dict`s must have the same keys and shapes. Built under a default device (`with torch.device("meta")`, as
training frameworks build models), every parameter and buffer the fixed class keeps must be where the original's is;
not for a class of a transformers modular source, which runs only through the file generated from it (and verified on
its own): imported as it is, its class takes the constructor of a parent in another file, which the rewrite of the
generated class changes too, but the modular file does not hold. Then the fixed class runs under each of the probe's
conditions: it must build wherever the original builds, and its tables must stay within the probe's threshold of the
float64 reference wherever the original's do.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import torch
from torch import nn

from rope_lint.output.fix_report import FAILED, NOT_BUILT, VERIFIED
from rope_lint.probe.build import TABLES, CannotBuild, Recipe, Tables, call_forward, construct, describe
from rope_lint.probe.reference import reference_for
from rope_lint.probe.report import Yardstick
from rope_lint.probe.runner import recipes_within_budget, tables_under
from rope_lint.probe.sizes import DEFAULT_BUDGET
from rope_lint.probe.triggers import TRIGGERS, Trigger
from rope_lint.verify.compare import (
    TOLERANCE,
    Incomparable,
    Mismatch,
    agreement,
    placement_difference,
    relative_difference,
    state_dict_difference,
)

POSITIONS = 4096
THRESHOLD = 4e-3  # the probe's default: about one bf16 rounding of values up to 1
# fp32 is the side-by-side comparison itself. The real zero.Init needs DeepSpeed and a distributed init; its
# stand-in patches the same tensor constructors in the same way.
CONDITIONS: tuple[Trigger, ...] = tuple(
    trigger for name, trigger in TRIGGERS.items() if name not in ("fp32", "deepspeed-zero-init")
)


@dataclasses.dataclass(frozen=True)
class ClassCheck:
    """What checking one class found: a status of `output.fix_report` and the detail to print."""

    status: str
    detail: str


def check_class(original_cls: type[nn.Module], fixed_cls: type[nn.Module], placement: bool = True) -> ClassCheck:
    """Build both classes as the probe builds the original, and compare them (see the module's docstring); `placement`:
    whether to compare where they keep their tensors under a default device."""
    try:
        recipes = recipes_within_budget(original_cls, POSITIONS, DEFAULT_BUDGET)
    except Exception as error:  # CannotBuild, or anything the class raised while it was inspected
        return ClassCheck(NOT_BUILT, describe(error))
    built = [entry for entry in recipes if not isinstance(entry, CannotBuild)]
    agreements, clean, notes = [], 0, []
    for recipe, tables in built:
        variant = f"{recipe.variant}: " if recipe.variant else ""
        try:
            agreed = _compare_fp32(recipe, dataclasses.replace(recipe, cls=fixed_cls))
            if placement:
                _compare_placement(recipe, dataclasses.replace(recipe, cls=fixed_cls))
            conditions_clean, note = _check_conditions(recipe, tables, dataclasses.replace(recipe, cls=fixed_cls))
        except _Failure as failure:
            return ClassCheck(FAILED, f"{variant}{failure}")
        except Incomparable as incomparable:
            return ClassCheck(NOT_BUILT, f"{variant}built, but its {incomparable}")
        agreements.append(agreed)
        clean += conditions_clean
        notes += [f"{variant}{note}"] if note else []
    not_built = [str(entry) for entry in recipes if isinstance(entry, CannotBuild)]
    detail = f"{max(agreements)[1]}, {clean} conditions clean"  # the largest difference's words
    if len(built) > 1:
        detail += f" over {len(built)} variants"
    extras = notes + [f"not built: {reason}" for reason in not_built]
    return ClassCheck(VERIFIED, "; ".join([detail, *extras]))


class _Failure(Exception):
    """The fixed class differs from the original or fails where it works; the message says how."""


def _forward_output(recipe: Recipe, dtype: torch.dtype = torch.float32) -> tuple[nn.Module, Any]:
    """The class built and called as the recipe says, in `dtype` (float64: its parameters and buffers made float64,
    and its input), and what its forward returned, as it returned it."""
    torch.manual_seed(0)  # a class with random parameters draws the same ones both times
    module = construct(recipe).to(dtype)
    returned: list[Any] = []
    hook = module.register_forward_hook(lambda _module, _inputs, output: returned.append(output))
    try:
        call_forward(module, recipe, dtype)
    finally:
        hook.remove()
    return module, returned[-1]


def _compare_fp32(original: Recipe, fixed: Recipe) -> tuple[float, str]:
    """The fp32 relative difference of the forward outputs and its words (`compare.agreement`); raises _Failure when
    they or the state_dicts differ."""
    original_module, original_output = _forward_output(original)
    try:
        fixed_module, fixed_output = _forward_output(fixed)
    except Exception as error:
        raise _Failure(f"the fixed class fails in fp32 where the original works: {describe(error)}") from error
    try:
        difference = relative_difference(original_output, fixed_output, "forward output")
    except Mismatch as mismatch:
        raise _Failure(f"fp32 {mismatch}") from mismatch
    agreed = agreement(original_output, fixed_output, difference, functools.partial(_in_float64, original, fixed))
    if agreed is None:
        raise _Failure(f"fp32 forward outputs differ by {difference:.3g} relative (at most {TOLERANCE:g} allowed)")
    state_dicts = state_dict_difference(original_module, fixed_module)
    if state_dicts is not None:
        raise _Failure(state_dicts)
    return difference, agreed


def _in_float64(original: Recipe, fixed: Recipe) -> tuple[Any, Any]:
    """What each class returns built and called in float64 (`compare.agreement`)."""
    return _forward_output(original, torch.float64)[1], _forward_output(fixed, torch.float64)[1]


def _compare_placement(original: Recipe, fixed: Recipe) -> None:
    """Raises _Failure where, built under a default device, the fixed class fails or keeps a tensor elsewhere than the
    original (`compare.placement_difference`)."""
    difference = placement_difference(lambda: construct(original), lambda: construct(fixed))
    if difference is not None:
        raise _Failure(difference)


def _check_conditions(original: Recipe, fp32_tables: Tables, fixed: Recipe) -> tuple[int, str | None]:
    """Run the fixed class under each condition: the number where its tables are clean, and a note of those where it
    is no better than the original, and of those where it returns other dtypes than the original. Raises _Failure
    where it fails or exceeds the threshold and the original does not, or, for a class that rotates its input, where
    it returns the rotated activations in other dtypes than the original does (float32 tables that no longer follow
    the module's dtype would turn a bf16 model's activations float32, and its next matmul fails). A class that
    returns tables passes with a note: attention code that takes float32 tables runs on (GPT-NeoX's), a layer that
    takes them as its input fails (a bf16 `nn.Linear` after a sinusoidal embedding), and which one its caller is,
    the class does not say."""
    try:
        reference: Tables | None = reference_for(original, fp32_tables).tables
        unmeasured = None
    except ValueError as error:  # the tables cannot be judged, but the fixed class must still build where it did
        reference, unmeasured = None, f"tables not measured, no float64 reference: {error}"
    clean, as_before, other_dtypes = 0, [], []
    # A class that returns the activations it rotated hands them to the model's next layer, which takes them in the
    # original's dtype (a bf16 matmul fails on float32); tables are the attention code's to combine.
    rotates = original.forward_call.reading != TABLES
    for condition in CONDITIONS:
        fixed_outcome, fixed_dtypes = _outcome(condition, fixed, reference)
        if fixed_outcome in (CLEAN, BUILT):
            clean += fixed_outcome == CLEAN
            if any(dtype != condition.activation_dtype for dtype in fixed_dtypes):
                _, original_dtypes = _outcome(condition, original, reference)
                if original_dtypes is not None and original_dtypes != fixed_dtypes:
                    returned = ", ".join(_dtype_name(dtype) for dtype in fixed_dtypes)
                    expected = ", ".join(_dtype_name(dtype) for dtype in original_dtypes)
                    if rotates:
                        raise _Failure(
                            f"under {condition.name} the fixed class returns {returned}; the original {expected}"
                        )
                    other_dtypes.append(f"under {condition.name} it returns {returned}, the original {expected}")
            continue
        original_outcome, _ = _outcome(condition, original, reference)
        fails = fixed_outcome.startswith(FAILS) and not original_outcome.startswith(FAILS)
        if fails or original_outcome in (CLEAN, BUILT):
            raise _Failure(f"under {condition.name} the fixed class {fixed_outcome}; the original does not")
        as_before.append(f"{condition.name}: {fixed_outcome}, as the original")
    if other_dtypes:
        other_dtypes[-1] += ": a caller that hands what it returns to a layer in the original's dtype fails"
    return clean, "; ".join([*as_before, *other_dtypes, *([unmeasured] if unmeasured else [])]) or None


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# What a condition did to a class's tables; a failure or an excess comes with its detail after the word.
CLEAN, BUILT, FAILS, EXCEEDS = "clean", "built", "fails", "exceeds"


def _outcome(
    condition: Trigger, recipe: Recipe, reference: Tables | None
) -> tuple[str, tuple[torch.dtype, ...] | None]:
    """CLEAN; BUILT when there is no reference to measure against; or what went wrong under the condition. With the
    dtypes of the tensors the forward returned (None where it failed)."""
    try:
        tables = tables_under(condition, recipe)
    except Exception as error:
        return f"{FAILS}: {describe(error)}", None
    if reference is None:
        return BUILT, tables.returned
    if tables.cos.shape != reference.cos.shape:
        shapes = f"tables of shape {tuple(tables.cos.shape)}, expected {tuple(reference.cos.shape)}"
        return f"{FAILS}: {shapes}", tables.returned
    measurement = Yardstick(reference, THRESHOLD).measure(tables)
    if measurement.first_wrong_position is None:
        return CLEAN, tables.returned
    error = max(measurement.cos_max_abs_error, measurement.sin_max_abs_error)
    exceeds = f"{EXCEEDS} {THRESHOLD:g} (max error {error:.3g} from position {measurement.first_wrong_position})"
    return exceeds, tables.returned
