"""The one place where a fix's module names are resolved: by scope, as the compiler resolves them.

A fix writes names of modules (`torch.logaddexp`, `torch.int64`, `math.ceil`, `F.softplus`) that detection chose from
the file's imports. Where the code a fix lands in binds that name to something else (a parameter, a local assigned
later, a class attribute, a comprehension variable, a module-level rebinding), or declares it `global`/`nonlocal`
(which a use before the declaration turns into a SyntaxError), the name is written through a fresh alias instead,
`import torch as _torch`, which nothing in the file binds otherwise. The imports to add are collected here too, and
placed by `with_imports`, below any `__future__` import and the module docstring.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import Counter
from typing import NamedTuple

import libcst as cst
from libcst.metadata import ClassScope, GlobalScope, Scope

from rope_lint.prefilter.candidates import first_line, parse_outline
from rope_lint.rules.analysis.context import (
    imported_only_lazily,
    packages_imported_at_module_level,
    physical_lines,
    walk,
)

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Bindings(NamedTuple):
    """What a file binds anywhere, read in one walk of its tree."""

    meant: dict[str, str]  # the module each imported name means, the last import winning
    redirected: set[str]  # names rebound in a scope that does not own them: `global`, `nonlocal`, `:=`
    bound: Counter[str]  # how often each name is bound anywhere: more than at module level means a scope binds it
    read: set[str]  # the names read anywhere


class ScopeNeeded(Exception):
    """A fix applied without scopes wrote a module name that a scope of the file binds: apply it again with them."""


class ImportedLazily(Exception):
    """A fix needs a module-level import of a module that the file imports only inside functions (a module that
    must import without it): the fix is not made."""


class ModuleNames:
    """What one file binds, read from its stdlib syntax tree, and the imports its fixes need. What the file binds below
    module level is read when a fix first asks: a file whose fixes are all class codemods never does."""

    def __init__(self, source: str, tree: ast.Module) -> None:
        self._source, self._tree = source, tree
        # Every module-level binding of a name: the module an import binds it to, or None for any other binding.
        self.module_level: dict[str, list[str | None]] = {}
        for statement in tree.body:
            for name, qualified in _module_level_bindings(statement):
                self.module_level.setdefault(name, []).append(qualified)
        self._aliases: dict[str, str] = {}
        self.imports: set[tuple[str, str | None]] = set()  # (module, alias or None) to add

    @property
    def meant(self) -> dict[str, str]:
        """The module each imported name means. Detection reads the file's imports wherever they are, the last one
        winning: what a fix's name was meant to be."""
        return self._anywhere.meant

    @functools.cached_property
    def _anywhere(self) -> _Bindings:
        meant: dict[str, str] = {}
        redirected: set[str] = set()
        bound: list[str] = []
        read: set[str] = set()
        # Tested by exact type, a set lookup: a parsed tree's nodes are of the `ast` classes themselves.
        for node in walk(self._tree):
            kind = type(node)
            if kind is ast.Name:  # most nodes: one test for them (a name read binds nothing)
                if type(node.ctx) is ast.Load:
                    read.add(node.id)
                else:
                    bound.append(node.id)
            elif kind in _BINDING_TYPES:
                bound += [name for name, _ in _bindings(node)]
                if kind is ast.Import or kind is ast.ImportFrom:
                    for name, qualified in _import_bindings(node):
                        if qualified is not None:
                            meant[name] = qualified
            elif kind is ast.Global or kind is ast.Nonlocal:
                redirected.update(node.names)
            elif kind is ast.NamedExpr and isinstance(node.target, ast.Name):
                redirected.add(node.target.id)
        return _Bindings(meant, redirected, Counter(bound), read)

    @functools.cached_property
    def _taken(self) -> set[str]:
        """Every identifier the text spells: what a fresh alias must not be."""
        return set(_IDENTIFIER.findall(self._source))

    def resolved(
        self,
        original: cst.CSTNode,
        fixed: cst.CSTNode,
        scope: Scope | None,
        adds: str | None,
        scopes_known: bool = True,
    ) -> cst.CSTNode:
        """`fixed`, the replacement a rule's fix made for `original`, with each module name it introduced written so
        that it reaches that module from `scope`; `adds` is the module the fix asked to import where the file has none.
        The imports this needs are added to `imports`. Without `scopes_known` (the fix was applied without working
        them out, which costs more than the fix), raises `ScopeNeeded` where a name introduced is bound in a function,
        class, lambda or comprehension of the file: only then does the scope matter."""
        kept = {id(node) for node in _walk(original)}
        needed: set[tuple[str, str | None]] = set()  # added to `imports` only where the whole fix can be made
        for name in [n for n in _root_names(fixed) if id(n) not in kept]:
            meant = self.meant.get(name.value, name.value if name.value == adds else None)
            if meant is None:
                continue  # not a module name: an operand the fix rebuilt
            if not scopes_known and self._anywhere.bound[name.value] > len(self.module_level.get(name.value, [])):
                raise ScopeNeeded(name.value)
            reach = self._reach(name.value, meant, scope)
            top, _, rest = meant.partition(".")
            if reach != "local" and self._imported_lazily(top):
                raise ImportedLazily(top)
            if reach == "module" and not self.module_level.get(name.value):
                needed.add((meant, None))
            if reach is None:
                # The module's own name where the file spells it nowhere (a module imported under an alias inside a
                # function only, `import math as _math`): `import math` shadows nothing. Else a fresh alias.
                alias = top if self._unspelled(top) else self._alias(top)
                needed.add((top, None if alias == top else alias))
                fixed = fixed.deep_replace(name, cst.parse_expression(f"{alias}.{rest}" if rest else alias))
        self.imports |= needed
        return fixed

    def _imported_lazily(self, module: str) -> bool:
        """Whether the file imports `module` (or a module in it) only inside functions (`imported_only_lazily`)."""

        def within(qualified: str | None) -> bool:
            return qualified is not None and (qualified == module or qualified.startswith(module + "."))

        return any(within(qualified) for qualified in self.meant.values()) and imported_only_lazily(
            module, self._at_module_level
        )

    @functools.cached_property
    def _at_module_level(self) -> frozenset[str]:
        return packages_imported_at_module_level(self._tree)

    def _reach(self, name: str, meant: str, scope: Scope | None) -> str | None:
        """How `name` reaches the module `meant` from `scope`: "local" through an import of an enclosing function,
        "module" at module level (where it may still have to be imported), None where it does not."""
        if name in self._anywhere.redirected:
            return None
        current, innermost = scope, True
        while current is not None and not isinstance(current, GlobalScope):
            # A class body's names are seen from the class body only, not from the functions in it.
            if (innermost or not isinstance(current, ClassScope)) and name in current.assignments:
                bindings = [_cst_import_binding(a.node, name) for a in current.assignments[name]]
                return "local" if all(binding == meant for binding in bindings) else None
            current, innermost = current.parent, False
        bindings = self.module_level.get(name, [])
        if bindings:
            return "module" if all(binding == meant for binding in bindings) else None
        return "module" if name == meant else None

    def _unspelled(self, name: str) -> bool:
        """Whether the file neither binds, nor reads, nor declares `name` anywhere."""
        bindings = self._anywhere  # an import binds its name too
        return not (name in bindings.bound or name in bindings.read or name in bindings.redirected)

    def _alias(self, module: str) -> str:
        """A name for `module` that nothing in the file uses: `_torch`, else `_torch_1`, ..."""
        if module not in self._aliases:
            alias, number = f"_{module}", 0
            while alias in self._taken:
                number += 1
                alias = f"_{module}_{number}"
            self._taken.add(alias)
            self._aliases[module] = alias
        return self._aliases[module]


def with_imports(text: str, imports: set[tuple[str, str | None]]) -> tuple[str, int]:
    """`text` with an import line for each (module, alias), and the 0-based line they start at.

    They go after the file's leading imports, else at its first statement; never above the module docstring or a
    `from __future__` import, which must come first, nor above the comments before the first statement (a coding
    cookie, a licence). Lines are inserted as text: a whole-file LibCST round trip costs seconds on a large file.
    """
    lines = physical_lines(text)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    body = parse_outline(text).body  # the top-level statements: a whole parse of a large file costs 10 ms
    index = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        index = 1
    while index < len(body) and isinstance(body[index], ast.ImportFrom) and body[index].module == "__future__":
        index += 1
    while index < len(body) and isinstance(body[index], ast.Import | ast.ImportFrom):
        index += 1
    if index > 0:
        at = body[index - 1].end_lineno or body[index - 1].lineno
    elif body:
        at = first_line(body[0]) - 1
    else:
        at = len(lines)
    if 0 < at <= len(lines) and not lines[at - 1].endswith(("\n", "\r")):
        lines[at - 1] += newline
    added = [
        f"import {module} as {alias}" if alias else f"import {module}"
        for module, alias in sorted(imports, key=lambda pair: (pair[0], pair[1] or ""))
    ]
    # A blank line sets the imports apart from code right below them, as isort would.
    apart = [newline] if at < len(lines) and lines[at].strip() else []
    lines[at:at] = [line + newline for line in added] + apart
    return "".join(lines), at


def _walk(node: cst.CSTNode) -> list[cst.CSTNode]:
    found = [node]
    for child in node.children:
        found += _walk(child)
    return found


def _root_names(node: cst.CSTNode) -> list[cst.Name]:
    """The names a lookup starts from: not an attribute (`.int64`), a keyword (`dtype=`) or a parameter."""
    if isinstance(node, cst.Name):
        return [node]
    if isinstance(node, cst.Attribute):
        return _root_names(node.value)
    if isinstance(node, cst.Arg):
        return _root_names(node.value)
    found: list[cst.Name] = []
    for child in node.children:
        found += _root_names(child)
    return found


def _import_bindings(node: ast.Import | ast.ImportFrom) -> list[tuple[str, str | None]]:
    """The names an import binds, each with what it binds it to (None for a relative import)."""
    if isinstance(node, ast.Import):
        return [
            (alias.asname, alias.name) if alias.asname else (alias.name.partition(".")[0],) * 2 for alias in node.names
        ]
    module = node.module if not node.level else None
    return [(alias.asname or alias.name, module and f"{module}.{alias.name}") for alias in node.names]


def _module_level_bindings(statement: ast.stmt) -> list[tuple[str, str | None]]:
    """The module-level names a statement binds, with the module for an import and None for anything else; the names
    inside a function, class or lambda body are theirs, and a comprehension's are counted, to err on the safe side."""
    found: list[tuple[str, str | None]] = []
    pending: list[ast.AST] = [statement]
    while pending:
        node = pending.pop()
        found += _bindings(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            pending += [*node.decorator_list, *getattr(node, "bases", []), *getattr(node, "keywords", [])]
        elif not isinstance(node, ast.Lambda):
            pending += ast.iter_child_nodes(node)
    return found


# The nodes that `_bindings` finds a name bound by, besides `ast.Name`.
_BINDING_TYPES = frozenset(
    [
        *(ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.arg),
        *(ast.ExceptHandler, ast.MatchAs, ast.MatchStar, ast.MatchMapping),
    ]
)


def _bindings(node: ast.AST) -> list[tuple[str, str | None]]:
    """The names one node binds in the scope it is in (not counting its children), each with the module for an import
    and None for anything else."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        return _import_bindings(node)
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [(node.name, None)]
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        return [(node.id, None)]
    if isinstance(node, ast.arg):
        return [(node.arg, None)]
    if isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
        return [(node.name, None)]
    if isinstance(node, ast.MatchMapping) and node.rest:
        return [(node.rest, None)]
    return []


def _cst_import_binding(node: cst.CSTNode, name: str) -> str | None:
    """What an import statement binds `name` to; None for any other binding (an assignment, a parameter)."""
    if isinstance(node, cst.Import):
        for alias in node.names:
            dotted = cst.helpers.get_full_name_for_node(alias.name) or ""
            bound = alias.evaluated_alias or dotted.partition(".")[0]
            if bound == name:
                return dotted if alias.asname else bound
    elif isinstance(node, cst.ImportFrom) and not node.relative and not isinstance(node.names, cst.ImportStar):
        module = cst.helpers.get_full_name_for_node(node.module) if node.module else None
        for alias in node.names:
            if (alias.evaluated_alias or alias.evaluated_name) == name and module:
                return f"{module}.{alias.evaluated_name}"
    return None
