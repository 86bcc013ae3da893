"""The shape every rule has: code, name, documentation, prefilter, detection, fix and examples in one class.

A rule's docstring is its documentation, in the sections ruff uses (What it does / Why is this bad /
Example / Use instead / Fix safety); `rope-lint rule CODE` prints it. Its `examples` are run by the test
suite, so the documentation cannot drift from the behaviour, and its declared fix availability and safeties
are checked against them (tests/test_rule_contract.py).

A rule's `check` yields `self.report(node, message, fix)` for each finding; its `fix` later makes the edit that
the finding's payload describes, on the LibCST node at the finding's range.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import Fix, FixSafety
from rope_lint.prefilter import PrefilterSpec
from rope_lint.rules.analysis.context import FileContext

if TYPE_CHECKING:
    import ast
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


class FixAvailability:
    """Whether a rule's findings come with a fix: ALWAYS, SOMETIMES (some shapes or files have none), or NEVER.

    Kept apart from a fix's safety (`FixSafety`), which each fix has of its own, as ruff keeps them apart. Plain
    strings, not an `Enum`: every rule module imports this, and building an enum class costs a check's start.
    """

    ALWAYS = "always"
    SOMETIMES = "sometimes"
    NEVER = "never"


class Flagged(namedtuple("Flagged", ("rule", "node", "message", "fix", "rests_on_helpers", "last"))):
    """What a rule flagged in a file: the node (through the end of `last`, for a run of statements), why, the fix,
    and the public helpers of the file whose callers elsewhere decide whether it stands (`Diagnostic`). The engine
    gives it its path and position (`FileContext.diagnostic`)."""

    __slots__ = ()
    rule: Rule
    node: ast.expr | ast.stmt
    message: str
    fix: Fix | None
    rests_on_helpers: tuple[str, ...]
    last: ast.expr | ast.stmt | None


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    # The trigger words, the text screen and the classes read whole: what the rule needs parsed of a file.
    prefilter: ClassVar[PrefilterSpec]
    fix_availability: ClassVar[str]  # a FixAvailability
    # The safeties the rule's fixes can have; empty for a rule that never fixes.
    fix_safeties: ClassVar[frozenset[FixSafety]] = frozenset()
    # The types of its fixes' payloads (`Fix.payload`, from `rules.payloads`).
    fix_payloads: ClassVar[tuple[type, ...]] = ()
    examples: ClassVar[tuple[Valid | Invalid, ...]]
    # Whether the rule is informational, and where a finding that rests on public helpers stands, are the catalog's
    # (`rules.Entry`): a run needs them before it imports any rule.

    def check(self, ctx: FileContext) -> Iterable[Flagged]:
        raise NotImplementedError

    def report(
        self,
        node: ast.expr | ast.stmt,
        message: str,
        fix: Fix | None = None,
        rests_on_helpers: tuple[str, ...] = (),
        last: ast.expr | ast.stmt | None = None,
    ) -> Flagged:
        """A finding of this rule at `node`, or at the statements from `node` through `last`; where it rests on the
        file's public helpers `rests_on_helpers`, the engine keeps it only where another module calls one of them from
        a constructor, or, for a rule that is not `stands_if_called_at_construction` (`rules.Entry`), only where none
        does (`callers`)."""
        return Flagged(self, node, message, fix, rests_on_helpers, last)

    def fix(self, node: cst.CSTNode, payload: tuple | None) -> cst.CSTNode:
        """The replacement for the LibCST node at a finding's range, made as the finding's payload says."""
        raise NotImplementedError(f"{self.code} offers no fix")

    @classmethod
    def fix_summary(cls) -> str:
        """How the rule fixes, for the rules table: "never", or its availability and its fixes' safeties
        ("always: safe", "sometimes: safe or unsafe")."""
        if cls.fix_availability == FixAvailability.NEVER:
            return FixAvailability.NEVER
        safeties = " or ".join(safety.value for safety in FixSafety if safety in cls.fix_safeties)
        return f"{cls.fix_availability}: {safeties}"

    @classmethod
    def summary(cls) -> str:
        """The first line of the documentation."""
        return cls._docstring().splitlines()[0]

    @classmethod
    def documentation(cls, heading_level: int = 1) -> str:
        """The rule's documentation in Markdown, its title a heading of `heading_level` (2 in docs/rules.md, where
        the page has the title) and its sections one level below."""
        text = f"# {cls.code} {cls.name}\n\n" + cls._docstring()
        deeper = "#" * (heading_level - 1)
        lines, in_code = [], False
        for line in text.split("\n"):
            in_code ^= line.startswith("```")
            # A `#` line inside a code block is a Python comment, not a heading.
            lines.append(deeper + line if line.startswith("#") and not in_code else line)
        return "\n".join(lines)

    @classmethod
    def _docstring(cls) -> str:
        import textwrap  # only `rule` and `rules` print documentation

        return textwrap.dedent(cls.__doc__ or "").strip()
