"""Files that transformers generates from a `modular_*.py` source, and where a finding in one is really written.

A generated `modeling_X.py` carries a banner naming its modular source (`banner`). Its code is either written in
that source (the same statements, in a class of the same name), or pulled in from a model the source imports from: a
class the source subclasses without overriding the statement, or one it does not mention at all, which the generator
copies from the parent with the model's name put in. An edit to a generated file only lasts if that origin gets it
too.
"""

from __future__ import annotations

import ast
import itertools
import os
import re
from array import array
from collections import namedtuple
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import NamedTuple

from rope_lint import TYPE_CHECKING
from rope_lint.banner import generated_text, is_modular_source, modular_source
from rope_lint.engine import Settings, check_source
from rope_lint.files import SOURCE_LIMIT, Excludes, discover, input_status, read_regular, resolved
from rope_lint.prefilter.candidates import parse_outline
from rope_lint.rules.analysis.context import physical_lines

if TYPE_CHECKING:
    from rope_lint.files import FilePath

# Compiles on first use, by `re`'s cache: most runs never split a class's name.
_CAMEL_BOUNDARY = r"(?<=[a-z0-9])(?=[A-Z])"
DEFINITIONS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
Definition = ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


class Origin(namedtuple("Origin", ("path", "line", "inherited_from", "via"), defaults=(None, ()))):
    """Where a generated statement comes from: the modular source, or a parent model's file that it inherits from."""

    __slots__ = ()
    path: str
    line: int | None
    inherited_from: str | None  # the parent's class or function, when the statement comes from a parent (default None)
    # The generated parent files the statement passes through on its way from `path`, nearest first (default none):
    # a regeneration of each from its own origin must give it too.
    via: tuple[str, ...]

    def describe(self, generated: FilePath, modular: str) -> str:
        where = os.path.relpath(self.path, os.path.dirname(generated)) + (f":{self.line}" if self.line else "")
        if self.inherited_from is None:
            return f"generated from {where}"
        return f"generated from {os.path.basename(modular)}, which inherits {self.inherited_from} from {where}"


def origin(path: FilePath, text: str, line: int) -> Origin | None:
    """Where the statement at `line` of the generated file `path` is written; None for a hand-written file."""
    modular = modular_source(path, text, _is_file)
    if modular is None:
        return None
    statement = text_lines(text)[line - 1].strip()
    enclosing = _enclosing_definition(text, line)
    tree = _outline(modular)
    if tree is None:
        return Origin(modular, None)
    node = _definition(modular, enclosing.name) if enclosing else None
    if node is not None:
        found = _find_line(modular, statement, node)
        if found:
            return Origin(modular, found)
        bases = [base.id for base in node.bases if isinstance(base, ast.Name)] if isinstance(node, ast.ClassDef) else []
        return _from_parents(modular, tree, bases, statement) or Origin(modular, node.lineno)
    if enclosing is not None:
        # Not in the source at all: the generator copied it from a parent model, a class with the model's name put
        # in, a function as it was.
        kind = same_kind(enclosing.name, modular, tree) if isinstance(enclosing, ast.ClassDef) else [enclosing.name]
        return _from_parents(modular, tree, kind, statement) or Origin(modular, None)
    return Origin(modular, _find_line(modular, statement, tree))


class OriginNotes(NamedTuple):
    """Where the statements that a generated file's findings start on are written, by line, as a finding's message
    names it (`Origin.describe`); and what that depends on: each file read or looked for on the way, with its status
    before (`files.input_status`), by which the result cache answers a later run with the same notes."""

    notes: dict[int, str]
    inputs: dict[str, list[int] | None]


def origin_notes(path: str, lines: Iterable[int]) -> OriginNotes:
    """The notes of the lines `lines` of the file `path`, read afresh: none for a file that transformers does not
    generate."""
    global _inputs
    _inputs = inputs = {}
    try:
        text = file_text(path)
        modular = modular_source(path, text, _is_file)
        if modular is None:
            return OriginNotes({}, inputs)
        found = ((line, origin(path, text, line)) for line in lines)
        return OriginNotes({line: o.describe(path, modular) for line, o in found if o is not None}, inputs)
    finally:
        _inputs = None


# The files that `origin_notes` has read or looked for, while it runs.
_inputs: dict[str, list[int] | None] | None = None


def _noted(path: str) -> str:
    """`path`, among the inputs of the notes being found (by absolute path, as the result cache knows files), with its
    status before it is read."""
    if _inputs is not None:
        absolute = os.path.abspath(path)
        if absolute not in _inputs:
            _inputs[absolute] = input_status(absolute)
    return path


def _is_file(path: str) -> bool:
    return os.path.isfile(_noted(path))


def with_origins(files: list[FilePath], settings: Settings) -> tuple[list[FilePath], list[str]]:
    """`files`, and for each generated file among them its modular source and the parent files that its findings
    come from, so that a fix edits them all and a regeneration gives the edited file; and the folders those lie in,
    under which a fix may write too. Only files of the generated file's transformers package are added (or, outside
    one, its modular source beside it): a crafted import that climbs out of the package adds nothing."""
    seen = {resolved(path) for path in files}
    extra: list[FilePath] = []
    roots: set[str] = set()
    complete: dict[str, bool] = {}  # by package: whether `files` holds all of it, so that nothing can be added
    pending = list(files)
    while pending:  # a generated parent added on the way brings its own origins
        path = pending.pop(0)
        text = generated_text(path)
        modular = modular_source(path, text) if text else None
        if text is None or modular is None:
            continue
        root = package_root(resolved(path)) or os.path.dirname(resolved(path))
        if root not in complete:
            complete[root] = all(resolved(module) in seen for module in discover([root], Excludes([], root)))
        if complete[root]:
            continue  # a whole tree: its origins are among the files already, and checking it to find them is waste
        origins = {modular}
        for finding in check_source(str(path), text, settings):
            found = origin(path, text, finding.start.line)
            origins |= {found.path, *found.via} if found else set()
        for source in sorted(origins):
            real = resolved(source)
            if real not in seen and _within(real, root):
                seen.add(real)
                extra.append(source)
                pending.append(source)
                roots.add(root)
    return [*files, *extra], sorted(roots)


def inherited_classes(path: FilePath, text: str, name: str) -> list[str]:
    """The code of the parent models' classes that regeneration merges into the class `name` of `path` (whose text is
    `text`): a modular source's, or a generated file's through its modular source. These are the bases of the modular
    class that it imports from another model's file, first base first; the class takes the members it does not
    define from them, so a rewrite of the class must agree with theirs. Empty for any other class or file."""
    modular = str(path) if is_modular_source(path) else modular_source(path, text)
    tree = outlined_text(text) if modular == str(path) else _outline(modular) if modular else None
    if modular is None or tree is None:
        return []
    own = next((node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name), None)
    parents = parent_files(modular, tree)
    found = []
    for base in own.bases if own else []:
        parent = parents.get(base.id) if isinstance(base, ast.Name) else None
        node = _definition(parent, base.id) if parent else None
        if isinstance(node, ast.ClassDef):
            found.append(definition_code(file_text(parent), node))
    return found


def definition_code(text: str, node: Definition) -> str:
    """The code of the top-level definition `node` of `text` from its `def` or `class` on, as
    `ast.get_source_segment` gives it. `node` is the outline's (`outlined_once`), which ends at its cut body's `pass`:
    where the code ends on its last line, only a parse of its lines alone tells. Empty where they do not parse."""
    lines = text_lines(text)  # split once: `get_source_segment` on the whole text would split it on every call
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    code = "".join(lines[first : last + 1]) if 0 <= first <= last < len(lines) else ""
    parsed = parsed_once(code)
    return (ast.get_source_segment(code, parsed.body[0]) or "") if parsed and parsed.body else ""


# The lines of a text as Python numbers them (`physical_lines`), for the last 64 texts: a generated file's findings
# and the statements they come from are looked up line by line, many in the same few files.
text_lines = lru_cache(maxsize=64)(physical_lines)


def line_starts(text: str) -> array[int]:
    """Where each line of the text starts, as the parser numbers lines, and where the text ends: line n is
    `text[starts[n - 1] : starts[n]]`."""
    starts = array("i", [0])  # 4 bytes an offset: a source file is read only up to 50 MB
    starts.extend(itertools.accumulate(map(len, physical_lines(text))))
    return starts


def package_root(path: str) -> str | None:
    """The `transformers` package folder that the resolved `path` is or lies in (a checkout's `src/transformers` or an
    unpacked wheel), or None."""
    for folder in [path, *_folders_above(path)]:
        if os.path.basename(folder) == "transformers" and os.path.isfile(os.path.join(folder, "__init__.py")):
            return folder
    return None


def _within(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip(os.sep) + os.sep)


def file_text(path: str) -> str:
    try:
        return read_regular(_noted(path), SOURCE_LIMIT).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def parsed_once(text: str) -> ast.Module | None:
    """The text's syntax tree, or None where it does not parse; not kept (`parsed_text` keeps the last 16)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def outlined_once(text: str) -> ast.Module | None:
    """The syntax tree of the text's top-level statements, each definition's body cut to a `pass` on its last line
    (`candidates.parse_outline`: a fifth of a whole parse's cost), or None where those statements do not parse: what the
    origins of a generated file's statements and the regeneration check read of the files around it."""
    try:
        return parse_outline(text)
    except (SyntaxError, ValueError):
        return None


# A whole tree's findings point at the same few files (Llama's rotary class): read and parse each once. The cache
# keys on the text, so that a file that a fix rewrote is read afresh. The last 16: keeping 64 saved parsing 7 MiB in
# transformers 5.24.0's fix (about 2 s of CPU) and raised its peak by 36 MiB.
parsed_text = lru_cache(maxsize=16)(parsed_once)
# An outline keeps about an eighth of a file's lines: the files that a whole tree's origins point at are each outlined
# once.
outlined_text = lru_cache(maxsize=64)(outlined_once)


def release_caches() -> None:
    """Drop the cached syntax trees and lines: after a fix's map they are not read again, and hold 70 MB."""
    parsed_text.cache_clear()
    outlined_text.cache_clear()
    text_lines.cache_clear()


def _outline(path: str) -> ast.Module | None:
    return outlined_text(file_text(path))


def _enclosing_definition(text: str, line: int) -> Definition | None:
    """The top-level definition of `text` that holds `line`, body cut (`outlined_once`)."""
    tree = outlined_text(text)
    for node in tree.body if tree else []:
        if isinstance(node, DEFINITIONS) and node.lineno <= line <= (node.end_lineno or node.lineno):
            return node
    return None


def _find_line(path: str, statement: str, node: ast.AST) -> int | None:
    """The first line within `node` whose text, stripped, is `statement`."""
    lines = text_lines(file_text(path))
    first, last = getattr(node, "lineno", 1), getattr(node, "end_lineno", None) or len(lines)
    for number in range(first, last + 1):
        if lines[number - 1].strip() == statement:
            return number
    return None


def parent_files(modular: str, tree: ast.Module) -> dict[str, str]:
    """Each name the modular source imports from another model's module (`from ..llama.modeling_llama import X`, or
    `from ..detr.image_processing_detr import Y`): its file."""
    names: dict[str, str] = {}
    folders = _folders_above(modular)
    for node in tree.body:
        # `from ..llama.modeling_llama import`, `from ...models.llama.modeling_llama import`, or absolute
        if not (isinstance(node, ast.ImportFrom) and node.module and node.level != 1):
            continue
        if node.level == 0 and not node.module.startswith("transformers.models."):
            continue
        up = node.level - 1 if node.level else 2  # models/X/modular_X.py: [2] is transformers/
        if up > 2 or up >= len(folders):  # above the package: not another model's module
            continue
        parts = node.module.split(".")[0 if node.level else 1 :]
        path = os.path.join(folders[up], *parts) + ".py"
        if os.path.basename(os.path.dirname(os.path.dirname(path))) == "models" and _is_file(path):
            names.update({alias.asname or alias.name: path for alias in node.names})
    return names


def same_kind(
    class_name: str, modular: str, tree: ast.Module, class_names: Callable[[str], list[str]] | None = None
) -> list[str]:
    """Classes of the parent models named like `class_name` but for the model prefix (`LlamaRotaryEmbedding` for
    `MistralRotaryEmbedding`), longest shared suffix first. `class_names` gives a parent file's top-level class names
    (from disk unless given); `tree` needs only the modular source's imports."""
    parents = parent_files(modular, tree)
    candidates = list(parents)
    for path in dict.fromkeys(parents.values()):  # in import order, not a set's: the same answer on every run
        candidates += (class_names or _class_names)(path)
    words = re.split(_CAMEL_BOUNDARY, class_name)
    for cut in range(1, len(words)):
        suffix = "".join(words[cut:])
        matching = [name for name in dict.fromkeys(candidates) if name.endswith(suffix) and name != class_name]
        if matching:
            return matching
    return []


def _from_parents(modular: str, tree: ast.Module, bases: list[str], statement: str) -> Origin | None:
    parents = parent_files(modular, tree)
    files = set(parents.values())
    for base in bases:
        # An imported base is looked up in its file; what the generator pulled in, in every parent file.
        for path in [parents[base]] if base in parents else sorted(files):
            node = _definition(path, base)
            found = _find_line(path, statement, node) if node else None
            if found:
                # A generated parent got the statement from its own origin: follow it there.
                deeper = origin(path, file_text(path), found)
                if deeper is not None and deeper.line is not None:
                    via = (path, *deeper.via) if deeper.path != path else deeper.via
                    return Origin(deeper.path, deeper.line, deeper.inherited_from or base, via)
                return Origin(path, found, inherited_from=base)
    return None


def _class_names(path: str) -> list[str]:
    tree = _outline(path)
    return [node.name for node in tree.body if isinstance(node, ast.ClassDef)] if tree else []


def _definition(path: str, name: str) -> Definition | None:
    """The first top-level definition `name` of the file `path`, from its outline: its lines, decorators and bases,
    its body cut (`outlined_once`)."""
    tree = _outline(path)
    return next((n for n in tree.body if isinstance(n, DEFINITIONS) and n.name == name), None) if tree else None


def _folders_above(path: str) -> list[str]:
    """The folders that hold `path`, nearest first, as `Path.parents` lists them."""
    folders = [os.path.dirname(path)]
    while os.path.dirname(folders[-1]) != folders[-1]:
        folders.append(os.path.dirname(folders[-1]))
    return folders
