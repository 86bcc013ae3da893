"""What RPL204 and its codemod agree on: which calls are RoPE frequency products, which operands are upcast, and
what turns autocast off.

The rule reads these facts from `ast` (`rules/rope_autocast.py`), the codemod from LibCST
(`codemods/rope_autocast.py`); both resolve names through the file's imports, so that `import torch as t` makes
`t.matmul` a product for both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rope_lint import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")

# The matrix products that autocast runs in its low-precision dtype, besides `@`.
PRODUCT_FUNCTIONS = frozenset({"torch.matmul", "torch.outer", "torch.ger", "torch.einsum", "torch.bmm", "torch.mm"})
# Its first argument is the equation, not an operand.
_EQUATION_FIRST = "torch.einsum"
# `t.float()`, `t.double()`: an operand upcast whatever autocast does.
UPCAST_METHODS = frozenset({"float", "double"})
# The dtypes a `t.to(...)` upcasts to.
UPCAST_DTYPES = frozenset({"torch.float", "torch.float32", "torch.float64"})


def is_product_function(qualified_name: str | None) -> bool:
    return qualified_name in PRODUCT_FUNCTIONS


def product_operands(qualified_name: str | None, positional: Sequence[T]) -> list[T]:
    """The operands among the positional arguments of a call to the product function `qualified_name`."""
    return list(positional[1:] if qualified_name == _EQUATION_FIRST else positional)


def is_upcast(method: str, dtype_names: Iterable[str | None]) -> bool:
    """Whether `<operand>.<method>(...)` is upcast: `.float()`, `.double()`, or a `.to(...)` whose dtype (positional,
    or `dtype=`), by its qualified name in `dtype_names`, is float32 or float64."""
    if method in UPCAST_METHODS:
        return True
    return method == "to" and any(name in UPCAST_DTYPES for name in dtype_names)


def disables_autocast(callee: str, enabled_false: bool) -> bool:
    """Whether a call, by its callee's source text and whether it passes `enabled=False`, turns autocast off:
    `torch.autocast(..., enabled=False)`, or any `*autocast*` helper called so (`maybe_autocast`)."""
    return enabled_false and "autocast" in callee
