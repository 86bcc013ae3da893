"""`context.walk`, which every rule walks a node's syntax with: `ast.walk`'s nodes in its order, walked once per node
while a file is checked, and remembered no longer."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import REPO

from rope_lint.rules.analysis import context
from rope_lint.rules.analysis.context import walk, walks_remembered

FIXTURES = sorted((REPO / "fixtures").rglob("*.py"))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda path: str(path.relative_to(REPO / "fixtures")))
def test_walk_gives_ast_walks_nodes_in_its_order(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in [tree, *tree.body]:
        assert walk(node) == list(ast.walk(node))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda path: str(path.relative_to(REPO / "fixtures")))
def test_child_nodes_gives_ast_iter_child_nodes_in_its_order(path: Path) -> None:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        assert context.child_nodes(node) == list(ast.iter_child_nodes(node))


def test_a_node_is_walked_once_while_a_file_is_checked_and_forgotten_after() -> None:
    tree = ast.parse("class A:\n    def f(self):\n        return self.x + 1\n")
    method = tree.body[0].body[0]
    assert walk(method) is not walk(method)  # outside a check nothing is remembered
    with walks_remembered():
        first = walk(method)
        assert walk(method) is first
        with walks_remembered():  # a check inside a check remembers its own walks
            assert walk(method) is not first
        assert walk(method) is first
    assert context._remembered_walks is None
