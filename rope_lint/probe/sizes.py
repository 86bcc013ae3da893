"""Sizes in bytes for `--max-memory`, read and written. Torch-free, like `cli`, so that the option is checked before
torch is imported."""

from __future__ import annotations

import re

DEFAULT_BUDGET = 2 * 2**30

_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes from `2GB`, `512MB`, `1.5G`, `64KiB` or a plain number of bytes (K, M, G, T are powers of 1024)."""
    match = _SIZE.fullmatch(text.strip())
    size = int(float(match.group(1)) * _UNITS[match.group(2).lower()]) if match else 0
    if size <= 0:
        raise ValueError(f"{text!r} is not a positive size such as 2GB, 512MB or a number of bytes")
    return size


def format_size(size: float) -> str:
    for unit, scale in (("TB", 2**40), ("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size:.0f} B"
