"""`codemods.nodes.findall`, with a shape (`like`), finds the nodes that LibCST's `m.findall` finds with the matcher of
the same shape, the same objects, on every fixture: the codemods ask it instead, as it is a few times faster, and
importing LibCST's matchers costs every process of a fix 0.17 s, which a fix no longer pays. `rules.edits.Transformer`,
the base of the fixes' and codemods' transformers, visits as LibCST's `CSTTransformer` does, without the per-attribute
hooks that none of them defines, and leaves unvisited the nodes in which none can lie that it has a method for."""

from __future__ import annotations

import importlib
import operator
import re
import subprocess
import sys
from pathlib import Path

import libcst as cst
import libcst.matchers as m
import pytest
from helpers import REPO
from rope_lint.codemods.nodes import Satisfies, Shape, findall, like, matches

from rope_lint.rules.edits import Transformer, _descendant_kinds, as_assigned_value

FIXTURES = sorted((Path(__file__).parents[1] / "fixtures").rglob("*.py"))
# Each shape, and LibCST's matcher of it.
SHAPES = {
    "self attribute": (
        like.Attribute(value=like.Name("self"), attr=like.Name()),
        m.Attribute(value=m.Name("self"), attr=m.Name()),
    ),
    "call": (like.Call(), m.Call()),
    "names and strings": (like.Name() | like.SimpleString(), m.Name() | m.SimpleString()),
    "stores to self": (
        like.Assign(targets=[like.AssignTarget(like.Attribute(value=like.Name("self")))]),
        m.Assign(targets=[m.AssignTarget(m.Attribute(value=m.Name("self")))]),
    ),
    "binding targets": (
        like.AssignTarget() | like.AnnAssign() | like.For() | like.AsName(),
        m.AssignTarget() | m.AnnAssign() | m.For() | m.AsName(),
    ),
    "matmul": (like.BinaryOperation(operator=like.MatrixMultiply()), m.BinaryOperation(operator=m.MatrixMultiply())),
    "a predicate": (
        like.Call(func=Satisfies(lambda func: isinstance(func, cst.Attribute))),
        m.Call(func=m.MatchIfTrue(lambda func: isinstance(func, cst.Attribute))),
    ),
    "a field of alternatives": (
        like.Call(func=like.Name("float") | like.Attribute(attr=like.Name("float") | like.Name("to"))),
        m.Call(func=m.Name("float") | m.Attribute(attr=m.Name("float") | m.Name("to"))),
    ),
    "a name of the sequence given": (
        like.Assign(targets=[like.AssignTarget(like.Name("inv_freq"))]),
        m.Assign(targets=[m.AssignTarget(m.Name("inv_freq"))]),
    ),
}


@pytest.fixture(scope="module")
def modules() -> dict[str, cst.Module]:
    return {path.name: cst.parse_module(path.read_text()) for path in FIXTURES}


@pytest.mark.parametrize(("shape", "matcher"), SHAPES.values(), ids=SHAPES.keys())
def test_findall_finds_what_libcst_finds(
    shape: Shape, matcher: m.BaseMatcherNode, modules: dict[str, cst.Module]
) -> None:
    assert len(modules) > 20
    found_any = False
    for name, module in modules.items():
        # A module, and a class within one: a tree that is not a module's root.
        classes = [statement for statement in module.body if isinstance(statement, cst.ClassDef)]
        for tree in [module, *classes[:1]]:
            expected = m.findall(tree, matcher)
            found = findall(tree, shape)
            assert sorted(map(id, found)) == sorted(map(id, expected)), (name, type(tree).__name__)
            found_any = found_any or bool(found)
    assert found_any


def test_a_shape_matches_a_fields_value_as_libcsts_matcher_does() -> None:
    """A node, or any value a field holds: a missing value, a sentinel, a string, a list."""
    call = cst.parse_expression("torch.arange(n).to(x.device)")
    assert isinstance(call, cst.Call)
    values = [call, call.func, call.args, call.args[0].value, call.args[0].keyword, call.args[0].comma, None, "to"]
    for shape, matcher in SHAPES.values():
        for value in values:
            assert matches(value, shape) is m.matches(value, matcher), (shape, value)
    assert matches(call, like.Call(func=like.Attribute(attr=like.Name("to")), args=[like.Arg()]))
    assert not matches(call, like.Call(args=[]))
    with pytest.raises(TypeError, match="Name has the fields value, lpar, rpar"):
        like.Name(valu="x")


def test_a_fix_imports_neither_libcsts_matchers_nor_its_codemod_commands(tmp_path: Path) -> None:
    """A fix that rewrites a rotary class imports the codemods, and neither `libcst.matchers` (0.17 s to import) nor
    `libcst.codemod`, which imports it."""
    rotary = tmp_path / "rotary.py"
    rotary.write_text((REPO / "fixtures" / "hazards" / "rotary_cache.py").read_text())
    script = (
        "import sys\n"
        "from rope_lint.cli import main\n"
        "try:\n"
        "    main(['fix', '--unsafe-fixes', '--select', 'RPL2', sys.argv[1]])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(name for name in sys.modules if name.startswith(('libcst.matchers', 'libcst.codemod'))))\n"
        "print(sorted(name for name in sys.modules if name.startswith('rope_lint.codemods.')))\n"
    )
    command = [sys.executable, "-c", script, str(rotary)]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    imported, codemods = run.stdout.splitlines()[-2:]
    assert imported == "[]", imported
    assert "rope_lint.codemods.rope_tables" in codemods and "rope_lint.codemods.rope_autocast" in codemods
    assert rotary.read_text() != (REPO / "fixtures" / "hazards" / "rotary_cache.py").read_text()


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


# Python's syntax beyond what the fixtures and rope-lint's own code write.
SYNTAX = """\
import a.b as c
from . import d
@decorator(1)
async def f(x: int, /, *args: str, y=..., **kwargs) -> None:
    global g
    async with a as (b, c), d:
        async for item in await x:
            yield (z := item)
    match x:
        case [1, *rest] | {"k": _} if rest:
            pass
        case Point(x=0) as p:
            del p
    try:
        raise E from None
    except* (E, F) as group:
        nonlocal_value = lambda q, *, r=2: q if r else -q
    finally:
        assert x, f"{x!r:>{width}} {y=}"
    return [*a], {**b}, {i for i in c if i}, {k: v for k, v in d}, a[1:2, ::3], b @ c, not a < b <= c
"""


def test_a_nodes_descendants_are_of_the_kinds_that_its_fields_allow(modules: dict[str, cst.Module]) -> None:
    """What `Transformer` leaves unvisited rests on `_descendant_kinds`, read from LibCST's annotations: every node
    of every fixture, of rope-lint's own code and of a module of the rest of Python's syntax holds only nodes of
    those kinds."""
    own = {path.name: cst.parse_module(path.read_text()) for path in sorted((REPO / "rope_lint").rglob("*.py"))}

    def kinds_inside(node: cst.CSTNode, name: str) -> set[type]:
        inside = {kind for child in node.children for kind in {type(child), *kinds_inside(child, name)}}
        assert inside <= _descendant_kinds(type(node)), (name, type(node).__name__)
        return inside

    seen = set()
    for name, module in {**modules, **own, "syntax": cst.parse_module(SYNTAX)}.items():
        seen |= kinds_inside(module, name)
    assert {cst.Match, cst.MatchAs, cst.TryStar, cst.NamedExpr, cst.FormattedStringExpression, cst.Await} <= seen


def test_a_transformer_leaves_unvisited_what_holds_no_node_it_has_a_method_for() -> None:
    """LibCST rebuilds each node it visits. For a transformer with a method for calls only, the nodes in which no
    call can lie (a number, a comma, a comment) are the very objects they were, and the calls are rewritten as
    LibCST's transformer rewrites them."""

    def renaming(base: type) -> type:
        class Renaming(base):  # type: ignore[misc, valid-type]
            def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
                return updated_node.with_changes(func=cst.Name("g"))

        return Renaming

    module = cst.parse_module("f(a, b)\nx = [1, 2.0]  # two\n")
    ours, theirs = module.visit(renaming(Transformer)()), module.visit(renaming(cst.CSTTransformer)())
    assert ours.code == theirs.code == "g(a, b)\nx = [1, 2.0]  # two\n"

    def leaves(tree: cst.Module) -> list[cst.CSTNode]:
        line = tree.body[1]
        assert isinstance(line, cst.SimpleStatementLine) and isinstance(line.body[0], cst.Assign)
        assert isinstance(line.body[0].value, cst.List)
        first = line.body[0].value.elements[0]
        return [first.value, first.comma, line.trailing_whitespace]

    assert all(map(operator.is_, leaves(ours), leaves(module)))
    assert not any(map(operator.is_, leaves(theirs), leaves(module)))


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


@pytest.mark.parametrize(
    ("argument", "assigned"),
    [
        ("1.0\n    / (base ** steps)", "(1.0\n    / (base ** steps))"),  # a line break only brackets allow
        ("t := make()", "(t := make())"),
        ("1.0 / (\n    base ** steps\n)", "1.0 / (\n    base ** steps\n)"),  # its own brackets hold the break
        ("torch.ones(n)", "torch.ones(n)"),
    ],
)
def test_a_value_lifted_out_of_a_call_is_parenthesized_only_where_it_must_be(argument: str, assigned: str) -> None:
    call = cst.parse_expression(f"register(\n    {argument},\n)")
    assert isinstance(call, cst.Call)
    value = as_assigned_value(call.args[0].value)
    code = cst.Module([]).code_for_node(value)
    assert code == assigned
    compile(f"x = {code}\n", "<assigned>", "exec")
