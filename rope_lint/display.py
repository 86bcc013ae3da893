"""How a file name or a message is shown, when it may hold any character: a file may be named `a\\n::error x.py`, or
with bytes that are not UTF-8, which Python hands over as lone surrogates (`os.fsdecode`'s surrogateescape).

- `printable` for line-oriented text (text, concise and github output, the fix's report, error lines): every character
  that `str.isprintable` rejects is spelled as an escape, so a name can neither break a line nor forge one, nor move a
  terminal's cursor. As ruff escapes the control characters of its messages.
- `lossy` for JSON and SARIF, whose strings must be Unicode: a byte that is not UTF-8 becomes U+FFFD, as Rust's
  `to_string_lossy` shows ruff's file names.
"""

from __future__ import annotations


def printable(text: str) -> str:
    """`text`, each non-printable character escaped as Python writes it in a string literal (`\\n`, `\\x1b`,
    `\\u202e`), and each byte a file name had that is not UTF-8 as `\\xNN`."""
    if text.isprintable():  # nearly always: one C loop
        return text
    return "".join(char if char.isprintable() else _escaped(char) for char in text)


def _escaped(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # the byte 0x80-0xFF that surrogateescape decoded a name's undecodable byte into
        return f"\\x{code - 0xDC00:02x}"
    return repr(char)[1:-1]


def lossy(text: str) -> str:
    """`text` with the bytes a file name had that are not UTF-8 replaced by U+FFFD, and any other lone surrogate too:
    a string every JSON reader and UTF-8 stream takes."""
    if text.isascii():
        return text
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a lone surrogate that was never a byte (from text, say `\ud800` in a message)
        return "".join("\ufffd" if 0xD800 <= ord(char) <= 0xDFFF else char for char in text)
