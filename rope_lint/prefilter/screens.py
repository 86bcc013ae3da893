"""Text screens: whether a rule can flag the trigger at a position of a file's bytes, judged before anything is
parsed (a rule's `PrefilterSpec.screen`). A screen may say False only where the rule cannot flag; where the text
leaves it in doubt (a string or a comment in the call, a bracket it cannot match) it says True. An occurrence that
every rule with its trigger screens out marks nothing, so the function around it is parsed only if something else
marks it.

The common triggers are common because most of their calls are harmless: `torch.arange(n, dtype=torch.long,
device=device)` for position ids, `math.log(2)` in a scale. Telling those apart on the bytes spares parsing the large
`forward`s they sit in.
"""

from __future__ import annotations

import functools
import re

_INTEGER_DTYPE = re.compile(rb"\bdtype\s*=\s*torch\.(?:long|int64|int32|int16|int8|int|uint8|short|bool)\s*(?:,|$)")
_DTYPE = re.compile(rb"\bdtype\b")
# A digit before `.`, `e` or `j`, or after `.`: what a float literal has (and a few names, which only keep a call).
_MAYBE_FLOAT = re.compile(rb"\d[.eEjJ]|\.\d")
# What makes `log(x)` a hazard: an `exp` (log-sum-exp, softplus, a merge), a softmax, a sigmoid, or `1 + x`.
_LOG_OF_HAZARD = (b"exp", b"softmax", b"sigmoid", b"+")
_INNER_FUNCTIONS = (b"exp", b"softmax", b"sigmoid")
# What may follow a call before its operator: blanks, closing parentheses, comments; then `[`, `.name(` or `.name`.
_CHAIN = re.compile(rb"(?:[ \t\r\n\\)]|#[^\n]*)*(?:\[|\.\w+\(|\.\w+)?")
_NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")
_LONGEST_CALL = 4096


def arange_may_be_hazard(data: bytes, position: int) -> bool:
    """The RPL1xx rules: False only for an `arange(...)` whose bounds hold no float literal, whose dtype is absent
    or a literal integer one, that no cast follows (`.to(dtype)`; a move to a device is no cast), and that no
    arithmetic operator takes as an operand (`/`, or `*`, `+`, `-`, `%` with what may be a Python float)."""
    start = position + len(b"arange")
    if data[start : start + 1] != b"(":
        return True
    end = _closing_bracket(data, start)
    if end is None:
        return True
    arguments = data[start + 1 : end]
    if _MAYBE_FLOAT.search(arguments):
        return True
    if _DTYPE.search(arguments) and not _INTEGER_DTYPE.search(arguments):
        return True
    if _cast_after(data, end + 1):
        return True
    # A comment before the call can hide the operator on a previous line: it keeps the call too.
    return _next_operator(data, end + 1) in _ARITHMETIC or _previous_operator(data, position) in (*_ARITHMETIC, b"#")


# A cast chained right onto the call, which may give the integer enumeration a floating dtype (RPL101's casts).
_CAST = re.compile(rb"(?:[ \t\r\n\\]|#[^\n]*)*\.\s*(to|type|type_as|half|bfloat16)\s*\(")
# `.to(device)`, `.to(x.device)`, `.to(device=device)`: a move, which keeps the dtype.
_MOVE_ONLY = re.compile(rb"\s*(?:device\s*=\s*)?[\w.]*device\s*(?:,\s*non_blocking\s*=\s*\w+\s*)?,?\s*")


def _cast_after(data: bytes, offset: int) -> bool:
    """Whether a cast follows the call that ends before `offset`: any but a `.to(...)` that only moves it."""
    cast = _CAST.match(data, offset)
    if cast is None:
        return False
    if cast.group(1) != b"to":
        return True
    end = _closing_bracket(data, cast.end() - 1)
    return end is None or _MOVE_ONLY.fullmatch(data, cast.end(), end) is None


_ARITHMETIC = (b"/", b"*", b"+", b"-", b"%")


def log_may_be_hazard(data: bytes, position: int) -> bool:
    """The RPL30x rules, which read the operand of `log(x)`, `log1p(x)` or `x.log()`: False where that operand
    holds none of `exp`, `softmax`, `sigmoid` or `+` (a function's argument), or is no call or parenthesis (a
    method's receiver, as in `scale.log()`). `x.log_()` is always True: an in-place merge reads the statements
    before it."""
    if data.startswith(b"log_(", position):
        return True
    start = data.find(b"(", position)
    end = _closing_bracket(data, start)
    if end is None:
        return True
    arguments = data[start + 1 : end]
    if not arguments.strip():  # `x.log()`: the receiver is the operand
        return data[position - 2 : position] == b")."
    return any(word in arguments for word in _LOG_OF_HAZARD) or _renames_inner_functions(data)


def exp_may_be_hazard(data: bytes, position: int) -> bool:
    """RPL307, `exp(x) - 1`: False where no `-` follows the call (and what chains on it)."""
    start = data.find(b"(", position)
    end = _closing_bracket(data, start)
    return end is None or _next_operator(data, end + 1) == b"-"


@functools.lru_cache(maxsize=8)
def _renames_inner_functions(data: bytes) -> bool:
    """Whether the file imports `exp`, `softmax` or `sigmoid` under another name, which the words above miss. Found
    from each ` as `: a pattern that starts with no fixed text would scan the file ten times slower."""
    start = data.find(b" as ")
    while start != -1:
        if data[max(0, start - 16) : start].rstrip().endswith(_INNER_FUNCTIONS):
            return True
        start = data.find(b" as ", start + 1)
    return False


def rotary_name_may_be_class(data: bytes, position: int) -> bool:
    """RPL203, whose triggers are the table (`inv_freq`) and the words of a rotary class's name (`Rotary`, `Rope`,
    `RoPE`): a name counts only on the first line of a `class` statement, where `rotary.rotary_classes` reads it
    (as the class's name or a base's). The words in comments ("# Specific to RoPE models"), docstrings and calls
    are False."""
    if data.startswith(b"inv_freq", position):
        return True
    line_start = data.rfind(b"\n", 0, position) + 1
    return data[line_start:position].lstrip().startswith(b"class ")


def _closing_bracket(data: bytes, opening: int) -> int | None:
    """The offset of the bracket that closes the one at `opening`; None past a string, a comment or too far."""
    depth = 0
    for offset in range(opening, min(len(data), opening + _LONGEST_CALL)):
        character = data[offset]
        if character in b"([{":
            depth += 1
        elif character in b")]}":
            depth -= 1
            if depth == 0:
                return offset
        elif character in b"\"'#":
            return None
    return None


def _next_operator(data: bytes, offset: int) -> bytes:
    """The first character after the call and what chains on it (`[...]`, `.to(...)`, `.T`, closing parentheses,
    comments); a bracket it cannot close reads as `/`, which keeps the call."""
    while True:
        chained = _CHAIN.match(data, offset)
        assert chained is not None  # every part is optional
        offset = chained.end()
        opening = data[offset - 1 : offset]
        if opening in (b"[", b"("):
            closing = _closing_bracket(data, offset - 1)
            if closing is None:
                return b"/"
            offset = closing + 1
        elif chained.end() == chained.start():
            return data[offset : offset + 1]


def _previous_operator(data: bytes, position: int) -> bytes:
    """The first character before `torch.arange` and the parentheses around it; `#` where a line it passes ends
    in a comment."""
    offset = position
    while offset > 0 and data[offset - 1] in _NAME_BYTES:  # `torch.` or another spelling of the callee
        offset -= 1
    while offset > 0 and data[offset - 1 : offset] in (b" ", b"\t", b"\n", b"\r", b"\\", b"("):
        offset -= 1
        if data[offset : offset + 1] == b"\n" and b"#" in data[data.rfind(b"\n", 0, offset) + 1 : offset]:
            return b"#"
    return data[offset - 1 : offset]
