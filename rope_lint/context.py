"""What a rule sees of one file: its syntax tree, its imports, and where each call lives.

Built once per file from stdlib `ast`, so that every rule shares one walk. Names are resolved through the
file's imports (`import torch as t`, `from torch import arange`), never by their text alone.
"""

from __future__ import annotations

import ast
import bisect
import functools
import re
from collections import defaultdict
from collections.abc import Iterator

from rope_lint.diagnostics import Diagnostic, Fix, Position

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


class FileContext:
    def __init__(self, path: str, source: str, tree: ast.Module, triggers: tuple[str, ...]) -> None:
        self.path = path
        self.source = source
        self.tree = tree
        self.lines = source.splitlines()
        self.parents: dict[ast.AST, ast.AST] = {}
        self.imported_names: dict[str, str] = {}
        self._calls: list[ast.Call] = []
        # Calls by attribute name, whatever the receiver: the method spelling of a tensor op (`x.exp()`), which no
        # import resolves.
        self._method_calls: dict[str, list[ast.Call]] = defaultdict(list)
        # Lines that mention a trigger or an import: only the statements around them are indexed, which keeps a
        # large file with a few candidates nearly as cheap as parsing it.
        self._line_starts = [0]
        for line in source.splitlines(keepends=True):
            self._line_starts.append(self._line_starts[-1] + len(line))
        self._marked_lines = self.lines_with((*triggers, "import"))
        self._index_statements(tree.body, tree)
        self._calls_by_name: dict[str, list[ast.Call]] = defaultdict(list)
        for call in self._calls:
            name = self.qualified_name(call.func)
            if name:
                self._calls_by_name[name].append(call)

    def _index_statements(self, statements: list[ast.stmt], parent: ast.AST) -> None:
        for statement in statements:
            self.parents[statement] = parent
            first = bisect.bisect_left(self._marked_lines, statement.lineno)
            if first == len(self._marked_lines) or self._marked_lines[first] > (statement.end_lineno or 0):
                continue
            for child in ast.iter_child_nodes(statement):
                self.parents[child] = statement
                if isinstance(child, ast.stmt):
                    self._index_statements([child], statement)
                elif isinstance(child, ast.excepthandler | ast.match_case):
                    for part in ast.iter_child_nodes(child):
                        self.parents[part] = child
                    self._index_statements(child.body, child)
                else:
                    self._index_expression(child)
            self._record(statement)

    def _index_expression(self, expression: ast.AST) -> None:
        for node in ast.walk(expression):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
            self._record(node)

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

    # Names
    def qualified_name(self, node: ast.AST) -> str | None:
        """`t.arange` -> "torch.arange" when `import torch as t`; None for anything not rooted in an import."""
        if isinstance(node, ast.Name):
            return self.imported_names.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualified_name(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

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
        """The numbers of the lines that contain any of `needles`, in order: one regex scan of the source."""
        numbers: list[int] = []
        for match in _needle_pattern(needles).finditer(self.source):
            number = bisect.bisect_right(self._line_starts, match.start())
            if not numbers or numbers[-1] != number:
                numbers.append(number)
        return numbers

    def statements_with(self, needles: tuple[str, ...]) -> list[ast.stmt]:
        """The top-level statements whose text contains any of `needles`: where a rule's search can start."""
        lines = self.lines_with(needles)
        found = []
        for statement in self.tree.body:
            first = bisect.bisect_left(lines, statement.lineno)
            if first < len(lines) and lines[first] <= (statement.end_lineno or statement.lineno):
                found.append(statement)
        return found

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

    def diagnostic(self, rule: type, node: ast.expr, message: str, fix: Fix | None = None) -> Diagnostic:
        return Diagnostic(
            path=self.path,
            code=rule.code,
            name=rule.name,
            message=message,
            start=self.position(node.lineno, node.col_offset),
            end=self.position(node.end_lineno or node.lineno, node.end_col_offset or node.col_offset),
            fix=fix,
        )


@functools.cache
def _needle_pattern(needles: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(map(re.escape, needles)))
