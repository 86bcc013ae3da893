"""The bundled fixtures: each hazard file flags exactly its `# expect: CODE` lines, and fixes into its twin."""

from __future__ import annotations

import ast
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from helpers import REPO, rope_lint

from rope_lint.diagnostics import Diagnostic
from rope_lint.engine import Settings, check_file
from rope_lint.rules import select_rules
from rope_lint.rules.payloads import ClassRewrite

HAZARDS = REPO / "fixtures" / "hazards"
FIXED = REPO / "fixtures" / "fixed"
NAMES = sorted(path.name for path in HAZARDS.glob("*.py"))
RUFF_SETTINGS = "[tool.ruff]\nline-length = 120\n"
_EXPECT = re.compile(r"# expect: (RPL\d+(?:, RPL\d+)*)")


def expected(path: Path) -> list[tuple[int, str]]:
    return sorted(
        (number, code)
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        for match in _EXPECT.finditer(line)
        for code in match.group(1).split(", ")
    )


def found(path: Path) -> list[tuple[int, str]]:
    return sorted((d.start.line, d.code) for d in check_file(path, Settings(select_rules(["ALL"], []), REPO)))


def test_every_hazard_has_a_fixed_twin() -> None:
    assert NAMES
    assert sorted(path.name for path in FIXED.glob("*.py")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_hazard_fixture_flags_exactly_its_marked_lines(name: str) -> None:
    path = HAZARDS / name
    assert expected(path), "a hazard fixture marks its hazards"
    assert found(path) == expected(path)


@pytest.mark.parametrize("name", NAMES)
def test_fix_turns_hazard_into_its_twin(name: str, tmp_path: Path) -> None:
    # Rewritten regions are formatted with ruff and the settings of the project around the file: ours.
    (tmp_path / "pyproject.toml").write_text(RUFF_SETTINGS)
    copy = tmp_path / name
    shutil.copy(HAZARDS / name, copy)
    rope_lint("fix", "--unsafe-fixes", str(copy))
    assert copy.read_text() == (FIXED / name).read_text()


def _rewritten_lines(path: Path, findings: list[Diagnostic]) -> set[int]:
    """The lines of the classes that the rope codemod rewrites whole, as the file's findings' fixes ask."""
    names = {d.fix.payload.class_name for d in findings if d.fix and isinstance(d.fix.payload, ClassRewrite)}
    classes = [node for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ClassDef)]
    return {line for cls in classes if cls.name in names for line in range(cls.lineno, (cls.end_lineno or 0) + 1)}


@pytest.mark.parametrize("name", NAMES)
def test_fixed_twin_keeps_only_unfixable_findings(name: str) -> None:
    settings = Settings(select_rules(["ALL"], []), REPO)
    # By code and the line's text: a fix may add an import above them (`import math`), which moves every line.
    hazard_lines, fixed_lines = (path.read_text().splitlines() for path in (HAZARDS / name, FIXED / name))
    findings = check_file(HAZARDS / name, settings)
    # A statement the codemod rewrote around a finding it cannot fix (a table found by its computation, which keeps
    # its buffer) may be wrapped over lines: it is matched by its code and its first line up to the first parenthesis.
    left = Counter((code, fixed_lines[line - 1].split("(")[0]) for line, code in found(FIXED / name))
    unfixable = [d for d in findings if d.fix is None]
    # A finding without a fix of its own may go with the class around it, which the rope codemod rewrites whole
    # (RPL101's `.type_as(self.inv_freq)`: the codemod casts those positions to float32); any other stays.
    rewritten = _rewritten_lines(HAZARDS / name, findings)
    may_stay = Counter((d.code, hazard_lines[d.start.line - 1].split("(")[0]) for d in unfixable)
    stay = Counter(
        (d.code, hazard_lines[d.start.line - 1].split("(")[0]) for d in unfixable if d.start.line not in rewritten
    )
    assert not left - may_stay, "only findings without a fix are left"
    assert not stay - left, "a finding without a fix stays, unless a class rewrite takes its line"
