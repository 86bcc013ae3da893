"""Verifying the changed files of a fix, one file at a time, before any is written.

For each file, the original and the fixed text are imported side by side (`loading`); then
- every rotary class the file defines (the probe's test, `probe.discover.rotary_classes_of`) is built both ways and
  compared, and run under the probe's conditions (`classes`); one the probe cannot build and read tables from is
  built and run as a module class is;
- every top-level function the fix changed is called both ways on arguments derived from its signature
  (`functions`);
- every top-level name whose assignment the fix changed is compared as a value;
- every changed module class that is not rotary (an `nn.Module` subclass) is built from its config class at small
  sizes and run on inputs derived from its forward's signature, both ways (`modules`), or reported as not built;
- the changed methods of a class that is not rotary are called as functions where they need no instance (static
  and class methods, and methods that read nothing of `self`); those that need one are covered by the module's
  line, and reported as not called in a class that is no module.
A file fails when any of these fails, or when its fixed text does not import where its original does.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import types
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from rope_lint import banner
from rope_lint.engine import map_files
from rope_lint.output.fix_report import FAILED, NOT_BUILT, NOT_CALLED, VERIFIED, Verification
from rope_lint.probe.build import describe
from rope_lint.probe.discover import quiet_model_code, rotary_classes_of
from rope_lint.verify.classes import check_class
from rope_lint.verify.compare import TOLERANCE, Incomparable, Mismatch, relative_difference
from rope_lint.verify.functions import check_function
from rope_lint.verify.loading import FIXED_SUFFIX, ORIGINAL_SUFFIX, load_sibling, unload
from rope_lint.verify.models import changed_rotary_classes
from rope_lint.verify.modules import check_module, is_module_class


def verify_changes(changes: Sequence[tuple[Path, str, str]]) -> list[Verification]:
    """What each changed file's check found, file by file in the order given, each file's lines by position.

    `changes` holds (path, original text, fixed text) for each file the fix would rewrite; nothing is written.
    """
    with _single_threaded(), quiet_model_code():
        # Spread over the cores when there are many files (a whole tree), as a check is.
        found = [line for lines in map_files(_verify_change, list(changes)) for line in lines]
    return _modular_classes_verified_as_generated(found, changes)


def _modular_classes_verified_as_generated(
    found: list[Verification], changes: Sequence[tuple[Path, str, str]]
) -> list[Verification]:
    """The verifications, with each class of a transformers modular source that could not be built (rotary, or a
    module class) verified where the class of the same name in a changed file generated from that source is.
    transformers never runs a modular source: its module often does not import on its own, and its classes inherit
    what regeneration writes out (a constructor of `super().__init__(config)` that the generated class spells). The
    generated class is the code that runs, and the fix keeps regeneration from the fixed source giving it (RPL905).
    Where the module itself does not import, its line stays, and each changed rotary class so verified gets a line of
    its own."""
    texts = {Path(path).resolve(): (original, fixed) for path, original, fixed in changes}
    generated_from: dict[Path, list[str]] = {}
    for path, _, fixed in changes:
        modular = banner.modular_source(path, fixed)
        if modular is not None:
            generated_from.setdefault(Path(modular).resolve(), []).append(str(path))
    verified = {(line.path, line.name): line for line in found if line.status == VERIFIED}

    def as_generated(modular: Path, name: str, line: int) -> Verification | None:
        for path in generated_from.get(modular.resolve(), ()):
            twin = verified.get((path, name))
            if twin is not None:
                detail = f"as generated in {Path(path).name}:{twin.line}, the code transformers runs: {twin.detail}"
                return Verification(str(modular), line, name, VERIFIED, detail)
        return None

    result = []
    for line in found:
        path = Path(line.path)
        if line.status != NOT_BUILT or not banner.is_modular_source(path):
            result.append(line)
        elif line.name == path.name:  # the module does not import
            result.append(line)
            original, fixed = texts[path.resolve()]
            definitions = _top_level(fixed)
            for name in changed_rotary_classes(original, fixed):
                result.extend(filter(None, [as_generated(path, name, _line(definitions, name))]))
        else:
            result.append(as_generated(path, line.name, line.line) or line)
    return result


def _verify_change(change: tuple[Path, str, str]) -> list[Verification]:
    return verify_file(*change)


@contextlib.contextmanager
def _single_threaded() -> Iterator[None]:
    # The tables are small; on a few cores OpenMP's hand-offs between threads cost more than the work.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def verify_file(path: Path, original: str, fixed: str) -> list[Verification]:
    """The checks of one file (see the module's docstring)."""
    try:
        original_module = load_sibling(path, original, ORIGINAL_SUFFIX)
    except (Exception, SystemExit) as error:
        reason = f"the original module does not import: {describe(error)}"
        return [Verification(str(path), 1, path.name, NOT_BUILT, reason)]
    try:
        try:
            fixed_module = load_sibling(path, fixed, FIXED_SUFFIX)
        except (Exception, SystemExit) as error:
            reason = f"the fixed module does not import where the original does: {describe(error)}"
            return [Verification(str(path), 1, path.name, FAILED, reason)]
        try:
            found = _checks(path, original, fixed, original_module, fixed_module)
        except Exception as error:  # model code can break what inspects it; an unproven rewrite is not written
            return [Verification(str(path), 1, path.name, FAILED, f"the verification itself failed: {describe(error)}")]
        finally:
            unload(fixed_module)
    finally:
        unload(original_module)
    return sorted(found, key=lambda verification: verification.line)


def _checks(
    path: Path, original: str, fixed: str, original_module: types.ModuleType, fixed_module: types.ModuleType
) -> list[Verification]:
    before, after = _top_level(original), _top_level(fixed)
    changed = [name for name, node in after.items() if name not in before or _differs(before[name], node)]
    found = []
    rotary = [cls for cls in rotary_classes_of(original_module) if cls.__module__ == original_module.__name__]
    for cls in rotary:
        line = _line(after, cls.__name__)
        fixed_cls = getattr(fixed_module, cls.__name__, None)
        if not isinstance(fixed_cls, type):
            found.append(Verification(str(path), line, cls.__name__, FAILED, "the fixed module no longer defines it"))
            continue
        found.append(Verification(str(path), line, cls.__name__, *_rotary_check(path, cls, fixed_cls)))
    checked = {cls.__name__ for cls in rotary}
    for name in changed:
        if name in checked or name not in before:
            continue
        node = after[name]
        if isinstance(node, ast.ClassDef):
            original_cls, fixed_cls = getattr(original_module, name, None), getattr(fixed_module, name, None)
            module = is_module_class(original_cls) and is_module_class(fixed_cls)
            if module:
                found.append(Verification(str(path), node.lineno, name, *check_module(original_cls, fixed_cls)))
            found += _methods(path, before[name], node, original_cls, fixed_cls, covered=module)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append(_function(path, node, getattr(original_module, name, None), getattr(fixed_module, name, None)))
        else:
            found.append(_value(path, node, name, original_module, fixed_module))
    return found


def _rotary_check(path: Path, original: type, fixed: type) -> tuple[str, str]:
    """(status, detail) of a rotary class: as the probe builds it (`classes`), or, where the probe finds no way to
    build it and read its tables (a forward that takes boxes and returns a bias), as a module class is built and run
    (`modules`): what it returns is still what the model computes with, though no condition of the probe's can then be
    run on it."""
    check = check_class(original, fixed, placement=not banner.is_modular_source(path))
    if check.status != NOT_BUILT or not (is_module_class(original) and is_module_class(fixed)):
        return check.status, check.detail
    status, detail = check_module(original, fixed)
    if status == NOT_BUILT:
        return check.status, check.detail
    return status, f"as a module, since the probe cannot build it ({check.detail}): {detail}"


def _methods(
    path: Path, before: ast.stmt, after: ast.ClassDef, original: object, fixed: object, covered: bool
) -> list[Verification]:
    """A changed class that is not rotary: its changed static and class methods are called as functions; a method
    that needs an instance cannot be, nor can a class whose change is outside its methods. Where the class is `covered`
    (a module class, which `modules` builds and runs, or reports as not built), its own line stands for those."""
    defined = {node.name: node for node in getattr(before, "body", ()) if isinstance(node, _FUNCTIONS)}
    changed = [
        node
        for node in after.body
        if isinstance(node, _FUNCTIONS) and (node.name not in defined or _differs(defined[node.name], node))
    ]
    if not changed and not covered:
        reason = "not a rotary class, and its change is outside its methods"
        return [Verification(str(path), after.lineno, after.name, NOT_CALLED, reason)]
    found = []
    for node in changed:
        qualified = f"{after.name}.{node.name}"
        kinds = {type(inspect.getattr_static(cls, node.name, None)) for cls in (original, fixed)}
        if kinds <= {staticmethod, classmethod}:
            found.append(_function(path, node, getattr(original, node.name), getattr(fixed, node.name), qualified))
        elif kinds == {types.FunctionType} and not _reads_self(node):
            # A method that uses nothing of its instance computes what a function would: called with None for it.
            unbound = [functools.partial(getattr(cls, node.name), None) for cls in (original, fixed)]
            found.append(_function(path, node, *unbound, qualified))
        elif not covered:
            reason = "a method of a class that is not rotary, which needs an instance to call"
            found.append(Verification(str(path), node.lineno, qualified, NOT_CALLED, reason))
    return found


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _reads_self(method: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a method's body names its first parameter (or calls `super()`, which reads it implicitly)."""
    if not method.args.args:
        return True
    first = method.args.args[0].arg
    return any(isinstance(node, ast.Name) and node.id in (first, "super", "__class__") for node in ast.walk(method))


def _function(path: Path, node: ast.AST, original: object, fixed: object, name: str | None = None) -> Verification:
    name = name or getattr(node, "name", "")
    if isinstance(node, ast.AsyncFunctionDef) or not (callable(original) and callable(fixed)):
        return Verification(str(path), node.lineno, name, NOT_CALLED, "not a plain function once defined")
    status, detail = check_function(original, fixed)
    return Verification(str(path), node.lineno, name, status, detail)


def _value(
    path: Path, node: ast.AST, name: str, original_module: types.ModuleType, fixed_module: types.ModuleType
) -> Verification:
    """A top-level name bound by a changed statement: its value in the fixed module against the original's."""
    missing = object()
    original, fixed = getattr(original_module, name, missing), getattr(fixed_module, name, missing)
    if original is missing or fixed is missing:
        return Verification(str(path), node.lineno, name, NOT_CALLED, "not bound when the module is imported")
    try:
        difference = relative_difference(original, fixed, name)
    except Mismatch as mismatch:
        return Verification(str(path), node.lineno, name, FAILED, f"fp32 {mismatch}")
    except Incomparable as incomparable:
        return Verification(str(path), node.lineno, name, NOT_CALLED, str(incomparable))
    if difference > TOLERANCE:
        detail = f"fp32 values differ by {difference:.3g} relative (at most {TOLERANCE:g} allowed)"
        return Verification(str(path), node.lineno, name, FAILED, detail)
    return Verification(str(path), node.lineno, name, VERIFIED, f"fp32 max rel diff {difference:.3g}, as a value")


def _top_level(text: str) -> dict[str, ast.stmt]:
    """The module's top-level definitions and assignments to a plain name, by name (the last one of a name)."""
    named: dict[str, ast.stmt] = {}
    for node in ast.parse(text).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            named[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name):
                        named[leaf.id] = node
    return named


def _differs(before: ast.AST, after: ast.AST) -> bool:
    """Whether the code differs, formatting and comments aside."""
    return ast.dump(before) != ast.dump(after)


def _line(definitions: dict[str, ast.stmt], name: str) -> int:
    node = definitions.get(name)
    return node.lineno if node is not None else 1
