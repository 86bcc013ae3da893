"""The memory budget: estimate what building a class and calling its forward take at the probe's full size, from
runs at small sizes, so that a class that would not fit is never run at full size.

Every tensor storage a torch op creates while the class is built and called is recorded, op by op (views and
in-place results create none). The estimate is conservative twice over:

- it is the sum of all those storages, as if none were ever freed, where the real peak counts only those alive at
  once;
- each op's size is extrapolated from two small sizes by its own growth: an op whose output grew 4x when the
  positions doubled grows as positions squared. An op seen only at the larger size is assumed to grow as fast as
  the fastest one, and at least quadratically.

Memory that torch does not allocate (numpy, Python objects) is not counted; the probe's process itself (Python and
torch, about 300 MB) is outside the budget.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from rope_lint.probe.sizes import format_size

# The two sizes the estimate is made from: small enough to be cheap for any class, apart enough to tell a linear
# from a quadratic growth.
SMALL_POSITIONS = (64, 128)
# An op seen only at the larger size grows at least like the pairwise (positions x positions) tensors of relative
# encodings, the fastest growth a rotary class has a reason for.
UNPAIRED_GROWTH = 2.0

Result = TypeVar("Result")


class OverBudget(BaseException):
    """The class allocated more than the budget while it was measured. A BaseException so that neither the builder's
    nor the model code's `except Exception` can swallow it."""


class _Allocations(TorchDispatchMode):
    """Records the bytes of each storage an op creates, keyed by (op, how many times that op ran before), and raises
    OverBudget once their sum passes `limit`."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.sizes: dict[tuple[str, int], int] = {}
        self.total = 0
        self._calls: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        output = func(*args, **(kwargs or {}))
        existing = {_storage(value) for value in tree_flatten((args, kwargs))[0]}
        created = {_storage(value) for value in tree_flatten(output)[0]} - existing - {None}
        size = sum(nbytes for _, nbytes in created)
        if size:
            name = str(func)
            self.sizes[(name, self._calls[name])] = size
            self._calls[name] += 1
            self.total += size
            if self.total > self.limit:
                raise OverBudget(self.total)
        return output


def _storage(value: object) -> tuple[int, int] | None:
    """(address, bytes) of a tensor's storage; None for anything else, or a tensor without one (sparse)."""
    if not isinstance(value, torch.Tensor):
        return None
    try:
        storage = value.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None
    return storage.data_ptr(), storage.nbytes()


def allocations(run: Callable[[], Result], limit: int) -> tuple[Result, dict[tuple[str, int], int]]:
    """Run `run()` recording what it allocates; OverBudget once the allocations add up past `limit`."""
    with _Allocations(limit) as mode:
        result = run()
    return result, mode.sizes


@dataclass(frozen=True)
class Estimate:
    size: float  # bytes at the full number of positions
    small_sizes: tuple[int, int]  # the summed allocations at SMALL_POSITIONS

    def describe(self, positions: int) -> str:
        (small, larger), (small_total, larger_total) = SMALL_POSITIONS, self.small_sizes
        return (
            f"would allocate about {format_size(self.size)} at {positions} positions (estimated from "
            f"{format_size(small_total)} at {small} and {format_size(larger_total)} at {larger})"
        )


def extrapolate(small: dict[tuple[str, int], int], larger: dict[tuple[str, int], int], positions: int) -> Estimate:
    """The sum of every op's allocation at `positions`, each grown at its own rate (see the module's docstring)."""
    small_positions, larger_positions = SMALL_POSITIONS
    step = math.log(larger_positions / small_positions)
    growths = {key: max(0.0, math.log(size / small[key]) / step) for key, size in larger.items() if small.get(key)}
    fastest = max([UNPAIRED_GROWTH, *growths.values()])
    scale = positions / larger_positions
    size = sum(nbytes * scale ** growths.get(key, fastest) for key, nbytes in larger.items())
    return Estimate(size, (sum(small.values()), sum(larger.values())))
