"""What a check reports: a finding at a source range, and the fix it offers."""

from __future__ import annotations

import enum
from collections import namedtuple

# Findings about the run itself rather than the code. They are always reported (they can be ignored, never
# selected away), and they make the exit code 2.
READ_ERROR = "RPL901"
SYNTAX_ERROR = "RPL902"
INTERNAL_ERROR = "RPL903"
# `fix` left a `# Copied from` copy differing from its source, which transformers' `utils/check_copies.py` rejects.
COPY_DIVERGED = "RPL904"
ERROR_CODES = (READ_ERROR, SYNTAX_ERROR, INTERNAL_ERROR, COPY_DIVERGED)


class FixSafety(str, enum.Enum):
    """How much a fix may change (DESIGN §3).

    SAFE keeps dtypes and shapes and only removes rounding or overflow; UNSAFE changes a result's dtype or
    where a tensor lives, so `fix` applies it only with `--unsafe-fixes`.
    """

    SAFE = "safe"
    UNSAFE = "unsafe"


class Position(namedtuple("Position", ("line", "column"))):
    """1-based line, 0-based column in characters (not bytes): the column LibCST and editors count."""

    __slots__ = ()
    line: int
    column: int


class Fix(namedtuple("Fix", ("safety", "data"), defaults=((),))):
    """A fix offered for a finding.

    The edit itself is made later by the rule's `fix` method on the LibCST node at the finding's range, so
    that `check` never imports LibCST. `data` carries what detection learned and the edit needs (for example
    the name torch is imported as); it is plain strings so that findings can cross process boundaries.
    """

    __slots__ = ()
    safety: FixSafety
    data: tuple[tuple[str, str], ...]  # default ()

    def get(self, key: str) -> str:
        return dict(self.data)[key]


_DIAGNOSTIC_FIELDS = ("path", "code", "name", "message", "start", "end", "fix")


class Diagnostic(namedtuple("Diagnostic", _DIAGNOSTIC_FIELDS, defaults=(None,))):
    __slots__ = ()
    path: str
    code: str
    name: str
    message: str
    start: Position
    end: Position
    fix: Fix | None  # default None

    @property
    def sort_key(self) -> tuple[str, Position, str]:
        return (self.path, self.start, self.code)
