"""What every rule declares, held to what it does: its fix availability and safeties to its examples, its fix payloads
to the findings of its examples (and to the cache and the process pool they travel through), its prefilter to the
spec type, and the README's rules table to all of it."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from helpers import REPO

from rope_lint.cache import _diagnostic, _entry
from rope_lint.diagnostics import Diagnostic
from rope_lint.engine import Settings, check_source
from rope_lint.prefilter import PrefilterSpec
from rope_lint.rules import ALL_RULES, CATALOG, payloads
from rope_lint.rules.base import FixAvailability, Invalid, Rule
from rope_lint.rules.payloads import ClassRewrite

RULES = pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.code)


def invalid_examples(rule: type[Rule]) -> list[Invalid]:
    return [example for example in rule.examples if isinstance(example, Invalid)]


def example_findings(rule: type[Rule]) -> list[Diagnostic]:
    return [
        finding
        for example in invalid_examples(rule)
        for finding in check_source("example.py", example.code, Settings([rule()], Path(".")))
    ]


@RULES
def test_fix_availability_is_what_the_examples_show(rule: type[Rule]) -> None:
    fixed = [example.fixed is not None for example in invalid_examples(rule)]
    assert rule.fix_availability in (FixAvailability.ALWAYS, FixAvailability.SOMETIMES, FixAvailability.NEVER)
    if rule.fix_availability == FixAvailability.ALWAYS:
        assert all(fixed), "a rule that always fixes has a fix in every Invalid example"
    elif rule.fix_availability == FixAvailability.NEVER:
        assert not any(fixed), "a rule that never fixes has none in any Invalid example"
    else:
        assert any(fixed) and not all(fixed), "a rule that sometimes fixes shows a finding with a fix and one without"


@RULES
def test_fix_safeties_are_those_of_the_examples(rule: type[Rule]) -> None:
    shown = {example.safety for example in invalid_examples(rule) if example.fixed is not None}
    assert shown == rule.fix_safeties
    assert (rule.fix_availability == FixAvailability.NEVER) == (not rule.fix_safeties)


@RULES
def test_fix_payloads_are_the_declared_types(rule: type[Rule]) -> None:
    """Every payload an example's finding carries is of a type the rule declares, and every declared type is shown."""
    payloads = [finding.fix.payload for finding in example_findings(rule) if finding.fix is not None]
    assert {type(payload) for payload in payloads if payload is not None} == set(rule.fix_payloads)
    if rule.fix_payloads:
        assert None not in payloads
    for payload in payloads:
        if payload is not None:
            assert all(field is None or isinstance(field, str | int) for field in payload), payload


def test_the_cache_rebuilds_every_payload_type_and_only_those_that_rules_declare() -> None:
    """The cache rebuilds a payload by its type's name (`payloads.BY_NAME`), without importing the rule: every type a
    rule declares is there under its own name, and nothing else is."""
    declared = {payload for rule in ALL_RULES for payload in rule.fix_payloads}
    assert {payload.__name__: payload for payload in declared} == payloads.BY_NAME


def test_the_catalog_names_each_rule_by_its_own_code() -> None:
    """A run selects rules by the catalog's codes before it imports any (`rules.Selection`): each entry's class has
    the entry's code, and an entry is informational where its rule's documentation says so."""
    assert [rule.code for rule in ALL_RULES] == [entry.code for entry in CATALOG]
    for entry, rule in zip(CATALOG, ALL_RULES, strict=True):
        assert entry.informational == ("An informational rule" in rule.documentation()), entry.code


@RULES
def test_findings_survive_the_cache_and_the_process_pool(rule: type[Rule]) -> None:
    for finding in example_findings(rule):
        entry = json.loads(json.dumps(_entry(finding)))
        assert _diagnostic(finding.path, entry) == finding
        assert pickle.loads(pickle.dumps(finding)) == finding


def test_the_rope_rules_record_their_class_and_codemod() -> None:
    source = (
        "import torch\n"
        "class LlamaRotaryEmbedding(torch.nn.Module):\n"
        "    def __init__(self, dim):\n"
        "        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float().to('cuda') / dim))\n"
        '        self.register_buffer("inv_freq", inv_freq, persistent=False)\n'
        "    def forward(self, x, position_ids):\n"
        "        return (self.inv_freq[None, :, None] @ position_ids[:, None, :]).to(x.dtype)\n"
    )
    rules = [rule() for rule in ALL_RULES if rule.fix_payloads == (ClassRewrite,)]
    found = check_source("model.py", source, Settings(rules, Path(".")))
    assert {(d.code, d.fix.payload) for d in found if d.fix} == {
        ("RPL202", ClassRewrite("rope_tables", "LlamaRotaryEmbedding")),
        ("RPL203", ClassRewrite("rope_tables", "LlamaRotaryEmbedding")),
        ("RPL204", ClassRewrite("rope_autocast", "LlamaRotaryEmbedding")),
    }


@RULES
def test_prefilter_is_one_spec(rule: type[Rule]) -> None:
    prefilter = rule.prefilter
    assert isinstance(prefilter, PrefilterSpec)
    assert prefilter.triggers and all(
        isinstance(trigger, bytes) and trigger.isascii() for trigger in prefilter.triggers
    )
    assert prefilter.screen is None or callable(prefilter.screen)
    assert prefilter.parses_whole_class is None or callable(prefilter.parses_whole_class)


def readme_rules_table() -> dict[str, tuple[str, str]]:
    """By code, the name and fix columns of the README's `## Rules` table."""
    section = (REPO / "README.md").read_text().split("\n## Rules\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| RPL")]
    cells = [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]
    return {code: (name, fix) for code, name, fix, *_ in cells}


def test_readme_rules_table_matches_the_rules() -> None:
    """The table lists every rule once, in order, with its name, and a fix column that begins with what `rope-lint
    rules` prints, explained in parentheses at most; "(codemod)" exactly for the rules whose fix is a codemod."""
    table = readme_rules_table()
    assert list(table) == [rule.code for rule in ALL_RULES]
    for rule in ALL_RULES:
        name, fix = table[rule.code]
        assert name == rule.name
        summary = rule.fix_summary()
        assert fix == summary or fix.startswith(f"{summary} ("), (rule.code, fix)
        assert ("(codemod)" in fix) == (ClassRewrite in rule.fix_payloads), (rule.code, fix)
