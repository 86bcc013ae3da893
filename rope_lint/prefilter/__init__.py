"""The prefilter stage: a file's bytes in, the parts of it worth parsing out.

`candidates` finds where the enabled rules' trigger words occur and cuts the file down to the statements around
them (every line and column kept where it was); `screens` are the rules' cheap text tests that drop an occurrence
no rule can flag. Nothing here parses more than those statements, and nothing here knows a rule by name: each rule
declares one `PrefilterSpec`, its trigger words, its screen, the words a file must hold for it, and the classes it
reads whole, and the engine combines the specs of the rules it runs (`combined_screens`, `combined_class_test`).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Iterable
from functools import partial

from rope_lint import TYPE_CHECKING

if TYPE_CHECKING:
    from rope_lint.prefilter.candidates import Keep, Occurrences, Screen

# Whether a class, from its `class` keyword on, is parsed whole: all its methods, not only those near a trigger.
ClassTest = Callable[[bytes], bool]
# Whether a file, from the occurrences of words in its bytes, can hold a finding of a rule (`PrefilterSpec.requires`).
Requirement = Callable[["Occurrences"], bool]


class PrefilterSpec(
    namedtuple("PrefilterSpec", ("triggers", "screen", "parses_whole_class", "requires"), defaults=(None, None, None))
):
    """What a rule needs parsed of a file.

    `triggers`: bytes that every file the rule can flag contains; a file without any of them is never parsed.
    `screen`: whether the trigger at a position of a file's bytes can start a finding of the rule; it may say False
    only where the rule cannot flag. None: every occurrence can.
    `parses_whole_class`: a function of a class's text that says whether the rule reads every method of it (the rope
    rules follow `self.` calls from `__init__`); None where the rule reads only the function around a trigger and the
    `__init__` of its class.
    `requires`: whether a file, from the occurrences of words in its bytes (`candidates.Occurrences`), can hold a
    finding of the rule at all, where its triggers also mark what it reads around a finding (the rope rules' table
    math, which counts only where a file stores a table); in a file where it says False, the rule's triggers mark
    nothing. It may say False only where the rule cannot flag. None: a trigger alone suffices.
    """

    __slots__ = ()
    triggers: tuple[bytes, ...]
    screen: Screen | None  # default None
    parses_whole_class: ClassTest | None  # default None
    requires: Requirement | None  # default None


def combined_screens(specs: Iterable[PrefilterSpec], triggers: Iterable[str]) -> dict[str, Keep]:
    """By trigger, what keeps those of its occurrences in a file that some rule taking it can flag: an occurrence is
    dropped only when every one of them screens it out, or the file lacks what the rule requires. A trigger that some
    rule takes unscreened and unconditionally gets none."""
    specs = list(specs)
    kept: dict[str, Keep] = {}
    for trigger in triggers:
        taking = [spec for spec in specs if trigger.encode() in spec.triggers]
        if taking and all(spec.screen is not None or spec.requires is not None for spec in taking):
            kept[trigger] = partial(_kept, tuple(dict.fromkeys((spec.requires, spec.screen) for spec in taking)))
    return kept


def combined_class_test(specs: Iterable[PrefilterSpec]) -> ClassTest | None:
    """Whether any of the rules reads a class whole; None when none of them reads any class whole."""
    tests = tuple(dict.fromkeys(spec.parses_whole_class for spec in specs if spec.parses_whole_class is not None))
    if not tests:
        return None
    return tests[0] if len(tests) == 1 else partial(_any_class_test, tests)


# Of each rule that takes a trigger: what a file must hold for it (`PrefilterSpec.requires`), and its screen.
_Tests = tuple[tuple[Requirement | None, "Screen | None"], ...]


def _kept(tests: _Tests, occurrences: Occurrences, positions: list[int]) -> list[int]:
    """The `positions` of a trigger in a file that some rule taking it can flag: of each rule (its requirement and its
    screen, `tests`), none where the file lacks what the rule requires, all where it has no screen, else those its
    screen lets through. What a file holds is read from its occurrences, which its other triggers search anyway."""
    screens: list[Screen] = []
    data = occurrences.data
    for requires, screen in tests:
        if requires is not None and not occurrences.meets(requires):
            continue
        if screen is None:
            return positions
        screens.append(screen)
    if len(screens) == 1:
        return [position for position in positions if screens[0](data, position)]
    return [position for position in positions if any(screen(data, position) for screen in screens)]


def _any_class_test(tests: tuple[ClassTest, ...], class_text: bytes) -> bool:
    return any(test(class_text) for test in tests)
