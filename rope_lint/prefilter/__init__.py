"""The prefilter stage: a file's bytes in, the parts of it worth parsing out.

`candidates` finds where the enabled rules' trigger words occur and cuts the file down to the statements around
them (every line and column kept where it was); `screens` are the rules' cheap text tests that drop an occurrence
no rule can flag. Nothing here parses more than those statements, and nothing here knows a rule by name: each rule
declares one `PrefilterSpec`, its trigger words, its screen and the classes it reads whole, and the engine combines
the specs of the rules it runs (`combined_screens`, `combined_class_test`).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Iterable
from functools import partial

from rope_lint import TYPE_CHECKING

if TYPE_CHECKING:
    from rope_lint.prefilter.candidates import Screen

# Whether a class, from its `class` keyword on, is parsed whole: all its methods, not only those near a trigger.
ClassTest = Callable[[bytes], bool]


class PrefilterSpec(namedtuple("PrefilterSpec", ("triggers", "screen", "parses_whole_class"), defaults=(None, None))):
    """What a rule needs parsed of a file.

    `triggers`: bytes that every file the rule can flag contains; a file without any of them is never parsed.
    `screen`: whether the trigger at a position of a file's bytes can start a finding of the rule; it may say False
    only where the rule cannot flag. None: every occurrence can.
    `parses_whole_class`: a function of a class's text that says whether the rule reads every method of it (the rope
    rules follow `self.` calls from `__init__`); None where the rule reads only the function around a trigger and the
    `__init__` of its class.
    """

    __slots__ = ()
    triggers: tuple[bytes, ...]
    screen: Screen | None  # default None
    parses_whole_class: ClassTest | None  # default None


def combined_screens(specs: Iterable[PrefilterSpec], triggers: Iterable[str]) -> dict[str, Screen]:
    """By trigger, the screen of the rules it triggers: an occurrence is dropped only when every one of them screens
    it out. A trigger that some rule takes unscreened gets none."""
    specs = list(specs)
    screens: dict[str, Screen] = {}
    for trigger in triggers:
        screening = [spec.screen for spec in specs if trigger.encode() in spec.triggers]
        if screening and None not in screening:
            distinct = tuple(dict.fromkeys(screening))
            screens[trigger] = distinct[0] if len(distinct) == 1 else partial(_any_screen, distinct)
    return screens


def combined_class_test(specs: Iterable[PrefilterSpec]) -> ClassTest | None:
    """Whether any of the rules reads a class whole; None when none of them reads any class whole."""
    tests = tuple(dict.fromkeys(spec.parses_whole_class for spec in specs if spec.parses_whole_class is not None))
    if not tests:
        return None
    return tests[0] if len(tests) == 1 else partial(_any_class_test, tests)


def _any_screen(screens: tuple[Screen, ...], data: bytes, position: int) -> bool:
    return any(screen(data, position) for screen in screens)


def _any_class_test(tests: tuple[ClassTest, ...], class_text: bytes) -> bool:
    return any(test(class_text) for test in tests)
