"""The float64 reference: the class's own math run in float64 on CPU, or a textbook RoPE where it cannot run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from rope_lint.probe.build import Recipe, Tables, call_forward, construct, describe
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


def textbook_tables(dim: int, base: float, positions: int, linear_scaling: float = 1.0) -> Tables:
    """RoPE from its definition in float64: angle(p, i) = p / scaling * base^(-2i/dim), laid out as two halves."""
    exponents = torch.arange(0, dim, 2, dtype=torch.float64) / dim
    inverse_frequencies = 1.0 / (base**exponents)
    angles = torch.outer(torch.arange(positions, dtype=torch.float64) / linear_scaling, inverse_frequencies)
    angles = torch.cat((angles, angles), dim=-1)
    return Tables(angles.cos(), angles.sin())


def _interleaved(tables: Tables) -> Tables:
    """The same textbook table laid out pairwise ([a0, a0, a1, a1, ...]) as GPT-J-style classes do."""

    def interleave(table: torch.Tensor) -> torch.Tensor:
        return table[:, : table.shape[1] // 2].repeat_interleave(2, dim=1)

    return Tables(interleave(tables.cos), interleave(tables.sin))


def _distance(tables: Tables, other: Tables) -> float:
    return max((tables.cos - other.cos).abs().max().item(), (tables.sin - other.sin).abs().max().item())


def _textbook_like(recipe: Recipe, fp32_tables: Tables) -> Tables:
    """The textbook table in the layout the class's fp32 output is closest to, or ValueError if none fits."""
    if recipe.dim is None or recipe.base is None:
        raise ValueError("its dim and base are unknown")
    textbook = textbook_tables(recipe.dim, float(recipe.base), recipe.positions, recipe.linear_scaling)
    if textbook.cos.shape != fp32_tables.cos.shape:
        raise ValueError(f"its tables are {tuple(fp32_tables.cos.shape)}, a textbook RoPE {tuple(textbook.cos.shape)}")
    return min((textbook, _interleaved(textbook)), key=lambda layout: _distance(layout, fp32_tables))


def reference_for(recipe: Recipe, fp32_tables: Tables) -> Reference:
    """The class's own math in float64; a textbook RoPE when that fails. Raises ValueError when neither works."""
    try:
        with float64_math():
            module = construct(recipe).double()
            tables = call_forward(module, recipe, torch.float64)
        finite = bool(tables.cos.isfinite().all() and tables.sin.isfinite().all())
        if tables.cos.shape != fp32_tables.cos.shape or not finite:
            raise ValueError("the float64 build gave tables of another shape or non-finite values")
        return Reference(tables, "float64 build")
    except Exception as error:
        own_math_failure = describe(error)
    try:
        return Reference(_textbook_like(recipe, fp32_tables), "textbook", f"float64 build failed: {own_math_failure}")
    except ValueError as error:
        raise ValueError(f"float64 build failed ({own_math_failure}); no textbook RoPE: {error}") from error
