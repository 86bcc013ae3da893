"""The float64 reference: the class's own math run in float64 on CPU, or a textbook RoPE where it cannot run.

The float64 build trusts the class's formula. Wherever the class's hyperparameters can be read (dim, base, the
scaling type and its factors), a textbook RoPE computed from them, independently of the class, is compared with it
too: a disagreement means that the class's formula is not the textbook's, which its maintainers want to know.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from rope_lint.probe.build import FEATURE_MAP, Recipe, Tables, call_forward, construct, describe
from rope_lint.probe.build import _attribute as config_attribute
from rope_lint.probe.triggers import default_dtype

_WIDER = {
    torch.float16: torch.float64,
    torch.bfloat16: torch.float64,
    torch.float32: torch.float64,
    torch.complex32: torch.complex128,
    torch.complex64: torch.complex128,
}
# `.float()` and its kin name a precision outright; in the reference they mean "float64".
_NARROWING_METHODS = frozenset({torch.Tensor.float, torch.Tensor.half, torch.Tensor.bfloat16})


def _widen(value: Any) -> Any:
    return _WIDER.get(value, value) if isinstance(value, torch.dtype) else value


class _Float64Everywhere(TorchFunctionMode):
    """Every floating dtype that a torch call asks for becomes float64 (complex: complex128).

    With the default dtype also float64, literals and int/int division are float64 too, so a class written
    `torch.arange(n, dtype=torch.float32)` or `.float()` computes its tables in float64 from exact positions.
    """

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        if func in _NARROWING_METHODS:
            return args[0].double()
        if "dtype" in kwargs:
            kwargs["dtype"] = _widen(kwargs["dtype"])
        if func is not torch.Tensor.view:  # view(dtype) reinterprets bits; widening it would change its meaning
            args = tuple(_widen(arg) for arg in args)
        return func(*args, **kwargs)


@contextlib.contextmanager
def float64_math() -> Iterator[None]:
    """Run torch code in float64: default dtype float64, and explicit floating dtypes widened to float64."""
    with default_dtype(torch.float64), _Float64Everywhere():
        yield


@dataclass(frozen=True)
class Reference:
    """Float64 tables to compare against, what produced them, and why the class's own math was not used."""

    tables: Tables
    kind: str  # "float64 build" or "textbook"
    note: str | None = None
    # How the float64 build compares with a textbook RoPE of the class's own hyperparameters: "agrees",
    # "differs (max abs ...)" or "not readable (why)"; None when the textbook is the reference itself.
    textbook: str | None = None


def textbook_tables(
    dim: int, base: float, positions: int, linear_scaling: float = 1.0, scaling: Mapping[str, Any] | None = None
) -> Tables:
    """RoPE from its definition in float64, laid out as two halves: angle(p, i) = p / scaling * base^(-2i/dim), with
    the frequencies and the magnitude of a scaled RoPE where `scaling` (a config's `rope_scaling`, with
    `max_position_embeddings` added) names one (see `_scaled_frequencies`)."""
    inverse_frequencies = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    magnitude = 1.0
    if scaling:
        inverse_frequencies, magnitude = _scaled_frequencies(inverse_frequencies, dim, base, positions, scaling)
    angles = torch.outer(torch.arange(positions, dtype=torch.float64) / linear_scaling, inverse_frequencies)
    angles = torch.cat((angles, angles), dim=-1)
    return Tables(angles.cos() * magnitude, angles.sin() * magnitude)


def _scaled_frequencies(
    inverse_frequencies: torch.Tensor, dim: int, base: float, positions: int, scaling: Mapping[str, Any]
) -> tuple[torch.Tensor, float]:
    """The frequencies and the table's magnitude of the scaled RoPEs, from their papers, at `positions` positions:
    linear (positions divided by the factor), dynamic NTK (a larger base past the trained length), YaRN (a ramp
    between interpolated and extrapolated frequencies, and 0.1 ln(factor) + 1 as magnitude), Llama 3 (long
    wavelengths divided by the factor, a smooth band between) and LongRoPE (a factor per frequency)."""
    kind = scaling.get("rope_type") or scaling.get("type") or "default"
    factor = float(scaling.get("factor") or 1.0)
    trained = int(scaling.get("original_max_position_embeddings") or scaling["max_position_embeddings"])
    if kind == "linear":
        return inverse_frequencies / factor, 1.0
    if kind == "dynamic":
        if positions <= trained:
            return inverse_frequencies, 1.0
        base = base * ((factor * positions / trained) - (factor - 1)) ** (dim / (dim - 2))
        return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)), 1.0
    if kind == "yarn":
        return _yarn(inverse_frequencies, dim, base, factor, trained, scaling)
    if kind == "llama3":
        return _llama3(inverse_frequencies, factor, trained, scaling), 1.0
    if kind == "longrope":
        long = positions > trained
        per_frequency = torch.tensor(scaling["long_factor" if long else "short_factor"], dtype=torch.float64)
        ratio = scaling["max_position_embeddings"] / trained
        magnitude = scaling.get("attention_factor") or (
            math.sqrt(1 + math.log(ratio) / math.log(trained)) if ratio > 1 else 1.0
        )
        return inverse_frequencies / per_frequency, float(magnitude)
    if kind == "default":
        return inverse_frequencies, 1.0
    raise ValueError(f"no textbook for the scaling type {kind!r}")


def _yarn(
    inverse_frequencies: torch.Tensor, dim: int, base: float, factor: float, trained: int, scaling: Mapping[str, Any]
) -> tuple[torch.Tensor, float]:
    def pair_of_wavelength(rotations: float) -> float:
        # The pair index whose frequency makes `rotations` turns over the trained length.
        return dim * math.log(trained / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = (
        pair_of_wavelength(float(scaling.get("beta_fast") or 32)),
        pair_of_wavelength(float(scaling.get("beta_slow") or 1)),
    )
    if scaling.get("truncate", True):  # the paper rounds the band to whole pairs
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / max(high - low, 1e-3)).clamp(0, 1)
    frequencies = inverse_frequencies / factor * ramp + inverse_frequencies * (1 - ramp)

    def magnitude_of(scale: float) -> float:
        return 0.1 * scale * math.log(factor) + 1 if factor > 1 else 1.0

    # DeepSeek's variant divides the magnitude at `mscale` by the one at `mscale_all_dim`.
    mscale, mscale_all_dim = scaling.get("mscale"), scaling.get("mscale_all_dim")
    ratio = magnitude_of(mscale) / magnitude_of(mscale_all_dim) if mscale and mscale_all_dim else magnitude_of(1)
    return frequencies, float(scaling.get("attention_factor") or ratio)


def _llama3(inverse_frequencies: torch.Tensor, factor: float, trained: int, scaling: Mapping[str, Any]) -> torch.Tensor:
    low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    wavelengths = 2 * math.pi / inverse_frequencies
    smooth = ((trained / wavelengths) - low) / (high - low)
    smoothed = (1 - smooth) * inverse_frequencies / factor + smooth * inverse_frequencies
    scaled = torch.where(wavelengths > trained / low, inverse_frequencies / factor, inverse_frequencies)
    medium = (wavelengths <= trained / low) & (wavelengths >= trained / high)
    return torch.where(medium, smoothed, scaled)


def _interleaved(tables: Tables) -> Tables:
    """The same textbook table laid out pairwise ([a0, a0, a1, a1, ...]) as GPT-J-style classes do."""

    def interleave(table: torch.Tensor) -> torch.Tensor:
        return table[:, : table.shape[1] // 2].repeat_interleave(2, dim=1)

    return Tables(interleave(tables.cos), interleave(tables.sin))


def _one_half(tables: Tables) -> Tables:
    """One angle per pair ([a0, a1, ...]), as classes that return a complex table or the halves unrepeated do."""
    half = tables.cos.shape[1] // 2
    return Tables(tables.cos[:, :half], tables.sin[:, :half])


def _distance(tables: Tables, other: Tables) -> float:
    pairs = ((tables.cos, other.cos), (tables.sin, other.sin))
    return max(torch.sub(mine, theirs).abs_().max().item() for mine, theirs in pairs)


# The float64 build and the textbook are both exact to about 1e-12; a formula that differs moves the tables by far
# more than this.
AGREEMENT = 1e-6


def _class_scaling(recipe: Recipe) -> dict[str, Any] | None:
    """The scaling of a config-style class as one dict (`rope_scaling` and `rope_parameters` merged, the layer
    type's own parameters for a per-layer-type class), with the lengths it is relative to; None for old-style
    classes, whose only scaling the recipe reads is linear."""
    config = recipe.config
    if config is None:
        return None
    parameters = config_attribute(config, "rope_parameters") or {}
    layer_type = (recipe.variant or "").removeprefix("layer_type=")
    if isinstance(parameters, dict) and isinstance(parameters.get(layer_type), dict):
        parameters = parameters[layer_type]
    scaling = config_attribute(config, "rope_scaling") or {}
    if not (isinstance(parameters, dict) and isinstance(scaling, dict)):
        raise ValueError("its rope_parameters or rope_scaling is not a dict")
    merged = {**parameters, **scaling}
    for length in ("max_position_embeddings", "original_max_position_embeddings"):
        merged.setdefault(length, config_attribute(config, length))
    return merged


def _textbook_like(recipe: Recipe, like: Tables) -> tuple[Tables, float]:
    """The textbook table of the class's hyperparameters in the layout of `like` (the class's own tables) that is
    closest to them, and its distance from them; ValueError when its hyperparameters cannot be read or no layout has
    their shape."""
    if recipe.forward_call.x_kind == FEATURE_MAP:
        raise ValueError("a table over a 2-D grid, and the textbook RoPE is over one axis")
    scaling = _class_scaling(recipe)
    base = (scaling or {}).get("rope_theta") or recipe.base  # a layer type's own base first
    if recipe.dim is None or base is None:
        raise ValueError("its dim and base are unknown")
    dim = recipe.dim
    if scaling and config_attribute(recipe.config, "partial_rotary_factor") is None:
        # Where the rope parameters, not the config, say which share of the head rotates.
        dim = int(dim * float(scaling.get("partial_rotary_factor") or 1.0))
    try:
        textbook = textbook_tables(dim, float(base), recipe.positions, recipe.linear_scaling, scaling)
    except KeyError as error:
        raise ValueError(f"its scaling lacks {error}") from error
    except (TypeError, ArithmeticError) as error:  # a factor of the wrong type, a zero length
        raise ValueError(f"its scaling cannot be read: {describe(error)}") from error
    layouts = [
        (layout, _distance(layout, like))
        for layout in (textbook, _interleaved(textbook), _one_half(textbook))
        if layout.cos.shape == like.cos.shape
    ]
    if not layouts:
        raise ValueError(f"its tables are {tuple(like.cos.shape)}, a textbook RoPE {tuple(textbook.cos.shape)}")
    return min(layouts, key=lambda layout_and_distance: layout_and_distance[1])


def textbook_verdict(recipe: Recipe, tables: Tables) -> str:
    """How the class's float64 tables compare with a textbook RoPE of its own hyperparameters."""
    try:
        _, distance = _textbook_like(recipe, tables)
    except ValueError as error:
        return f"not readable ({error})"
    return "agrees" if distance <= AGREEMENT else f"differs (max abs {distance:.3g})"


def reference_for(recipe: Recipe, fp32_tables: Tables) -> Reference:
    """The class's own math in float64, compared with a textbook RoPE; a textbook RoPE when the class's own math
    fails. Raises ValueError when neither works."""
    try:
        with float64_math():
            module = construct(recipe).double()
            tables = call_forward(module, recipe, torch.float64)
        # A finite sum has only finite elements; only a sum that is not (a NaN, or an overflow) needs every element.
        finite = all(math.isfinite(t.sum().item()) or bool(t.isfinite().all()) for t in (tables.cos, tables.sin))
        if tables.cos.shape != fp32_tables.cos.shape or not finite:
            raise ValueError("the float64 build gave tables of another shape or non-finite values")
    except Exception as error:
        own_math_failure = describe(error)
    else:
        return Reference(tables, "float64 build", textbook=textbook_verdict(recipe, tables))
    try:
        textbook, _ = _textbook_like(recipe, fp32_tables)
        return Reference(textbook, "textbook", f"float64 build failed: {own_math_failure}")
    except ValueError as error:
        raise ValueError(f"float64 build failed ({own_math_failure}); no textbook RoPE: {error}") from error
