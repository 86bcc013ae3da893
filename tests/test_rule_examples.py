"""Every rule's own examples, as its documentation states them: the documentation cannot drift from the behaviour."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from rope_lint.engine import Settings, check_source
from rope_lint.fix.apply import apply_fixes, fixable
from rope_lint.rules import ALL_RULES
from rope_lint.rules.base import Invalid, Rule, Valid

EXAMPLES = [
    pytest.param(rule, example, id=f"{rule.code}-{type(example).__name__.lower()}-{index}")
    for rule in ALL_RULES
    for index, example in enumerate(rule.examples)
]


def findings(rule: type[Rule], code: str):
    return check_source("example.py", code, Settings([rule()], Path(".")))


@pytest.mark.parametrize(("rule", "example"), EXAMPLES)
def test_example(rule: type[Rule], example: Valid | Invalid) -> None:
    found = findings(rule, example.code)
    if isinstance(example, Valid):
        assert found == []
        return
    assert [d.code for d in found] == [rule.code] * example.count
    if example.fixed is None:
        assert all(d.fix is None for d in found)
        return
    assert {d.fix.safety for d in found if d.fix} == {example.safety}
    assert all(d.fix is not None for d in found)
    fixed = apply_fixes(example.code, fixable(found, unsafe=True)).text
    assert fixed == example.fixed
    assert findings(rule, fixed) == [], "the fixed code must not be flagged again"
    # ... nor by another rule: a fix may leave others' findings, never make new ones (`fix` would report them as left).
    others = Counter(d.code for d in every_rules_findings(example.code) if d.code != rule.code)
    assert not Counter(d.code for d in every_rules_findings(fixed)) - others, fixed


def every_rules_findings(code: str):
    return check_source("example.py", code, Settings([rule() for rule in ALL_RULES], Path(".")))


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.code)
def test_rule_documents_itself(rule: type[Rule]) -> None:
    """The documentation has ruff's sections, and the examples cover both outcomes."""
    documentation = rule.documentation()
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety"):
        assert section in documentation
    kinds = {type(example) for example in rule.examples}
    assert kinds == {Valid, Invalid}
