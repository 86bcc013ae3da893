"""`codemods.nodes.findall` finds the nodes that LibCST's `m.findall` finds, the same objects, on every fixture: the
codemods ask it instead, as it is a few times faster. `rules.edits.Transformer`, the base of the fixes' and codemods'
transformers, visits as LibCST's `CSTTransformer` does, without the per-attribute hooks that none of them defines."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import libcst as cst
import libcst.matchers as m
import pytest
from rope_lint.codemods.nodes import findall

from rope_lint.rules.edits import Transformer

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


def _recording(base: type) -> type:
    """A transformer on `base` that records what it is called with and rewrites names, skipping class bodies."""

    class Recording(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[tuple[str, str]] = []

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            self.calls.append(("visit", node.name.value))
            return False

        def visit_Name(self, node: cst.Name) -> None:
            self.calls.append(("visit", node.value))

        def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
            self.calls.append(("leave", original_node.value))
            return updated_node.with_changes(value=updated_node.value.upper())

        def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
            self.calls.append(("leave", original_node.name.value))
            return updated_node

    return Recording


def test_a_transformer_visits_and_rewrites_as_libcsts_does(modules: dict[str, cst.Module]) -> None:
    for name, module in modules.items():
        ours, theirs = _recording(Transformer)(), _recording(cst.CSTTransformer)()
        assert module.visit(ours).code == module.visit(theirs).code, name
        assert ours.calls == theirs.calls, name
    assert any("class " in module.code for module in modules.values())


def test_no_transformer_defines_a_per_attribute_hook() -> None:
    """`Transformer` never calls `visit_<Node>_<attribute>` or `leave_<Node>_<attribute>`: none may define one."""
    for module in ("rope_lint.codemods.rope_autocast", "rope_lint.codemods.rope_tables", "rope_lint.fix.apply"):
        importlib.import_module(module)  # their transformers are Transformer's subclasses

    def subclasses(kind: type) -> list[type]:
        return [kind, *(found for sub in kind.__subclasses__() for found in subclasses(sub))]

    transformers = subclasses(Transformer)
    assert {"_Fixes", "_TableStores", "_RotaryClassRewrite", "_AutocastOff"} <= {t.__name__ for t in transformers}
    hooks = [
        f"{t.__name__}.{name}"
        for t in transformers
        for name in vars(t)
        if re.fullmatch(r"(visit|leave)_[A-Z][A-Za-z]*_\w+", name)
    ]
    assert hooks == []
