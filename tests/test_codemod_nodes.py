"""`codemods.nodes.findall` finds the nodes that LibCST's `m.findall` finds, the same objects, on every fixture: the
codemods ask it instead, as it is a few times faster."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import libcst.matchers as m
import pytest
from rope_lint.codemods.nodes import findall

FIXTURES = sorted((Path(__file__).parents[1] / "fixtures").rglob("*.py"))
MATCHERS = {
    "self attribute": m.Attribute(value=m.Name("self"), attr=m.Name()),
    "call": m.Call(),
    "names and strings": m.Name() | m.SimpleString(),
    "stores to self": m.Assign(targets=[m.AssignTarget(m.Attribute(value=m.Name("self")))]),
    "binding targets": m.AssignTarget() | m.AnnAssign() | m.For() | m.AsName(),
    "matmul": m.BinaryOperation(operator=m.MatrixMultiply()),
    "a predicate": m.Call(func=m.MatchIfTrue(lambda func: isinstance(func, cst.Attribute))),
}


@pytest.fixture(scope="module")
def modules() -> dict[str, cst.Module]:
    return {path.name: cst.parse_module(path.read_text()) for path in FIXTURES}


@pytest.mark.parametrize("matcher", MATCHERS.values(), ids=MATCHERS.keys())
def test_findall_finds_what_libcst_finds(matcher: m.BaseMatcherNode, modules: dict[str, cst.Module]) -> None:
    assert len(modules) > 20
    found_any = False
    for name, module in modules.items():
        # A module, and a class within one: a tree that is not a module's root.
        classes = [statement for statement in module.body if isinstance(statement, cst.ClassDef)]
        for tree in [module, *classes[:1]]:
            expected = m.findall(tree, matcher)
            found = findall(tree, matcher)
            assert sorted(map(id, found)) == sorted(map(id, expected)), (name, type(tree).__name__)
            found_any = found_any or bool(found)
    assert found_any
