"""What one module of a package does with a public helper of another: the name it binds the helper to, and the
functions its calls of it sit in (`callers.PackageCallers` asks, module by module). Only the statements around the
helper's name are parsed.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator

from rope_lint.files import SOURCE_LIMIT, SourceFile, read_regular
from rope_lint.prefilter import candidates
from rope_lint.rules.analysis import enumerations
from rope_lint.rules.analysis.context import FileContext, FunctionNode, walk


def parsed_around(module: str, needles: tuple[str, ...], text: str | None) -> FileContext | bool | None:
    """The module parsed around `needles`, the first of them a name it must mention, from `text` where given; None
    where it does not mention it or cannot be read (its check says why), False where it does not parse."""
    try:
        if text is None:
            data = read_regular(module, SOURCE_LIMIT)
            if needles[0].encode() not in data:
                return None
            text = SourceFile.decode(module, data).text
        if needles[0] not in text:
            return None
        occurrences = candidates.Occurrences.of_text(text)
        tree = candidates.parse(text, occurrences, needles, None, module)
        return FileContext(module, text, tree, needles, occurrences)
    except OSError:
        return None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def binding(ctx: FileContext, name: str, helper_path: str, top: str) -> tuple[str | None, set[str]]:
    """The name under which the module can call the helper of `helper_path` (`name` or its alias in an import; None
    where it imports none, defines its own, or imports it from a module that defines one: transformers' and
    diffusers' models often keep their own copy of a helper), and the names it imports, of which a module may be
    one (`embeddings.helper(...)`)."""
    bound: str | None = None
    imported: set[str] = set()
    for statement in ctx.tree.body:
        if isinstance(statement, FunctionNode | ast.ClassDef) and statement.name == name:
            return None, imported
        if isinstance(statement, ast.Import):
            imported.update((alias.asname or alias.name).split(".")[0] for alias in statement.names)
        elif isinstance(statement, ast.ImportFrom):
            imported.update(alias.asname or alias.name for alias in statement.names)
            for alias in statement.names:
                source = _module_path(ctx.path, statement, top) if alias.name in (name, "*") else None
                if alias.name == "*" and source in (helper_path, None):
                    bound = name
                elif alias.name == name and not (source not in (helper_path, None) and _defines(source, name)):
                    bound = alias.asname or name
    return bound, imported


def _module_path(importer: str, statement: ast.ImportFrom, top: str) -> str | None:
    """The file that `from X import ...` in `importer` reads, where it is in the package; None elsewhere."""
    parts = (statement.module or "").split(".") if statement.module else []
    if statement.level:
        base = os.path.dirname(importer)
        for _ in range(statement.level - 1):
            base = os.path.dirname(base)
    elif parts and parts[0] == os.path.basename(top):
        base, parts = top, parts[1:]
    else:
        return None
    stem = os.path.join(base, *parts)
    for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
    return None


def _defines(path: str, name: str) -> bool:
    """Whether the module at `path` defines `name` at its top level."""
    try:
        data = read_regular(path, SOURCE_LIMIT)
    except OSError:
        return False
    return _definition(name).search(data) is not None


def _definition(name: str) -> re.Pattern[bytes]:
    return re.compile(rb"^(?:async[ \t]+)?(?:def|class)[ \t]+" + re.escape(name.encode()) + rb"\b", re.M)


def calls(ctx: FileContext, name: str, binding: tuple[str | None, set[str]]) -> list[frozenset[str]] | None:
    """For each call of the helper in the module, the module's public helpers that its running after construction
    rests on (`enumerations.function_runs_after`); None where a use may run at construction: a call at module level
    or in a class body, or the function passed as a value."""
    found: list[frozenset[str]] = []
    for use in _uses(ctx, name, binding):
        functions = list(ctx.enclosing_functions(use))
        after = enumerations.function_runs_after(ctx, functions[-1]) if functions else None
        if not _is_callee(ctx, use) or after is None:
            return None
        found.append(after)
    return found


def _uses(ctx: FileContext, name: str, binding: tuple[str | None, set[str]]) -> Iterator[ast.expr]:
    """The names and attributes by which the module reads the helper, other than as a type (`names_a_type`)."""
    bound, imported = binding
    statements = ctx.statements_with(tuple(n for n in (name, bound) if n))
    for node in (node for statement in statements for node in walk(statement)):
        named = isinstance(node, ast.Name) and node.id == bound and isinstance(node.ctx, ast.Load)
        attribute = (
            isinstance(node, ast.Attribute)
            and node.attr == name
            and isinstance(node.value, ast.Name)
            and node.value.id in imported
        )
        if (named or attribute) and not enumerations.names_a_type(node, ctx.parent):
            yield node


def _is_callee(ctx: FileContext, node: ast.expr) -> bool:
    call = ctx.parent(node)
    return isinstance(call, ast.Call) and call.func is node
