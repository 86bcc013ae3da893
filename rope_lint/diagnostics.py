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
# `fix` left a generated transformers file that regeneration from its modular source would not give back, which
# transformers' modular conversion check rejects.
REGENERATION_DIFFERS = "RPL905"
ERROR_CODES = (READ_ERROR, SYNTAX_ERROR, INTERNAL_ERROR, COPY_DIVERGED, REGENERATION_DIFFERS)


class FixSafety(str, enum.Enum):
    """How much a fix may change.

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


class Fix(namedtuple("Fix", ("safety", "payload", "adds_import", "moves_tables"), defaults=(None, None, ()))):
    """A fix offered for a finding.

    The edit itself is made later by the rule's `fix` method on the LibCST node at the finding's range, so that
    `check` never imports LibCST. `payload` is what detection decided and the edit applies (the name torch is
    imported as, the function to write, the codemod to run): a small namedtuple of strings, numbers and flags, of a
    type its rule declares (`Rule.fix_payloads`), so that findings can cross process boundaries and be cached as
    JSON. `adds_import` is the module to import where the file has no name for what the fix writes; the fix stage
    adds it once, after the edits.
    """

    __slots__ = ()
    safety: FixSafety
    payload: tuple | None  # default None
    adds_import: str | None  # default None
    # The tables that the fix moves off the module's device (the rope codemod's): it is offered only where no other
    # code of the package reads one of them off a module. The engine looks that up after the file's check
    # (`callers`), as it does a finding's helpers. Empty once resolved.
    moves_tables: tuple[str, ...]  # default ()


_DIAGNOSTIC_FIELDS = ("path", "code", "name", "message", "start", "end", "fix", "rests_on_helpers")


class Diagnostic(namedtuple("Diagnostic", _DIAGNOSTIC_FIELDS, defaults=(None, ()))):
    __slots__ = ()
    path: str
    code: str
    name: str
    message: str
    start: Position
    end: Position
    fix: Fix | None  # default None
    # The public helpers of its file that the file itself runs only after construction: whether the finding stands
    # depends on whether another module of the package calls one of them from a constructor (its rule's
    # `stands_if_called_at_construction` says which way). The engine looks that up after the file's check
    # (`callers`), so that a cached result never depends on another file. Empty once resolved.
    rests_on_helpers: tuple[str, ...]  # default ()

    @property
    def sort_key(self) -> tuple[str, Position, str]:
        return (self.path, self.start, self.code)
