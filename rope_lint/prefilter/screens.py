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
_IDENTIFIER_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_NAME_BYTES = _IDENTIFIER_BYTES | {ord(".")}  # a dotted name
_LONGEST_CALL = 4096


def arange_may_be_hazard(data: bytes, position: int) -> bool:
    """The RPL1xx rules, which read `torch.arange`: False for another library's `arange`, called on a name that the
    file imports NumPy or JAX's NumPy as (`np.arange`, `jnp.arange`), and for an `arange(...)` whose
    bounds hold no float literal, whose dtype is absent or a literal integer one, that no cast follows (`.to(dtype)`;
    a move to a device is no cast), and that no arithmetic operator takes as an operand (`/`, or `*`, `+`, `-`, `%`
    with what may be a Python float)."""
    if _receiver(data, position) in _other_libraries(data):
        return False
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


@functools.cache
def _other_library_import() -> re.Pattern[bytes]:
    """`import numpy as np`, `import jax.numpy as jnp`, `from jax import numpy as jnp`, `import numpy`, a line of its
    own: a name bound to a library whose `arange` is not torch's, as the rules resolve names (by the file's imports).
    Compiled on first use (0.3 ms): a file that names no NumPy never needs it."""
    return re.compile(
        rb"[ \t]*(?:import[ \t]+(numpy|jax\.numpy)(?:[ \t]+as[ \t]+(\w+))?"
        rb"|from[ \t]+jax[ \t]+import[ \t]+(numpy)(?:[ \t]+as[ \t]+(\w+))?)[ \t]*(?:#[^\n]*)?\r?"
    )


@functools.lru_cache(maxsize=8)
def _other_libraries(data: bytes) -> frozenset[bytes]:
    """The names that the file binds to NumPy or JAX's NumPy and that no other `as` binds (`import torch as np` beside
    them leaves `np` out). Read from the lines that name NumPy: a pattern that starts with no fixed text would scan the
    file ten times slower."""
    bound: list[bytes] = []
    aliased: list[bytes] = []
    start = data.find(b"numpy")
    while start != -1:
        line_start, line_end = data.rfind(b"\n", 0, start) + 1, data.find(b"\n", start)
        match = _other_library_import().fullmatch(data, line_start, len(data) if line_end == -1 else line_end)
        module_group = 1 if match and match.group(1) else 3
        if match and match.start(module_group) <= start < match.end(module_group):  # the module, not an alias
            module, alias = match.group(1) or match.group(3), match.group(2) or match.group(4)
            bound.append(alias or module.split(b".")[0])
            aliased += [alias] if alias else []
        start = data.find(b"numpy", start + 1)
    # Every `as <name>` of the file, counted loosely (`has np` too): more than the imports' own leaves the name out.
    return frozenset(
        name for name in bound if len(re.findall(rb"as[ \t]+" + name + rb"\b", data)) == aliased.count(name)
    )


def _receiver(data: bytes, position: int) -> bytes:
    """The name that a method at `position` is called on (`jnp` of `jnp.arange`); empty for anything else."""
    if position < 2 or data[position - 1 : position] != b".":
        return b""
    start = position - 1
    while start > 0 and data[start - 1] in _IDENTIFIER_BYTES:
        start -= 1
    before = data[start - 1 : start] if start > 0 else b""
    return b"" if before == b"." else data[start : position - 1]


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
        return _receiver_may_be_a_call(data, position - 1)
    return any(word in arguments for word in _LOG_OF_HAZARD) or _renames_inner_functions(data)


def _receiver_may_be_a_call(data: bytes, dot: int) -> bool:
    """Whether the receiver of the method whose `.` is at `dot` may end in a call: a `)` before it, past blanks and the
    line breaks of a chain (`x.exp()` on one line, `.log1p()` on the next); True where a comment ends a line it
    passes, which may hide what comes before."""
    before = data[max(0, dot - _LONGEST_CALL) : dot]
    stripped = before.rstrip(b" \t\r\n\\")
    if b"\n" in before[len(stripped) :] and b"#" in stripped[stripped.rfind(b"\n") + 1 :]:
        return True
    return stripped.endswith(b")")


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
