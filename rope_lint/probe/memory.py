"""The memory budget: estimate what building a class and calling its forward take at the probe's full size, from
runs at small sizes, so that a class that would not fit is never run at full size.

Every tensor storage a torch op creates while the class is built and called is recorded, op by op (views and
in-place results create none, as their schemas declare). The estimate is conservative twice over:

- it is the sum of all those storages, as if none were ever freed, where the real peak counts only those alive at
  once;
- each op's size is extrapolated from two small sizes by its own growth: an op whose output grew 4x when the
  positions doubled grows as positions squared, and one whose output stayed the same is a constant.

Per-op growth needs the same ops at both sizes. Where a class takes another path at 128 positions than at 256 (an
attempt that fails at one size only, a feature map that is square at one size only), 512 is tried as well; where the
ops still differ, the total is extrapolated by its own growth between the two largest sizes, taken as at least
linear and at most quadratic (the pairwise positions of relative encodings, the fastest growth a rotary class has a
reason for).

Memory that torch does not allocate (numpy, Python objects) is not counted; the probe's process itself (Python and
torch, about 300 MB) is outside the budget.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from rope_lint.probe.sizes import format_size

# The sizes the estimate is made from, the third only where the first two take different paths: small enough to be
# cheap for any class, apart enough to tell a linear from a quadratic growth. At 64, some classes fail an attempt
# that they pass at 128 and above.
SMALL_POSITIONS = (128, 256, 512)
# Bounds of a total's growth when its ops differ between sizes (see the module's docstring).
TOTAL_GROWTH = (1.0, 2.0)

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
        fresh = _fresh_returns(func)
        if len(fresh) == 1 and isinstance(output, torch.Tensor):  # most ops: one tensor, read without a set
            storage = _storage(output) if fresh[0] else None
            size = storage[1] if storage else 0
        else:
            returned = (output,) if len(fresh) == 1 else output
            created = {
                _storage(value) for value, new in zip(returned, fresh, strict=False) if new for value in _leaves(value)
            }
            size = sum(nbytes for _, nbytes in created - {None})
        if size:
            name = _name(func)
            self.sizes[(name, self._calls[name])] = size
            self._calls[name] += 1
            self.total += size
            if self.total > self.limit:
                raise OverBudget(self.total)
        return output


@functools.cache
def _name(func: Any) -> str:
    return str(func)


@functools.cache
def _fresh_returns(func: Any) -> tuple[bool, ...]:
    """Which of an op's returns are new storage: those its schema declares no alias for. Views, in-place and `out=`
    results alias an input (`Tensor(a)`), and allocate nothing."""
    return tuple(result.alias_info is None for result in func._schema.returns)


def _leaves(value: object) -> list[object]:
    return [value] if isinstance(value, torch.Tensor) else tree_flatten(value)[0]


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


Allocations = dict[tuple[str, int], int]  # bytes by (op, how many times that op ran before)


@dataclass(frozen=True)
class Estimate:
    size: float  # bytes at the full number of positions
    measured: tuple[tuple[int, int], ...]  # (positions, summed allocations) of the runs it was made from

    def describe(self, positions: int) -> str:
        runs = " and ".join(f"{format_size(total)} at {size}" for size, total in self.measured)
        return f"would allocate about {format_size(self.size)} at {positions} positions (estimated from {runs})"


def same_ops(smaller: Allocations, larger: Allocations) -> bool:
    return smaller.keys() == larger.keys()


def extrapolate(smaller: tuple[int, Allocations], larger: tuple[int, Allocations], positions: int) -> Estimate:
    """The allocations at `positions`, from those of two runs at (positions, allocations) (see the module's
    docstring): every op grown at its own rate where the two ran the same ops, else their total at its rate."""
    (small_size, small), (large_size, large) = smaller, larger
    step, scale = math.log(large_size / small_size), positions / large_size
    if same_ops(small, large):
        size = sum(nbytes * scale ** max(0.0, math.log(nbytes / small[key]) / step) for key, nbytes in large.items())
    else:
        small_total, large_total = sum(small.values()), sum(large.values())
        growth = math.log(large_total / small_total) / step if small_total and large_total else TOTAL_GROWTH[1]
        size = large_total * scale ** min(max(growth, TOTAL_GROWTH[0]), TOTAL_GROWTH[1])
    return Estimate(size, ((small_size, sum(small.values())), (large_size, sum(large.values()))))
