"""Whether a fixed transformers tree still regenerates to itself: the regeneration-equivalence check (RPL905).

transformers' CI regenerates every `modeling_X.py` from its `modular_X.py` and fails on any difference, so an edit of
a generated file lasts only if regeneration from the (fixed) modular source and the parent models it imports gives
it back. This module models what regeneration copies, on the stdlib syntax tree (comments and formatting aside):

- a class or function that the modular source defines comes from there; a class it subclasses from a parent model's
  file is merged into it, the parent's members first, with the parent model's name replaced by this model's, and a
  member of its own that calls `super().<member>(...)` gets the parent's body in place of that call;
- a class or function that the modular source does not define was pulled in from a parent model's file: the one of
  the same kind (`LlamaRotaryEmbedding` for `MistralRotaryEmbedding`), renamed the same way.

The model is this project's own and approximate, so only what a fix broke is reported: a member of a generated file
whose modelled regeneration matched the file before the fix and differs after it, a member the fix changed whose
origin did not change, and a class whose regenerated members read a `self.X` attribute after the fix that none of
them (or a base in the file) defines, where that read was not undefined before.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import os
import re
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

from rope_lint import banner
from rope_lint.diagnostics import REGENERATION_DIFFERS, Diagnostic, Position
from rope_lint.engine import map_files
from rope_lint.files import resolved
from rope_lint.prefilter.candidates import first_line
from rope_lint.rules.analysis.context import is_self_attribute, walk
from rope_lint.rules.analysis.rotary import TABLE_ON_DEVICE
from rope_lint.transformers import generated

# A class's members: each method or class-level name, with its code and the file it comes from.
Members = dict[str, tuple[ast.stmt, str]]
_STORING_CALLS = ("register_buffer", "register_parameter", "register_module", "add_module")
_NAME_DEPTH = 8  # bases followed within a file: deeper than any real hierarchy, and a guard against a cycle


@dataclass(frozen=True)
class Violation:
    """A definition of a generated file that regeneration would not give back after the fix."""

    path: str  # the generated file
    line: int  # of the definition before the fix: the file is left as it was
    name: str  # `Class.member`, `Class` or `function`
    reason: str
    group: tuple[str, ...]  # the files whose fixes go or stay together: the generated file, its origins

    def finding(self) -> Diagnostic:
        message = (
            f"`{self.name}` is not what regeneration from its modular source gives after the fix ({self.reason}); "
            "transformers' modular converter would rewrite it, so the fix of "
            + ", ".join(dict.fromkeys(os.path.basename(path) for path in self.group))
            + " is not written"
        )
        position = Position(self.line, 0)
        return Diagnostic(_shown(self.path), REGENERATION_DIFFERS, "regeneration-differs", message, position, position)


class Span(NamedTuple):
    """Where a top-level definition lies in its file (1-based lines)."""

    first: int  # its first decorator's line, or `line`
    line: int  # the `def` or `class` line
    end: int
    bases: tuple[str, ...] | None  # a class's bases that are plain names; None for a function


class Outline(NamedTuple):
    """What the check reads of a whole file: its top-level definitions by name (the first of a name) and its `from`
    imports, from its top-level statements alone (`generated.outlined_once`). A file's definitions are parsed one at
    a time when the check reads them: a whole tree's syntax trees held at once took a gigabyte."""

    definitions: dict[str, Span]
    imports: ast.Module  # the top-level `from ... import` statements of other models' modules, for `parent_files`


def outline(text: str) -> Outline | None:
    """The text's outline, or None where its top-level statements do not parse (its definitions' bodies are parsed
    when they are read)."""
    tree = generated.outlined_once(text)
    if tree is None:
        return None
    definitions: dict[str, Span] = {}
    for node in tree.body:
        if isinstance(node, generated.DEFINITIONS) and node.name not in definitions:
            first = first_line(node)
            bases = (
                tuple(b.id for b in node.bases if isinstance(b, ast.Name)) if isinstance(node, ast.ClassDef) else None
            )
            definitions[node.name] = Span(first, node.lineno, node.end_lineno or node.lineno, bases)
    # Only the imports that can name another model's module (`..llama.modeling_llama`): a whole tree's others took
    # 25 MB.
    imports = [
        node
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.level != 1 and node.module and "." in node.module
    ]
    return Outline(definitions, ast.Module(imports, []))


class TreeView:
    """A transformers tree as it is on disk, but for the files in `texts` (resolved paths): the tree before a fix
    (original texts) or after it (fixed texts not written yet). `outlines` (by the text's digest) is shared by the
    views of one check, so that a file that the fix left alone is parsed once for both."""

    def __init__(self, texts: dict[str, str], outlines: dict[bytes, Outline | None]) -> None:
        self.texts = texts
        self._outlines = outlines
        self._outline_of: dict[str, Outline | None] = {}
        self._definitions: dict[tuple[str, str], ast.stmt | None] = {}
        self._line_starts: dict[str, array[int]] = {}
        self.renamed: dict[tuple[str, ...], ast.stmt | None] = {}  # parent definitions as renamed for a child
        self._normal: dict[int, tuple[ast.AST, str]] = {}  # by id, holding the node so that the id stays its own
        # Each path resolved once: `realpath` asks the system about every folder above the file, and the views asked
        # it again for each lookup in the same file (2 s of CPU in the fix of the transformers 5.24.0 package).
        self._real_paths: dict[str, str] = {}
        self._parents: dict[str, dict[str, str]] = {}

    def _real(self, path: str) -> str:
        if path not in self._real_paths:
            self._real_paths[path] = resolved(path)
        return self._real_paths[path]

    def text(self, path: str) -> str:
        real = self._real(path)
        return self.texts[real] if real in self.texts else generated.file_text(real)

    def outline(self, path: str) -> Outline | None:
        real = self._real(path)
        if real not in self._outline_of:
            text = self.text(real)
            # Shared by a digest of the text, not the text itself: a whole tree's texts held took 25 MB.
            digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
            if digest not in self._outlines:
                self._outlines[digest] = outline(text)
            self._outline_of[real] = self._outlines[digest]
        return self._outline_of[real]

    def parent_files(self, modular: str) -> dict[str, str]:
        """`generated.parent_files` of the modular source `modular` as this view has it: asked for each definition of
        each file that it generates, and each answer looks for files on disk."""
        if modular not in self._parents:
            found = self.outline(modular)
            self._parents[modular] = generated.parent_files(modular, found.imports) if found else {}
        return self._parents[modular]

    def definition(self, path: str, name: str) -> ast.stmt | None:
        """The first top-level definition `name` of `path`, with the file's line numbers, or None."""
        real = self._real(path)
        if (real, name) not in self._definitions:
            span = self.span(real, name)
            parsed = generated.parsed_once(self._between(real, span.first, span.end)) if span else None
            node = parsed.body[0] if parsed and parsed.body else None
            if node is not None and span is not None:
                ast.increment_lineno(node, span.first - 1)
            self._definitions[(real, name)] = node
        return self._definitions[(real, name)]

    def span(self, path: str, name: str) -> Span | None:
        """Where the first top-level definition `name` of `path` lies, or None."""
        found = self.outline(path)
        return found.definitions.get(name) if found else None

    def class_names(self, path: str) -> list[str]:
        found = self.outline(path)
        return [name for name, span in found.definitions.items() if span.bases is not None] if found else []

    def normal(self, node: ast.AST) -> str:
        """The code as regeneration must give it: docstrings aside, which the converter merges its own way."""
        if id(node) not in self._normal:
            self._normal[id(node)] = (node, _normal(node))
        return self._normal[id(node)][1]

    def segment(self, path: str, span: Span) -> str:
        """The code of a top-level definition of `path`, from its `def` or `class` line on, without parsing it."""
        return self._between(path, span.line, span.end)

    def _between(self, path: str, first: int, last: int) -> str:
        """Lines `first` to `last` of `path`. Each file's lines are kept as where they start: a string per line of a
        whole tree took 70 MB."""
        real = self._real(path)
        if real not in self._line_starts:
            self._line_starts[real] = generated.line_starts(self.text(real))
        starts = self._line_starts[real]
        return self.text(real)[starts[first - 1] : starts[min(last, len(starts) - 1)]]


def violations(before: dict[str, str], after: dict[str, str]) -> list[Violation]:
    """What the fix that turned each file of `before` (resolved path: text) into its text in `after` broke of
    regeneration: every generated file that changed, or whose modular source changed, is checked."""
    outlines: dict[bytes, Outline | None] = {}
    old, new = TreeView(before, outlines), TreeView(after, outlines)
    changed = [path for path in after if before.get(path) != after[path]]
    # Each file on its own, over all cores: the views' caches are a process's own, and a file's answer is its own.
    checked = map_files(partial(_file_violations, old=old, new=new), sorted(_generated_files(changed, new)))
    return [violation for found in checked for violation in found]


def checked_outcomes(texts: Sequence[tuple[str, str, str]], drop: Callable[[set[str], str], None]) -> list[Diagnostic]:
    """Check the fix of each (path, before, after), and drop the fixes of every group that breaks regeneration with
    `drop(paths, reason)`, until what is left breaks nothing: dropping a parent model's fix can break a child that
    followed it. The findings of every violation found, each once."""
    before = {resolved(path): old for path, old, _ in texts}
    after = {resolved(path): new for path, _, new in texts}
    shown = {resolved(path): path for path, _, _ in texts}
    found: dict[Violation, None] = {}
    while violated := violations(before, after):
        found.update(dict.fromkeys(violated))
        dropped = {
            path for violation in violated for path in violation.group if after.get(path, "") != before.get(path, "")
        }
        if not dropped:
            break
        drop({shown[path] for path in dropped}, "breaks regeneration from the modular source (RPL905)")
        for path in dropped:
            after[path] = before[path]
    return [violation.finding() for violation in found]


def _generated_files(changed: list[str], view: TreeView) -> set[str]:
    """The generated files among `changed`, and those whose modular source is among them."""
    found = set()
    for path in changed:
        text = view.text(path)
        if banner.modular_source(path, text) is not None:
            found.add(path)
        elif banner.is_modular_source(path):
            folder = os.path.dirname(path)
            for name in sorted(os.listdir(folder)):
                candidate = os.path.join(folder, name)
                if name.endswith(".py") and banner.modular_source(candidate, view.text(candidate)) == path:
                    found.add(candidate)
    return found


def _file_violations(path: str, old: TreeView, new: TreeView) -> list[Violation]:
    modular = banner.modular_source(path, new.text(path))
    before, after = old.outline(path), new.outline(path)
    if modular is None or before is None or after is None or new.outline(modular) is None:
        return []
    found: list[Violation] = []
    for name, span in after.definitions.items():
        previous_span = before.definitions.get(name)
        recipe_before, recipe_after = _recipe(old, modular, name), _recipe(new, modular, name)
        if previous_span is None or recipe_before is None or recipe_after is None:
            continue
        unchanged = old.segment(path, previous_span) == new.segment(path, span)
        if unchanged and _sources(old, modular, recipe_before) == _sources(new, modular, recipe_after):
            continue
        previous, node = old.definition(path, name), new.definition(path, name)
        if previous is None or node is None:
            continue
        expected_before = _expected(old, path, modular, recipe_before)
        expected_after = _expected(new, path, modular, recipe_after)
        if isinstance(node, ast.ClassDef) and isinstance(previous, ast.ClassDef):
            found += _class_violations(path, modular, node, previous, expected_before, expected_after, old, new)
        elif not isinstance(node, ast.ClassDef) and name in expected_before and name in expected_after:
            (want_before, _), (want_after, origin) = expected_before[name], expected_after[name]
            reason = _differs(new, previous, node, want_before, want_after)
            if reason:
                found.append(Violation(path, previous.lineno, name, reason, (path, modular, origin)))
    return found


def _class_violations(
    path: str,
    modular: str,
    node: ast.ClassDef,
    previous: ast.ClassDef,
    expected_before: Members,
    expected_after: Members,
    old: TreeView,
    new: TreeView,
) -> list[Violation]:
    found = []
    have_before, have_after = _members(previous, path), _members(node, path)
    changed = False
    for member, (code, _) in have_after.items():
        if member not in have_before or member not in expected_before or member not in expected_after:
            continue
        (want_before, _), (want_after, origin) = expected_before[member], expected_after[member]
        reason = _differs(new, have_before[member][0], code, want_before, want_after)
        changed = (
            changed
            or new.normal(want_before) != new.normal(want_after)
            or new.normal(have_before[member][0]) != new.normal(code)
        )
        if reason:
            line = have_before[member][0].lineno
            found.append(Violation(path, line, f"{node.name}.{member}", reason, (path, modular, origin)))
    if not changed:
        return found
    inherited_before = _defined_by_bases(node, old, path)
    inherited_after = _defined_by_bases(node, new, path)
    for members, members_before in ((expected_after, expected_before), (have_after, have_before)):
        undefined = _undefined_reads(members, inherited_after) - _undefined_reads(members_before, inherited_before)
        if undefined:
            origins = tuple(dict.fromkeys([path, modular, *(origin for _, origin in members.values())]))
            names = ", ".join(f"self.{name}" for name in sorted(undefined))
            reason = f"its members read {names}, which none of them defines"
            found.append(Violation(path, previous.lineno, node.name, reason, origins))
            break
    return found


def _differs(
    view: TreeView, have_before: ast.AST, have_after: ast.AST, want_before: ast.AST, want_after: ast.AST
) -> str | None:
    """Why the fixed member is not what regeneration gives, or None. Where the model of regeneration did not give the
    member before the fix either, only a change that its origin did not make is known to be lost."""
    normal = view.normal
    same_before = normal(have_before) == normal(want_before)
    if same_before and normal(have_after) != normal(want_after):
        return "its code differs from what its origin gives after the fix"
    if not same_before and normal(have_before) != normal(have_after) and normal(want_before) == normal(want_after):
        return "the fix changed it, and not its origin"
    return None


class _Recipe(NamedTuple):
    """Where regeneration takes a top-level definition from: the modular source's own definition of that name (or
    None), merged over the parent definitions (file, name in it, name in the child), first to last."""

    own: str | None  # the name, where the modular source defines it
    parents: tuple[tuple[str, str, str], ...]


def _recipe(view: TreeView, modular: str, name: str) -> _Recipe | None:
    """How regeneration gives the top-level `name` of a generated file from its modular source; None where the model
    cannot tell."""
    modular_outline = view.outline(modular)
    if modular_outline is None:
        return None
    parents = view.parent_files(modular)
    own = modular_outline.definitions.get(name)
    if own is not None:
        bases = [base for base in reversed(own.bases or ()) if base in parents]
        return _Recipe(name, tuple((parents[base], base, name) for base in bases))
    # Not in the modular source: pulled in from a parent model's file, renamed.
    if re.match(r"[A-Z]", name):
        candidates = generated.same_kind(name, modular, modular_outline.imports, view.class_names)
    else:
        candidates = [name]
    for candidate in candidates:
        for parent in dict.fromkeys(parents.values()):
            if view.span(parent, candidate) is not None:
                return _Recipe(None, ((parent, candidate, name),))
    return None


def _sources(view: TreeView, modular: str, recipe: _Recipe) -> list[str]:
    """The code that a recipe reads: what decides whether the fix changed a definition's origin."""
    read = [(modular, recipe.own), *((path, name) for path, name, _ in recipe.parents)]
    return [view.segment(path, span) if name and (span := view.span(path, name)) else "" for path, name in read]


def _expected(view: TreeView, path: str, modular: str, recipe: _Recipe) -> Members:
    """What regeneration gives for a top-level definition of the generated file `path`, following `recipe`: a
    function as one member named like it, a class as its members."""
    members: Members = {}
    for parent, name, new_name in recipe.parents:
        renamed = _renamed_definition(view, parent, name, new_name, path)
        if isinstance(renamed, ast.ClassDef):
            members.update(_members(renamed, parent))
        elif renamed is not None:
            members[new_name] = (renamed, parent)
    own = view.definition(modular, recipe.own) if recipe.own else None
    if isinstance(own, ast.ClassDef):
        for member, (code, origin) in _members(own, modular).items():
            inherited = members.get(member)
            members[member] = (_with_super_inlined(code, inherited[0]) if inherited else code, origin)
    elif own is not None:
        members[own.name] = (own, modular)
    return members


def _renamed_definition(view: TreeView, parent: str, name: str, new_name: str, generated_path: str) -> ast.stmt | None:
    """The top-level definition `name` of the parent model's file, as the child model's file gets it."""
    key = (parent, name, new_name, os.path.dirname(generated_path))
    if key not in view.renamed:
        span = view.span(parent, name)
        code = _renamed(view.segment(parent, span), _renames(name, new_name, parent, generated_path)) if span else ""
        parsed = generated.parsed_once(code)
        view.renamed[key] = parsed.body[0] if parsed and parsed.body else None
    return view.renamed[key]


def _renames(name: str, new_name: str, parent: str, generated_path: str) -> list[tuple[str, str]]:
    """The parent model's name and this model's, in each casing: the prefixes that the class names differ by (with
    their common ending cut), and the two models' folder names, in lower and upper case."""
    renames = []
    ending = 0
    while ending < min(len(name), len(new_name)) and name[-1 - ending] == new_name[-1 - ending]:
        ending += 1
    old_prefix, new_prefix = name[: len(name) - ending], new_name[: len(new_name) - ending]
    if old_prefix and old_prefix != new_prefix:
        renames.append((old_prefix, new_prefix))
    old_model = os.path.basename(os.path.dirname(parent))
    new_model = os.path.basename(os.path.dirname(generated_path))
    if old_model != new_model:
        renames += [(old_model, new_model), (old_model.upper(), new_model.upper())]
    return renames


def _renamed(code: str, renames: list[tuple[str, str]]) -> str:
    for old, new in renames:
        code = re.sub(rf"(?<![A-Za-z0-9]){re.escape(old)}" if old[:1].isupper() else re.escape(old), new, code)
    return code


def _members(cls: ast.ClassDef, origin: str) -> Members:
    members: Members = {}
    for statement in cls.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            members[statement.name] = (statement, origin)
        elif isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            if isinstance(statement.targets[0], ast.Name):
                members[statement.targets[0].id] = (statement, origin)
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            members[statement.target.id] = (statement, origin)
    return members


def _with_super_inlined(code: ast.stmt, inherited: ast.stmt) -> ast.stmt:
    """A member that calls `super().<member>(...)` as a statement or returns what it gives, with the inherited member's
    body in that place."""
    if not isinstance(code, ast.FunctionDef | ast.AsyncFunctionDef) or not isinstance(
        inherited, ast.FunctionDef | ast.AsyncFunctionDef
    ):
        return code
    body: list[ast.stmt] = []
    for statement in code.body:
        call = statement.value if isinstance(statement, ast.Expr | ast.Return) else None
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == code.name
            and isinstance(call.func.value, ast.Call)
            and isinstance(call.func.value.func, ast.Name)
            and call.func.value.func.id == "super"
        ):
            body += _without_docstring(inherited.body)
        else:
            body.append(statement)
    merged = copy.copy(code)
    merged.body = body
    return merged


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0] if body else None
    is_docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    return body[1:] if is_docstring and isinstance(first.value.value, str) else body


def _normal(node: ast.AST) -> str:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        node = copy.copy(node)
        node.body = _without_docstring(node.body)
    return ast.dump(node)


def _undefined_reads(members: Members, inherited: set[str]) -> set[str]:
    """The `self.X` attributes that the members read and none of them (nor `inherited`) defines."""
    defined = set(members) | inherited
    read: set[str] = set()
    for code, _ in members.values():
        stored, reads = _self_attributes(code)
        defined |= stored
        read |= reads
    return read - defined


def _self_attributes(code: ast.AST) -> tuple[set[str], set[str]]:
    """The attributes that `code` defines on `self` (assigned, registered, or set through `setattr`), and those it
    reads: `self.X`, `getattr(self, "X")`, or the rope codemod's read of a table's copy on a device. One walk, testing
    each node's exact type: a class's members are walked for each generated file that the fix changes."""
    stored, read = set(), set()
    for node in walk(code):
        kind = type(node)
        if kind is ast.Attribute:
            if is_self_attribute(node):
                (read if type(node.ctx) is ast.Load else stored).add(node.attr)
        elif kind is ast.Call and node.args:
            func, first = node.func, node.args[0]
            registers = isinstance(func, ast.Attribute) and func.attr in _STORING_CALLS
            sets = isinstance(func, ast.Name) and func.id == "setattr" and len(node.args) > 1
            name = node.args[1] if sets else first
            if (registers or sets) and isinstance(name, ast.Constant) and isinstance(name.value, str):
                stored.add(name.value)
            elif (name := _read_by_name(node)) is not None:
                read.add(name)
    return stored, read


def _read_by_name(node: ast.Call) -> str | None:
    """X of `getattr(self, "X")`, or of the rope codemod's read of a table's copy on a device."""
    if not (isinstance(node.func, ast.Name) and len(node.args) >= 2):
        return None
    owner, name = node.args[:2]
    reads = node.func.id == TABLE_ON_DEVICE or (node.func.id == "getattr" and len(node.args) == 2)  # no default
    if not reads or not (isinstance(owner, ast.Name) and owner.id == "self"):
        return None
    return name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else None


def _defined_by_bases(cls: ast.ClassDef, view: TreeView, path: str) -> set[str]:
    """What the bases of `cls` that its own file (`path` in `view`) defines define on `self`, and their bases', and
    so on."""
    classes = set(view.class_names(path))
    defined: set[str] = set()
    pending = [base.id for base in cls.bases if isinstance(base, ast.Name)]
    seen: set[str] = set()
    while pending and len(seen) < _NAME_DEPTH:
        name = pending.pop()
        base = view.definition(path, name) if name in classes else None
        if not isinstance(base, ast.ClassDef) or name in seen:
            continue
        seen.add(name)
        defined |= set(_members(base, "")) | _self_attributes(base)[0]
        pending += [parent.id for parent in base.bases if isinstance(parent, ast.Name)]
    return defined


def _shown(path: str) -> str:
    """The path relative to the working folder when it lies under it, as paths given on the command line print."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith(os.pardir) else relative
