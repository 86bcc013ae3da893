"""rope-lint: find and fix numerical-precision hazards in PyTorch model code."""

__version__ = "0.1.0"
