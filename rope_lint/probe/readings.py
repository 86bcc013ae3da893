"""Read cos/sin tables from what a rotary module's forward returns.

Two kinds of module:

- those that return tables: (cos, sin), a stacked or concatenated [cos; sin], a complex cis, a table of angles, or
  a table of sinusoid values (sin/cos interleaved or side by side, as absolute and relative encodings return);
- those that take q or k and return them rotated. They are fed a known input, a unit vector (cos part 1, sin part 0)
  in every rotary pair, so that each output pair is (cos, sin) of that pair's angle at that position.

Which kind a module is shows in its output: it changes with the input's values only when the module applies the
rotation (`Reading`, chosen once under plain float32). A rotated input is never read as a table, and a module that
returns its input unchanged, or zeros, is refused rather than read as the angle 0.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

# How a forward's output is read (see the module's docstring).
TABLES = "tables"
ROTATED_HALVES = "rotated, rotate_half layout"  # pair i is (x[i], x[i + D/2])
ROTATED_PAIRS = "rotated, interleaved layout"  # pair i is (x[2i], x[2i + 1])
# A rotation keeps each pair's length; an output whose pairs' lengths spread wider than this is not one.
_ROTATION_TOLERANCE = 1e-3


class CannotBuild(Exception):
    """The class could not be constructed or its tables read; the message is the reason reported."""


@dataclasses.dataclass(frozen=True)
class Tables:
    """cos and sin for positions 0..N-1, as float64 on CPU, shape [N, D]; and the dtypes of the tensors the forward
    returned them in, in order (`returned_dtypes`), where they were read from a forward."""

    cos: torch.Tensor
    sin: torch.Tensor
    returned: tuple[torch.dtype, ...] = ()


def returned_dtypes(output: Any) -> tuple[torch.dtype, ...]:
    """The dtypes of the tensors a forward returned, in order: the output itself, or the items of a tuple, list or
    dict, one level down (a model's next layer takes them in these dtypes)."""
    items = output.values() if isinstance(output, dict) else output if isinstance(output, (tuple, list)) else [output]
    return tuple(item.dtype for item in items if isinstance(item, torch.Tensor))


def unit_pairs(shape: tuple[int, ...], layout: str, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The probe input of a module that rotates its input: cos part 1 and sin part 0 in every rotary pair."""
    pattern = torch.zeros(shape, dtype=dtype, device=device)
    width = shape[-1]
    if layout == ROTATED_PAIRS:
        pattern[..., 0::2] = 1
    else:
        pattern[..., : width // 2] = 1
    return pattern


def largest_magnitude(table: torch.Tensor) -> float:
    """max |value| of a non-empty table (NaN where it holds one), without the copy that `abs()` would make."""
    return torch.maximum(table.max(), table.min().neg()).item()


def _pairs(rows: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos parts, sin parts) of [N, D] rows, [N, D/2] each."""
    if layout == ROTATED_PAIRS:
        return rows[:, 0::2], rows[:, 1::2]
    half = rows.shape[1] // 2
    return rows[:, :half], rows[:, half : 2 * half]


def is_rotation(output: torch.Tensor, layout: str, positions: int) -> bool:
    """Whether the output of `unit_pairs(layout)` has pairs of one common, non-zero length (any scale the class
    applies, such as YaRN's attention factor, is common to all pairs)."""
    # In the output's own floating precision: the tolerance is far above float32's rounding, and a float64 copy of an
    # activation-shaped output is the largest allocation of a probe's run.
    dtype = output.dtype if output.is_floating_point() else torch.float64
    cos_part, sin_part = _pairs(_on_rows(output, positions, dtype), layout)
    lengths = torch.hypot(cos_part, sin_part)
    longest = lengths.max().item()
    return longest > 0 and (lengths.max() - lengths.min()).item() <= _ROTATION_TOLERANCE * longest


def first_tensor(output: Any) -> torch.Tensor | None:
    """The output itself, or the first of a tuple of tensors (cos of (cos, sin), q of (q, k))."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    return None


def depends_on_input(first: Any, second: Any) -> bool:
    """Whether two outputs, for two different inputs of the same shape, differ: the module rotated its input."""
    one, other = first_tensor(first), first_tensor(second)
    if one is None or other is None or one.shape != other.shape:
        return False
    return not torch.equal(one, other)


def rotated_tables(output: Any, given: torch.Tensor, layout: str, positions: int) -> Tables:
    """The tables of a module that rotated `given` (= unit_pairs(layout)): the angle of each pair at each position
    is atan2(sin part, cos part), and its cos and sin, in the layout of the class, are the tables."""
    rotated = first_tensor(output)
    if rotated is None or rotated.shape != given.shape:
        shape = None if rotated is None else tuple(rotated.shape)
        raise CannotBuild(f"forward returned {shape or type(output).__name__}, not its input rotated")
    rotated = rotated.detach()
    if not rotated.any():
        raise CannotBuild("forward returned zeros for a non-zero input")
    if torch.equal(rotated, given.to(rotated.dtype)):
        raise CannotBuild("forward returns the input unrotated")
    cos_part, sin_part = _pairs(_on_rows(rotated, positions), layout)
    angles = torch.atan2(sin_part, cos_part)
    angles = angles.repeat_interleave(2, dim=1) if layout == ROTATED_PAIRS else torch.cat((angles, angles), dim=1)
    return Tables(angles.cos(), angles.sin())


def _row_axis(table: torch.Tensor, positions: int) -> int:
    """The axis of the positions: the first of length N, else the first of length 2N-1 (a relative encoding's
    offsets N-1..-(N-1), whose rows are all measured). Never the last axis of a table of several: that is the
    frequencies', whatever its length."""
    axes = table.shape[:-1] if table.dim() > 1 else table.shape
    for length in (positions, 2 * positions - 1):
        axis = next((index for index, size in enumerate(axes) if size == length), None)
        if axis is not None:
            return axis
    raise CannotBuild(f"forward returned shape {tuple(table.shape)}, with no axis of {positions} positions")


def _on_rows(table: torch.Tensor, positions: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """[..., N, ...] -> [N, D] on CPU in `dtype`, float64 unless asked (2N-1 rows for relative offsets)."""
    table = table.detach()
    if table.is_complex():
        raise CannotBuild("complex table where a real one was expected")
    axis = _row_axis(table, positions)
    rows = table.shape[axis]
    if table.numel() == rows:
        # One value per position (an element-wise product that happened to broadcast), not positions x frequencies.
        raise CannotBuild(f"forward returned shape {tuple(table.shape)}, one value per position")
    # One copy at most, converted as it is laid out in rows: reshaping a moved axis first would copy twice.
    moved = table.movedim(axis, 0).to(device="cpu", dtype=dtype, memory_format=torch.contiguous_format)
    return moved.reshape(rows, -1)


def _single_table(output: torch.Tensor, positions: int) -> Tables:
    """One real tensor: [cos; sin] halves along an axis of 2N, sinusoid values, or angles."""
    doubled = next((index for index, size in enumerate(output.shape) if size == 2 * positions), None)
    if doubled is not None and (positions not in output.shape or output.shape.index(positions) > doubled):
        cos, sin = output.movedim(doubled, 0).chunk(2)
        return Tables(_on_rows(cos, positions), _on_rows(sin, positions))
    rows = _on_rows(output, positions)
    if not rows.any():
        raise CannotBuild("forward returned an all-zero table")
    if largest_magnitude(rows) <= 1.0:
        # Sinusoid values: no angle of N > 1 positions stays within [-1, 1]; the values are compared as they are,
        # with a sin table of zeros that is one broadcast 0 rather than a copy of their size.
        return Tables(rows, torch.zeros((), dtype=rows.dtype).expand_as(rows))
    # Angles: their cos/sin in float64 show the angle error.
    return Tables(rows.cos(), rows.sin())


def tables_from_output(output: Any, positions: int) -> Tables:
    """Normalise what a forward that returns tables gave: (cos, sin), stacked [2, ...] or concatenated [cos; sin],
    complex cis, sinusoid values or angles."""
    if (
        isinstance(output, (tuple, list))
        and len(output) >= 2
        and all(isinstance(item, torch.Tensor) for item in output[:2])
    ):
        return Tables(_on_rows(output[0], positions), _on_rows(output[1], positions))
    if not isinstance(output, torch.Tensor):
        raise CannotBuild(f"forward returned {type(output).__name__}, not cos/sin tensors")
    output = output.detach()
    if output.is_complex():  # cos + i sin
        return Tables(_on_rows(output.real, positions), _on_rows(output.imag, positions))
    if output.shape[0] == 2 and positions != 2:  # torch.stack([cos, sin])
        return Tables(_on_rows(output[0], positions), _on_rows(output[1], positions))
    return _single_table(output, positions)
