"""A generated transformers file's fixes written as its origins' fixes are, so that regeneration reproduces them.

And the other way round: a modular source's class gets the rope rewrite that the fix gives the class generated from it
(`carried_rewrites`), where its own methods read tables that it takes from a parent model's class.

A statement of a generated `modeling_X.py` is copied from its modular source, or from a parent model's file
(`transformers.generated.origin`). The fix edits that origin too, and writes there what the origin's imports spell
(`nn.functional.softplus` under `from torch import nn`); the generated file, which may import more (`import
torch.nn.functional as F`), must get the same spelling, or regenerating it from the fixed origin gives another file.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

from rope_lint import banner
from rope_lint.diagnostics import Diagnostic, Fix, FixSafety, Position
from rope_lint.engine import Settings, check_source
from rope_lint.fix.names import ModuleNames
from rope_lint.rules.analysis.rotary import TABLE_NEEDLES, is_table_name
from rope_lint.rules.payloads import ClassRewrite
from rope_lint.transformers import generated, import_layout

_ROOT_NAME = re.compile(r"(?<![\w.])([A-Za-z_]\w*)")
_CACHED_ORIGINS = 16  # the origins of one generated file: its modular source and a few parent models


def spelled_as_origins(path: Path, text: str, findings: list[Diagnostic], settings: Settings) -> list[Diagnostic]:
    """`findings` of the file `path` (text `text`), each fix replaced by the fix of the same finding at its origin
    where the two spell a name differently and the origin's spelling means the same here. Unchanged for a file that
    is not generated, a class codemod (which rewrites every copy alike), or a finding without a match."""
    if banner.modular_source(path, text) is None:
        return findings
    origins: dict[str, list[Diagnostic]] = {}
    here: dict[str, str] | None = None  # what the file's imported names mean
    lines = generated.text_lines(text)
    result = []
    for finding in findings:
        fix = finding.fix
        found = None
        if fix is not None and not isinstance(fix.payload, ClassRewrite):
            found = generated.origin(path, text, finding.start.line)
        if fix is None or found is None or found.line is None or found.path == str(path):
            result.append(finding)
            continue
        if found.path not in origins and len(origins) < _CACHED_ORIGINS:
            origins[found.path] = _checked_origin(found.path, generated.file_text(found.path), settings)
        checked = origins.get(found.path, [])
        origin_lines = generated.text_lines(generated.file_text(found.path))
        shift = _indent(origin_lines[found.line - 1]) - _indent(lines[finding.start.line - 1])
        twin = next(
            (
                other
                for other in checked
                if other.code == finding.code
                and other.start == (found.line, finding.start.column + shift)
                and other.fix is not None
            ),
            None,
        )
        if twin is not None and twin.fix != fix:
            here = here or _meanings(text, generated.parsed_text(text))
            there = _meanings_of_origin(generated.file_text(found.path))
            same_meaning = all(here.get(name) == there.get(name) for name in _roots(twin.fix.payload))
            # Only a difference of spelling: a twin found by its text in another model's class may be other code
            # (a `dim` proven integral here and not there, so rewritten otherwise).
            if same_meaning and _meaning(twin.fix.payload, there) == _meaning(fix.payload, here):
                finding = finding._replace(fix=twin.fix)
        result.append(finding)
    return result


# A whole tree's generated files share a few origins (Llama's modeling file, a model's modular source): each is checked
# once in a process, not once for every file copied from it. Keyed on the text, as `generated.parsed_text` is; its
# findings are only read. `release_caches` empties it.
@lru_cache(maxsize=64)
def _checked_origin(path: str, text: str, settings: Settings) -> list[Diagnostic]:
    """The origin's findings."""
    return check_source(path, text, settings)


# What an origin's imported names mean: read only where a twin's fix is spelled otherwise, which few are, since it
# parses the whole origin. Keyed on the text, as `_checked_origin` is.
@lru_cache(maxsize=16)
def _meanings_of_origin(text: str) -> dict[str, str]:
    return _meanings(text, generated.parsed_text(text))


def _meanings(text: str, tree: ast.Module | None) -> dict[str, str]:
    return ModuleNames(text, tree or ast.Module([], [])).meant


def release_caches() -> None:
    """Drop the checked origins and the syntax trees that `generated` and the import layout keep: after a fix's map
    and its layout they are not read again."""
    _checked_origin.cache_clear()
    _meanings_of_origin.cache_clear()
    generated.release_caches()
    import_layout.release_cache()


def carried_rewrites(path: Path, text: str, findings: list[Diagnostic]) -> list[Diagnostic]:
    """For a modular source (`path`, text `text`): a rope rewrite of each class without one among `findings` whose
    methods read a table (`self.inv_freq`, `getattr(self, f"{layer_type}_inv_freq")`) where a parent model's class it
    subclasses stores tables. The fix of that parent
    keeps the table on the CPU, and the class generated from this one reads it through its copy on the input's
    device (`codemods/rope_tables.py`, step 5); regeneration copies the methods from here, so they must read it the
    same way. Not findings of their own: nothing is reported or counted for them."""
    # A class can only read a table whose name the text spells: a text without one is not parsed (a whole parse of a
    # modular source costs milliseconds, and four in five hold no table).
    if (
        not banner.is_modular_source(path)
        or not any(needle in text for needle in TABLE_NEEDLES)
        or (tree := generated.parsed_text(text)) is None
    ):
        return []
    rewritten = {d.fix.payload.class_name for d in findings if d.fix and isinstance(d.fix.payload, ClassRewrite)}
    carried = []
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef) or cls.name in rewritten:
            continue
        # `self.inv_freq`, or a name given as a string: `getattr(self, f"{layer_type}_inv_freq")`.
        names = {
            node.attr if isinstance(node, ast.Attribute) else node.value
            for node in ast.walk(cls)
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self")
            or (isinstance(node, ast.Constant) and isinstance(node.value, str))
        }
        # The parents' code only where the class reads a table: finding it parses the parents' files.
        if any(is_table_name(name) for name in names) and any(
            is_table_name(code) for code in generated.inherited_classes(path, text, cls.name)
        ):
            start, end = Position(cls.lineno, 0), Position(cls.end_lineno or cls.lineno, 0)
            message = "reads the tables of a parent model's class, which the fix of that class moves"
            fix = Fix(FixSafety.UNSAFE, ClassRewrite("rope_tables", cls.name))
            carried.append(Diagnostic(str(path), "RPL202", "rope-buffer-downcast", message, start, end, fix))
    return carried


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _roots(payload: tuple | None) -> set[str]:
    """The names that the code written by a fix payload starts its lookups from (`nn` of `nn.functional.softplus`)."""
    return {name for value in payload or () if isinstance(value, str) for name in _ROOT_NAME.findall(value)}


def _meaning(payload: tuple | None, meanings: dict[str, str]) -> tuple:
    """The payload with each name it starts a lookup from replaced by what the file's imports make it mean."""
    return tuple(
        _ROOT_NAME.sub(lambda match: meanings.get(match.group(1), match.group(1)), value)
        if isinstance(value, str)
        else value
        for value in payload or ()
    )
