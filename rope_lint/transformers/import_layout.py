"""The blank lines between a generated transformers file's header comments and its first import, as transformers'
modular converter writes them.

The converter writes a generated file as the modular source's header comments, then the imports the file needs, each
statement with the blank lines that stood above it in the file it was taken from, then the code. An import the
modular source has is taken from there, and the modular source's imports come first; ruff sorts the block afterwards
but keeps what stands above it. So when a fix adds an import to a modular source, or to a generated file whose
modular source has it, the gap above the import block of every file that source generates may change: a file edited
by the fix may need its gap changed, and a file the fix did not touch may need one too.

The model is approximate: a file whose gap it does not reproduce before the fix is left alone.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from functools import lru_cache

from rope_lint import banner
from rope_lint.files import resolved
from rope_lint.prefilter.candidates import first_line
from rope_lint.transformers import generated


def generated_files(modular: str) -> Iterator[str]:
    """The files beside `modular` (a `modular_*.py`) whose banner names it: `modeling_*`, `configuration_*`,
    `processing_*`, `image_processing_*`, ..."""
    folder = os.path.dirname(modular)
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name.endswith(".py") and not banner.is_modular_source(name) and os.path.isfile(path):
            text = generated.file_text(path)
            if banner.modular_source(path, text) == resolved(modular):
                yield path


def laid_out(before: tuple[str, str], after: tuple[str, str]) -> str | None:
    """The generated file's text after a fix (`after`: its text and its modular source's), with the gap above its
    import block that the converter would write; None where that is the text already, or where the model does not
    reproduce the file before the fix (`before`: the same two texts, unfixed)."""
    (generated_before, modular_before), (generated_after, modular_after) = before, after
    if import_gap(generated_before) != converter_gap(generated_before, modular_before):
        return None
    wanted = converter_gap(generated_after, modular_after)
    if wanted is None or wanted == import_gap(generated_after):
        return None
    return with_gap(generated_after, wanted)


def import_gap(text: str) -> int | None:
    """The blank lines right above the first top-level import; None without an import."""
    found = _first_import(text)
    return None if found is None else _blank_above(text.splitlines(), found - 1)


def converter_gap(generated_text: str, modular_text: str) -> int | None:
    """The gap the converter writes above the generated file's imports: the blank lines above the modular source's
    first statement (the end of its header), and those above the first import of the modular source, in its order,
    that the generated file has too, where that import is not the first statement. None when the generated file has
    none of the modular source's imports: its first import then comes from a parent model's file."""
    tree = _head(modular_text)
    here = set().union(*map(_key, _imports(_head(generated_text))))
    if tree is None or not tree.body or not here:
        return None
    lines = modular_text.splitlines()
    first_statement = first_line(tree.body[0])
    header_blank = _blank_above(lines, first_statement - 1)
    for node in _imports(tree):
        if _key(node) & here:
            line = first_line(node)
            return header_blank + (0 if line == first_statement else _blank_above(lines, line - 1))
    return None


def with_gap(text: str, gap: int) -> str:
    """`text` with `gap` blank lines right above its first top-level import."""
    found = _first_import(text)
    assert found is not None
    lines = text.splitlines(keepends=True)
    index = found - 1
    blank = _blank_above([line.rstrip("\r\n") for line in lines], index)
    ending = "\r\n" if lines[index].endswith("\r\n") else "\n"
    return "".join([*lines[: index - blank], *[ending] * gap, *lines[index:]])


def _imports(tree: ast.Module | None) -> list[ast.Import | ast.ImportFrom]:
    return [node for node in (tree.body if tree else []) if isinstance(node, ast.Import | ast.ImportFrom)]


def _key(node: ast.Import | ast.ImportFrom) -> set[tuple[str, int, str]]:
    """What an import statement binds, by module: the converter trims a statement to the names a file uses."""
    module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
    level = node.level if isinstance(node, ast.ImportFrom) else 0
    return {(module, level, f"{alias.name} as {alias.asname}") for alias in node.names}


def _first_import(text: str) -> int | None:
    imports = _imports(_head(text))
    return first_line(imports[0]) if imports else None


# A top-level definition, and a top-level import, by the start of its line.
_DEFINITION = re.compile(r"^(?:class|def|async[ \t]+def)[ \t]|^@", re.MULTILINE)
_IMPORT = re.compile(r"^(?:import|from)[ \t]", re.MULTILINE)


# Each text is read several times: a modular source once for each file that it generates, a generated file once for
# its gap and once for the converter's.
@lru_cache(maxsize=8)
def _head(text: str) -> ast.Module | None:
    """The module's top-level statements up to its first definition, where those are all that the layout reads (its
    first statement and every top-level import: no line after them starts with `import` or `from`), parsed alone:
    the whole text of a large file takes many times as long. The whole module otherwise."""
    definition = _DEFINITION.search(text)
    if definition is not None and not _IMPORT.search(text, definition.start()):
        # None where the cut fell inside a string: the whole file decides.
        head = generated.parsed_once(text[: definition.start()])
        if head is not None and head.body:
            return head
    return generated.parsed_text(text)


def release_cache() -> None:
    """Drop the heads kept for the layout of a fix's files: not read again, and a whole tree each, for some."""
    _head.cache_clear()


def _blank_above(lines: list[str], index: int) -> int:
    count = 0
    while index - count - 1 >= 0 and not lines[index - count - 1].strip():
        count += 1
    return count
