"""ANSI colour for output read on a terminal. Output is painted only through a `Paint`: `plain` gives each text as it
is, `ansi` wraps it in its style's escape codes. What is painted is already `printable`, so the only escape codes an
output holds are these: a file name or a source line cannot bring its own."""

from __future__ import annotations

from collections.abc import Callable

# A style (an SGR parameter below) and a text in; the text as shown out.
Paint = Callable[[str, str], str]

# Modest, as ruff's: bold file names, red codes and carets, blue gutters, green and red diff lines.
BOLD, RED, GREEN, BLUE, CYAN = "1", "31", "32", "34", "36"


def plain(style: str, text: str) -> str:
    return text


def ansi(style: str, text: str) -> str:
    return f"\x1b[{style}m{text}\x1b[0m" if text else text
