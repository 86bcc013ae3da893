"""The shape every rule has: code, name, documentation, detection, fix and examples in one class.

A rule's docstring is its documentation, in the sections ruff uses (What it does / Why is this bad /
Example / Use instead / Fix safety); `rope-lint rule CODE` prints it. Its `examples` are run by the test
suite, so the documentation cannot drift from the behaviour.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import Diagnostic, Fix, FixSafety
from rope_lint.rules.analysis.context import FileContext

if TYPE_CHECKING:
    from typing import ClassVar

    import libcst as cst


class Valid(namedtuple("Valid", ("code",))):
    """Code the rule must leave alone."""

    __slots__ = ()
    code: str


class Invalid(namedtuple("Invalid", ("code", "fixed", "safety", "count"), defaults=(None, None, 1))):
    """Code the rule must flag `count` times, and what `fix --unsafe-fixes` must make of it.

    `fixed` is None when the rule offers no fix for this code; `safety` is the fix's safety otherwise.
    """

    __slots__ = ()
    code: str
    fixed: str | None  # default None
    safety: FixSafety | None  # default None
    count: int  # default 1


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    # Bytes that every file this rule can flag contains: files without any of them are never parsed.
    triggers: ClassVar[tuple[bytes, ...]]
    # Whether the rule reads every method of the classes that may be rotary (`rotary.may_be_rotary`): the RPL2xx
    # rules follow `self.` calls from `__init__`. Other rules read the function around a trigger and the
    # `__init__` of its class, and the other methods of a class are not parsed.
    reads_rotary_classes: ClassVar[bool] = False

    @staticmethod
    def may_flag(data: bytes, position: int) -> bool:
        """Whether the trigger at `position` of a file's bytes can start a finding of this rule: a screen on the
        text, before anything is parsed, that says False only where the rule cannot flag. An occurrence that every
        rule with that trigger screens out is neither parsed nor indexed."""
        return True

    # How the rule fixes, for the rules table: "safe", "unsafe", "sometimes" or "none".
    fixability: ClassVar[str]
    examples: ClassVar[tuple[Valid | Invalid, ...]]

    def check(self, ctx: FileContext) -> Iterable[Diagnostic]:
        raise NotImplementedError

    def fix(self, node: cst.CSTNode, fix: Fix) -> cst.CSTNode:
        """The replacement for the LibCST node at a finding's range."""
        raise NotImplementedError(f"{self.code} offers no fix")

    @classmethod
    def summary(cls) -> str:
        """The first line of the documentation."""
        return cls._docstring().splitlines()[0]

    @classmethod
    def documentation(cls) -> str:
        return f"# {cls.code} {cls.name}\n\n" + cls._docstring()

    @classmethod
    def _docstring(cls) -> str:
        import textwrap  # only `rule` and `rules` print documentation

        return textwrap.dedent(cls.__doc__ or "").strip()
