"""The shapes of LibCST nodes that the codemods look for, and the nodes of a tree that have one.

`like.Call(func=like.Name("setattr"))` is the shape of a `Call` whose `func` is the name `setattr`, as LibCST's matcher
`m.Call(func=m.Name("setattr"))` is. A field not named holds anything; a positional value is the node's first field.
A named field holds a string equal to the one given, a node of the shape given, nodes that each have the shape in
its place of a list, or a value that `Satisfies(test)`; `|` joins shapes. These are the parts of LibCST's matchers that
the codemods use: importing `libcst.matchers` takes 0.17 s, in each process of a fix, and `libcst.codemod` imports it,
so the rewrites import neither (their LibCST commands are in `commands`).

`findall` answers what `m.findall` does, a few times faster. `m.findall` visits the tree, and a LibCST visit builds
every node it passes anew; the codemods ask it thousands of times a tree (13,367 times in a fix of transformers 5.24.0,
a fifth of the fix's time). This reads the nodes' fields instead, and tries the shape only on nodes of its types.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import libcst as cst

# A LibCST node type, with what some of its fields hold.
_Option = tuple[type, tuple[tuple[str, Any], ...]]


@dataclass(frozen=True)
class Shape:
    """Nodes of any of `options`: each a LibCST node type (the exact type, as a matcher's), with what some of its fields
    hold."""

    options: tuple[_Option, ...]

    def __or__(self, other: Shape) -> Shape:
        return Shape(self.options + other.options)

    @functools.cached_property
    def kinds(self) -> frozenset[type]:
        """The node types of the options, tested by a node's exact type: LibCST's node classes derive from an
        abstract base class, which makes `isinstance` cost several times a set lookup."""
        return frozenset(kind for kind, _ in self.options)


@dataclass(frozen=True)
class Satisfies:
    """A field's value for which `test` is true."""

    test: Callable[[Any], object]


class _Shapes:
    """`like.<Node>(...)`: the shape of a `libcst.<Node>`."""

    def __getattr__(self, name: str) -> Callable[..., Shape]:
        kind = getattr(cst, name)
        names = [field.name for field in dataclasses.fields(kind)]

        def shape(*values: Any, **fields: Any) -> Shape:
            if len(values) > len(names) or not fields.keys() <= set(names):
                raise TypeError(f"{name} has the fields {', '.join(names)}")
            return Shape(((kind, (*zip(names[: len(values)], values, strict=True), *fields.items())),))

        setattr(self, name, shape)  # looked up here once
        return shape


like = _Shapes()


def matches(node: object, shape: Shape) -> bool:
    """Whether `node` (a node, or any field's value) has `shape`."""
    return any(
        type(node) is kind and all(_holds(getattr(node, name), wanted) for name, wanted in fields)
        for kind, fields in shape.options
    )


def _holds(value: object, wanted: object) -> bool:
    if isinstance(wanted, Shape):
        return matches(value, wanted)
    if isinstance(wanted, Satisfies):
        return bool(wanted.test(value))
    if isinstance(wanted, list):
        return isinstance(value, list | tuple) and len(value) == len(wanted) and all(map(_holds, value, wanted))
    return value == wanted


def findall(tree: cst.CSTNode, shape: Shape) -> list[cst.CSTNode]:
    """The nodes of `tree`, itself included, that have `shape`. In the order of the nodes' fields, which is not always
    the order of the source."""
    kinds = shape.kinds
    return [node for node in _descendants(tree) if type(node) in kinds and matches(node, shape)]


def _descendants(tree: cst.CSTNode) -> list[cst.CSTNode]:
    found = []
    pending = [tree]
    is_node = _IS_NODE
    while pending:
        node = pending.pop()
        found.append(node)
        children = []
        for value in _fields(type(node))(node):
            kind = type(value)
            if kind is list or kind is tuple:
                children += [item for item in value if is_node[type(item)]]
            elif is_node[kind]:
                children.append(value)
        pending += reversed(children)
    return found


class _NodeTypes(dict[type, bool]):
    """Whether a type is a LibCST node type, worked out once per type."""

    def __missing__(self, kind: type) -> bool:
        self[kind] = answer = issubclass(kind, cst.CSTNode)
        return answer


_IS_NODE = _NodeTypes()
_FIELD_GETTERS: dict[type, Callable[[cst.CSTNode], tuple]] = {}


def _fields(kind: type) -> Callable[[cst.CSTNode], tuple]:
    """A function that gives a node of type `kind` the values of its fields, as a tuple."""
    if kind not in _FIELD_GETTERS:
        names = [field.name for field in dataclasses.fields(kind)]
        get = operator.attrgetter(*names) if names else (lambda node: ())
        _FIELD_GETTERS[kind] = get if len(names) != 1 else (lambda node: (get(node),))
    return _FIELD_GETTERS[kind]
