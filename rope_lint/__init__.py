"""rope-lint: find and fix numerical-precision hazards in PyTorch model code."""

__version__ = "0.1.0"

# `typing.TYPE_CHECKING`, without importing `typing`, which would be a large share of a one-file check (see
# bench/README.md). Type checkers read any `if TYPE_CHECKING:` as true. Modules import the names they annotate with
# under it.
TYPE_CHECKING = False
