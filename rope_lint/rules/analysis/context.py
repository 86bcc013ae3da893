"""What a rule sees of one file: its syntax tree, its imports, and where each call lives.

Built once per file from stdlib `ast`, so that every rule shares one walk. Names are resolved through the
file's imports (`import torch as t`, `from torch import arange`), never by their text alone.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import functools
import io
import sys
from collections import defaultdict, deque
from collections.abc import Callable, Collection, Hashable, Iterator

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import Diagnostic, Position
from rope_lint.prefilter import candidates

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
if TYPE_CHECKING:
    from typing import TypeGuard, TypeVar

    from rope_lint.rules.base import Flagged

    T = TypeVar("T")


class FileContext:
    def __init__(
        self,
        path: str,
        source: str,
        tree: ast.Module,
        triggers: tuple[str, ...],
        occurrences: candidates.Occurrences | None = None,
    ) -> None:
        self.path = path
        self.source = source
        self.tree = tree
        self.occurrences = occurrences or candidates.Occurrences.of_text(source)
        self._derived: dict[tuple[Hashable, ...], object] = {}
        self.lines = [line.rstrip("\r\n") for line in physical_lines(source)]
        self.parents: dict[ast.AST, ast.AST] = {}
        self.imported_names: dict[str, str] = {}
        # The parameters of the functions and lambdas indexed: a name among them may be a module a caller hands over.
        self._parameter_names: set[str] = set()
        self._calls: list[ast.Call] = []
        # Calls by attribute name, whatever the receiver: the method spelling of a tensor op (`x.exp()`), which no
        # import resolves.
        self._method_calls: dict[str, list[ast.Call]] = defaultdict(list)
        # Lines that mention a trigger or an import: only the statements around them are indexed, which keeps a
        # large file with a few candidates nearly as cheap as parsing it.
        self._marked_lines = self.occurrences.marked_lines(triggers)
        self._index_statements(tree.body, tree)
        self._calls_by_name: dict[str, list[ast.Call]] = defaultdict(list)
        for call in self._calls:
            name = self.qualified_name(call.func)
            if name:
                self._calls_by_name[name].append(call)

    def _index_statements(self, statements: list[ast.stmt], parent: ast.AST) -> None:
        for statement in statements:
            self.parents[statement] = parent
            if not _spans_any(self._marked_lines, statement):
                continue
            for child in child_nodes(statement):
                self.parents[child] = statement
                if isinstance(child, ast.stmt):
                    self._index_statements([child], statement)
                elif isinstance(child, ast.excepthandler | ast.match_case):
                    for part in child_nodes(child):
                        self.parents[part] = child
                    self._index_statements(child.body, child)
                elif _spans_any(self._marked_lines, child):  # a signature or a condition: only where marked
                    self._index_expression(child)
            self._record(statement)

    def _index_expression(self, expression: ast.AST) -> None:
        pending = deque([expression])  # in `ast.walk` order, with one visit of each node where it took two
        while pending:
            node = pending.popleft()
            self._record(node)
            for child in child_nodes(node):
                self.parents[child] = node
                pending.append(child)

    def _record(self, node: ast.AST) -> None:
        if isinstance(node, ast.Call):
            self._calls.append(node)
            if isinstance(node.func, ast.Attribute):
                self._method_calls[node.func.attr].append(node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.imported_names[alias.asname] = alias.name
                else:
                    # `import torch.nn` binds `torch`, and `torch.nn.X` resolves through it.
                    top = alias.name.split(".")[0]
                    self.imported_names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                self.imported_names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, FunctionNode | ast.Lambda):
            self._parameter_names.update(_parameters(node))

    # Names
    def qualified_name(self, node: ast.AST) -> str | None:
        """`t.arange` -> "torch.arange" when `import torch as t`; None for anything not rooted in an import."""
        if isinstance(node, ast.Name):
            return self.imported_names.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualified_name(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def _read_as_parameter(self, name: ast.Name) -> bool:
        """Whether `name` is read in the body of a function or lambda that has a parameter of its name (`def f(torch):
        return torch.arange(n)`): it binds the module that the caller hands over, as Python scopes it. A default, an
        annotation or a decorator is read outside the function."""
        child, parent = name, self.parents.get(name)
        while parent is not None:
            if isinstance(parent, FunctionNode | ast.Lambda) and name.id in _parameters(parent):
                body = [parent.body] if isinstance(parent, ast.Lambda) else parent.body
                if any(child is statement for statement in body):
                    return True
            child, parent = parent, self.parents.get(parent)
        return False

    def module_alias(self, module: str) -> str | None:
        """The name a module is bound to in this file, for writing new references to it in a fix."""
        for local, qualified in self.imported_names.items():
            if qualified == module:
                return local
        return None

    def calls(self, qualified_name: str) -> list[ast.Call]:
        return self._calls_by_name.get(qualified_name, [])

    def method_calls(self, attribute: str) -> list[ast.Call]:
        """Calls spelled `<receiver>.<attribute>(...)`, for any receiver: `x.exp()`, but also `torch.exp(x)`.

        Telling a tensor method from a module function is the caller's part (see `logdomain.is_method_spelling`).
        """
        return self._method_calls.get(attribute, [])

    # Structure
    def lines_with(self, needles: tuple[str, ...]) -> list[int]:
        """The numbers of the lines that contain any of `needles`, in order."""
        return self.occurrences.lines(needles)

    def statements_with(self, needles: tuple[str, ...]) -> list[ast.stmt]:
        """The top-level statements whose text contains any of `needles`: where a rule's search can start."""
        lines = self.lines_with(needles)
        found = []
        for statement in self.tree.body:
            if _spans_any(lines, statement):
                found.append(statement)
        return found

    def parsed_around(self, needles: tuple[str, ...]) -> tuple[ast.Module, candidates.Occurrences]:
        """The file's statements that mention any of `needles`, parsed alone (`candidates.parse`), and the
        occurrences they were found by: every occurrence, whatever the rules' screens keep. Raises what parsing
        raises."""
        return candidates.parse(self.source, self._every_occurrence, needles, None, self.path), self._every_occurrence

    @functools.cached_property
    def _every_occurrence(self) -> candidates.Occurrences:
        """The occurrences of needles in the file's bytes, unscreened: one for all the parses around names, which
        share the search of each needle and, with the rules' parse, the split into statements."""
        return self.occurrences.unscreened()

    def derived(self, compute: Callable[..., T], *arguments: Hashable) -> T:
        """`compute(self, *arguments)`, computed once per file: what several rules, or several questions, derive
        alike (the rotary classes; the attributes a method assigns)."""
        key = (compute, *arguments)
        if key not in self._derived:
            self._derived[key] = compute(self, *arguments)
        return self._derived[key]  # type: ignore[return-value]

    def walk_near(self, scope: ast.AST, needles: tuple[str, ...]) -> Iterator[ast.AST]:
        """`ast.walk(scope)`, leaving out the statements whose lines hold none of `needles`: they cannot hold what
        the caller looks for, and a large class is mostly such statements."""
        lines = self.lines_with(needles)
        pending = deque([scope])
        while pending:
            node = pending.popleft()
            yield node
            for child in child_nodes(node):
                if isinstance(child, ast.stmt) and not _spans_any(lines, child):
                    continue
                pending.append(child)

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(node)

    def enclosing_functions(self, node: ast.AST) -> Iterator[FunctionNode]:
        """The functions around a node, innermost first."""
        current = self.parents.get(node)
        while current is not None:
            if isinstance(current, FunctionNode):
                yield current
            current = self.parents.get(current)

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        current = self.parents.get(node)
        while current is not None:
            if isinstance(current, ast.ClassDef):
                return current
            current = self.parents.get(current)
        return None

    # Reporting
    def position(self, line: int, byte_column: int) -> Position:
        """ast counts columns in UTF-8 bytes; editors and LibCST count characters."""
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        if text.isascii():
            return Position(line, byte_column)
        return Position(line, len(text.encode("utf-8")[:byte_column].decode("utf-8", errors="ignore")))

    def diagnostic(self, flagged: Flagged) -> Diagnostic:
        """The finding a rule reported (`Rule.report`), with its path and the range of its node or statements; without
        its fix where the fix could not write the module names it needs there (`_fix_can_name_modules`)."""
        rule, node, last = flagged.rule, flagged.node, flagged.last or flagged.node
        fix = flagged.fix if flagged.fix is None or self._fix_can_name_modules(node) else None
        return Diagnostic(
            path=self.path,
            code=rule.code,
            name=rule.name,
            message=flagged.message,
            start=self.position(node.lineno, node.col_offset),
            end=self.position(last.end_lineno or last.lineno, last.end_col_offset or node.col_offset),
            fix=fix,
            rests_on_helpers=flagged.rests_on_helpers,
        )

    def _fix_can_name_modules(self, node: ast.AST) -> bool:
        """Whether a fix at `node` can write the modules it reads there (`torch.int64` beside `torch.arange`): not where
        a module's name is a parameter there (`def feather(n, torch)`, a module that a caller hands over) and the file
        imports that module only inside functions (`imported_only_lazily`, which the fix asks too). The fix would have
        to import it at module level, which such a file is written not to do (`fix.names.ImportedLazily`), and it writes
        no module name through a parameter."""
        if not self._parameter_names & self.imported_names.keys():
            return True
        handed_over = {
            self.imported_names[name.id].partition(".")[0]
            for name in walk(node)
            if isinstance(name, ast.Name)
            and name.id in self.imported_names
            and name.id in self._parameter_names
            and self._read_as_parameter(name)
        }
        at_module_level = self.derived(_packages_imported_at_module_level)
        return not any(imported_only_lazily(package, at_module_level) for package in handed_over)


def _packages_imported_at_module_level(ctx: FileContext) -> frozenset[str]:
    return packages_imported_at_module_level(ctx.tree)


def packages_imported_at_module_level(tree: ast.Module) -> frozenset[str]:
    """The top-level packages that the module's own code imports, in any of its blocks (`if`, `try`, `with`), but not
    in a function's or a class's body."""
    found: set[str] = set()
    pending = list(tree.body)
    while pending:
        statement = pending.pop()
        if isinstance(statement, ast.Import):
            found.update(alias.name.partition(".")[0] for alias in statement.names)
        elif isinstance(statement, ast.ImportFrom):
            if statement.module and not statement.level:
                found.add(statement.module.partition(".")[0])
        elif not isinstance(statement, FunctionNode | ast.ClassDef):
            pending += child_statements(statement)
    return frozenset(found)


def imported_only_lazily(package: str, at_module_level: Collection[str]) -> bool:
    """Whether a fix must not import `package`, a top-level package that the file imports, at module level: the
    module's own code imports it nowhere (`at_module_level`, from `packages_imported_at_module_level`), so the file
    imports it only inside functions, a module that must import without it. Never a package of the standard library
    (`import math as _math` in a helper): it imports wherever Python runs, so that its import inside functions is a
    matter of style, and one at module level costs nothing."""
    return package not in sys.stdlib_module_names and package not in at_module_level


def _parameters(function: FunctionNode | ast.Lambda) -> Iterator[str]:
    arguments = function.args
    for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]:
        if argument is not None:
            yield argument.arg


def physical_lines(text: str) -> list[str]:
    """The lines of `text` as Python numbers them, with their ends: split at `\\n`, `\\r\\n` and `\\r` only.
    `str.splitlines` also splits at a form feed and other separators, which the tokenizer takes for whitespace, so
    its line numbers drift from the syntax tree's after one."""
    return io.StringIO(text, newline="").readlines()


def _spans_any(lines: list[int], node: ast.AST) -> bool:
    """Whether any of the sorted `lines` lies within the node's lines; always for a node without lines."""
    start = getattr(node, "lineno", None)
    if start is None:  # `arguments`, operators: their parts say
        return True
    return any_line_within(lines, start, node.end_lineno or start)


def any_line_within(lines: list[int], first: int, last: int) -> bool:
    """Whether any of the sorted `lines` lies from line `first` to line `last`."""
    index = bisect.bisect_left(lines, first)
    return index < len(lines) and lines[index] <= last


# Each walked node's nodes, by the node's id (with the node, which keeps the id its own), while one file is checked
# (`walks_remembered`): the rules ask of the same class and the same methods many times (a rotary class's
# construction, each of its tables' stores), and walking was half of a file's check. Kept no longer than the file's
# check: findings that hold a node keep its tree, and a whole tree's fix held 100 MB more of walks.
_remembered_walks: dict[int, tuple[ast.AST, list[ast.AST]]] | None = None


@contextlib.contextmanager
def walks_remembered() -> Iterator[None]:
    """Within the block, `walk` walks each node once."""
    global _remembered_walks
    outer, _remembered_walks = _remembered_walks, {}
    try:
        yield
    finally:
        _remembered_walks = outer


def walk(node: ast.AST) -> list[ast.AST]:
    """The nodes of `ast.walk(node)`, in its order (breadth first, children in field order); within
    `walks_remembered`, walked once per node, so that the tree must not change there: the rules only read theirs."""
    remembered = _remembered_walks.get(id(node)) if _remembered_walks is not None else None
    if remembered is not None:
        return remembered[1]
    nodes = [node]
    for current in nodes:  # the list grows as it is read: a queue that keeps what it served
        nodes += child_nodes(current)
    if _remembered_walks is not None:
        _remembered_walks[id(node)] = node, nodes
    return nodes


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """`ast.iter_child_nodes(node)` as a list, in its order (by field): the rules walk trees node by node, and its two
    nested generators took a fifth of RPL201's time on the transformers 5.24.0 package (cProfile)."""
    children = []
    for field in node._fields:
        value = getattr(node, field, None)
        if isinstance(value, ast.AST):
            children.append(value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, ast.AST):
                    children.append(item)
    return children


def child_statements(statement: ast.stmt) -> list[ast.stmt]:
    """The statements of a compound statement's blocks, in order: its body, `else` and `finally`, then the bodies of
    its handlers and cases."""
    blocks = [getattr(statement, name, []) for name in ("body", "orelse", "finalbody")]
    blocks += [part.body for part in [*getattr(statement, "handlers", []), *getattr(statement, "cases", [])]]
    return [child for block in blocks for child in block]


def statements_holding(statements: list[ast.stmt], first: int, last: int) -> Iterator[list[ast.stmt]]:
    """Block by block from `statements` in: the statements whose lines, decorators included, hold lines `first` to
    `last` (1-based), each block that of the first of them; none past the innermost block that holds them."""
    while holding := [
        statement
        for statement in statements
        if candidates.first_line(statement) <= first and last <= (statement.end_lineno or statement.lineno)
    ]:
        yield holding
        statements = child_statements(holding[0])


# What a file written to be compiled with `torch.jit.script` uses, in its code or its comments.
_TORCHSCRIPT_MARKS = (
    "jit.script", "jit.Final", "jit.ignore", "jit.unused", "jit.is_scripting", "jit.export", "jit.interface",
)  # fmt: skip


def written_for_torchscript(source: str) -> bool:
    """Whether a file is written to be compiled with `torch.jit.script` (`torch.jit.Final`, `@torch.jit.ignore`,
    `torch.jit.is_scripting()`): a rewrite of its classes must compile there too. TorchScript takes only a constant
    device type in `torch.autocast` (RPL204's block names the input's), and no Python function such as the rope
    codemod's `_rope_table_on_device`."""
    return any(mark in source for mark in _TORCHSCRIPT_MARKS)


def is_self_attribute(node: ast.AST) -> TypeGuard[ast.Attribute]:
    """`self.<name>`."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
