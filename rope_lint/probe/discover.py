"""Turn TARGETs (packages, modules, files, `path.py:ClassName`) into the rotary-embedding classes to probe."""

from __future__ import annotations

import ast
import contextlib
import dis
import functools
import importlib
import importlib.util
import inspect
import itertools
import logging
import os
import re
import sys
import tokenize
import types
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torch import nn

from rope_lint.prefilter.candidates import first_line
from rope_lint.probe.build import describe
from rope_lint.rules.analysis import computation, rotary
from rope_lint.rules.analysis.context import FunctionNode, physical_lines

# Cheap byte scan before importing a module of a package walk: only modules that use torch and mention rotary
# embeddings, `inv_freq`, cos/sin or a complex exponential can hold a class worth probing, and importing the rest
# costs time.
_MENTIONS_TORCH = re.compile(rb"^\s*(?:import torch|from torch)", re.MULTILINE)
# Those mentions, in lowercased bytes: anywhere, or as whole words. A word is searched for as `word\b`, whose literal
# start the regex engine finds fast, and its start is checked after: one pattern for all of them, `\b(?:cos|...)\b`,
# is tried at every byte and scanned transformers 5.24.0's files 12 times slower (2.7 s of a 38 s probe).
_ROTARY_STRINGS = (b"inv_freq", b"rotary")
_ROTARY_WORDS = tuple(re.compile(rb"%s\b" % word) for word in (b"cos", b"sin", b"polar", b"1j"))
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_")
# Model libraries (transformers and its kin) keep their torch models in `modeling_*.py`; in a package that
# follows the convention, the other modules (conversion scripts, tokenizers, modular sources) are not walked.
# A package whose `modeling_*` modules hold no rotary code (diffusers' are base classes and outputs) does not
# follow it, and all its modules are walked.
_MODELING_PREFIX = "modeling_"
# How a class was found: by its name or stored `inv_freq` (`rotary.is_rotary_class`), only by what it computes
# (`computation.RotaryComputation`), or named by the user as `path.py:ClassName`.
FOUND_BY_NAME = "name"
FOUND_BY_COMPUTATION = "computation"
FOUND_BY_TARGET = "target"


class TargetError(Exception):
    """A TARGET that names nothing that can be probed: a usage error."""


@dataclass(frozen=True)
class ImportFailure:
    """A module of a target that could not be imported; its classes are not probed."""

    module: str
    reason: str


@dataclass
class Discovery:
    """The rotary classes found in all targets (each class once), and the modules that failed to import."""

    classes: list[type[nn.Module]] = field(default_factory=list)
    import_failures: list[ImportFailure] = field(default_factory=list)
    found_by: dict[str, str] = field(default_factory=dict)  # qualified name -> FOUND_BY_*
    complete: bool = False  # every target searched (`discovered` has given its last class)

    def add_class(self, cls: type[nn.Module], found_by: str) -> None:
        # A class re-exported by several modules is probed once, under the module that defines it.
        if qualified_name(cls) not in self.found_by:
            self.classes.append(cls)
            self.found_by[qualified_name(cls)] = found_by

    def add_module(self, module: types.ModuleType) -> None:
        named = rotary_classes_of(module)
        for cls in named:
            self.add_class(cls, FOUND_BY_NAME)
        for cls in computed_rotary_classes_of(module, skip=named):
            self.add_class(cls, FOUND_BY_COMPUTATION)


def qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


@contextlib.contextmanager
def quiet_model_code() -> Iterator[None]:
    """Model code prints and warns while it is imported and built; keep stdout for the report, drop warnings, those
    it logs among them (a library that logs a whole config with each warning fills a terminal with pages of them over
    a package's classes); its errors still show."""
    disabled = logging.root.manager.disable
    logging.disable(max(disabled, logging.WARNING))
    try:
        with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(disabled)


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _code_objects(constant)


def _function_of(member: object) -> object:
    member = getattr(member, "__func__", member)  # staticmethod, classmethod
    return getattr(member, "fget", member)  # property


def _function_code(member: object) -> types.CodeType | None:
    return getattr(_function_of(member), "__code__", None)


def _is_self(instruction: dis.Instruction, self_name: str) -> bool:
    # `LOAD_FAST self`, or (3.13+) the last of a fused pair such as `LOAD_FAST_LOAD_FAST (value, self)`.
    value = instruction.argval
    return instruction.opname.startswith("LOAD_FAST") and (
        value == self_name or (isinstance(value, tuple) and value[-1] == self_name)
    )


def _tables_stored_in(code: types.CodeType) -> Iterator[str]:
    """The tables this code object stores on itself: `self.<name> = ...` or `self.register_buffer("<name>", ...)`."""
    names = (*code.co_names, *(constant for constant in code.co_consts if isinstance(constant, str)))
    if not any(map(rotary.is_table_name, names)):
        return  # the common case, decided without disassembling
    self_name = code.co_varnames[0] if code.co_argcount else None
    previous = None
    for instruction in dis.get_instructions(code):
        if previous is not None and isinstance(instruction.argval, str):
            stored = instruction.opname == "STORE_ATTR" and self_name and _is_self(previous, self_name)
            registered = instruction.opname == "LOAD_CONST" and previous.argval == "register_buffer"
            if stored or registered:
                yield instruction.argval
        previous = instruction


@functools.cache
def _tables_stored_by_own_methods(klass: type) -> frozenset[str]:
    # Cached per class: shared bases (a library's PreTrainedModel, mixins) are looked at once, not per subclass.
    return frozenset(
        name
        for member in vars(klass).values()
        if (code := _function_code(member)) is not None
        for inner in _code_objects(code)
        for name in _tables_stored_in(inner)
    )


def _tables_stored(cls: type) -> Iterator[str]:
    """The tables the class and its bases store on it (a base's `__init__` runs for the class; reading another
    module's table does not count), lazily, base by base."""
    for klass in cls.__mro__:
        if not klass.__module__.startswith("torch."):
            yield from _tables_stored_by_own_methods(klass)


def is_rotary_class(value: object, defining_module: str | None = None) -> bool:
    """An `nn.Module` subclass that `rotary.is_rotary_class` takes for rotary from the probe's evidence: named like
    `*Rotary*Embedding*`, or storing `inv_freq`.

    The tables are only looked for in classes defined in `defining_module` (when given), so that a class imported
    into many modules is inspected once, in its own.
    """
    if not (isinstance(value, type) and issubclass(value, nn.Module)) or value.__module__.startswith("torch."):
        return False
    own = defining_module is None or value.__module__ == defining_module
    return rotary.is_rotary_class(value.__name__, _tables_stored(value) if own else (), False, rotary.RUNTIME_EVIDENCE)


def rotary_classes_of(module: types.ModuleType) -> list[type[nn.Module]]:
    return [value for value in vars(module).values() if is_rotary_class(value, module.__name__)]


class _Definitions:
    """A source file's classes by qualified name and functions by first line (a decorator's, if any), as the
    imported objects name them."""

    def __init__(self, tree: ast.Module) -> None:
        self.classes: dict[str, ast.ClassDef] = {}
        self.functions: dict[int, FunctionNode] = {}
        pending: list[tuple[str, ast.AST]] = [("", tree)]
        while pending:
            prefix, scope = pending.pop()
            for node in ast.iter_child_nodes(scope):
                if isinstance(node, ast.ClassDef):
                    self.classes[prefix + node.name] = node
                    pending.append((f"{prefix}{node.name}.", node))
                elif isinstance(node, FunctionNode):
                    self.functions[first_line(node)] = node
                    pending.append((f"{prefix}{node.name}.<locals>.", node))


def _top_package(module_name: str) -> str:
    return module_name.partition(".")[0]


# A line at the left margin that starts a statement: it ends the top-level definition above it. (A string or a bracket
# that reaches the margin inside a definition ends the block early too; the block then does not parse, and the whole
# file is read instead.)
_TOP_LEVEL_STATEMENT = re.compile(r"[A-Za-z_@]")
_DEFINITION_HEADER = re.compile(r"(?:class|def|async\s+def)\s")
# How the lines of a decorator's arguments that run over several lines start: indented, blank, or with the bracket
# that closes them at the margin.
_DECORATOR_ARGUMENT_STARTS = (")", "]", " ", "\t", "\n")


class _SourceFile:
    """One source file's definitions, as the imported objects name them. A top-level class or function is parsed on
    its own, from its lines (a rotary class is a few dozen lines of a module of thousands: parsing whole modules took
    3 to 4 s of transformers 5.24.0's walk); anything else, or a definition whose lines cannot be told apart, from the
    whole file, once."""

    def __init__(self, filename: str, text: str) -> None:
        self.filename = filename
        self.text = text
        self.lines = physical_lines(text)
        self._whole: _Definitions | None = None
        self._blocks: dict[int, _Definitions | None] = {}

    def class_def(self, qualname: str) -> ast.ClassDef | None:
        if "." not in qualname:
            found = [m for m in re.finditer(rf"^class\s+{re.escape(qualname)}\b", self.text, re.MULTILINE)]
            first_line = self._with_decorators(self.text.count("\n", 0, found[0].start())) if len(found) == 1 else None
            block = self._block(first_line)
            if block is not None and qualname in block.classes:
                return block.classes[qualname]
        return self._whole_file().classes.get(qualname)

    def _with_decorators(self, index: int) -> int | None:
        """The first line (1-based) of the definition whose header is at `index` (0-based): that of its first
        decorator (one whose arguments run over several lines ends with a bracket at the margin: `@kernel(\n...\n)`);
        None where the line above them may end something else."""
        while index > 0:
            above = index - 1
            if self.lines[above].startswith((")", "]")):  # the end of a decorator's arguments: up to its `@`
                while above > 0 and self.lines[above].startswith(_DECORATOR_ARGUMENT_STARTS):
                    above -= 1
            if not self.lines[above].startswith("@"):
                break
            index = above
        above = self.lines[index - 1] if index > 0 else ""
        ends_a_statement = not above.strip() or above.startswith("#") or _TOP_LEVEL_STATEMENT.match(above)
        return index + 1 if ends_a_statement else None

    def function_def(self, first_line: int) -> FunctionNode | None:
        """The function whose first line (its first decorator's, if any) is `first_line`, as `co_firstlineno` has it."""
        block = self._block(self._outermost_definition(first_line))
        if block is not None and first_line in block.functions:
            return block.functions[first_line]
        return self._whole_file().functions.get(first_line)

    def _outermost_definition(self, first_line: int) -> int | None:
        """The first line of the top-level definition that holds line `first_line` (1-based): that line itself at the
        margin, else the nearest class or function header above it at the margin, with its decorators."""
        index = first_line - 1
        if not 0 <= index < len(self.lines) or _TOP_LEVEL_STATEMENT.match(self.lines[index]):
            return first_line
        while index > 0 and not _DEFINITION_HEADER.match(self.lines[index]):
            index -= 1
        return self._with_decorators(index)

    def _block(self, first_line: int | None) -> _Definitions | None:
        """The definition that starts at the margin on `first_line` (1-based), parsed alone at its own line numbers;
        None where its lines do not make one definition (or there is no such line)."""
        if first_line is None:
            return None
        if first_line not in self._blocks:
            self._blocks[first_line] = self._parse_block(first_line)
        return self._blocks[first_line]

    def _parse_block(self, first_line: int) -> _Definitions | None:
        index = first_line - 1
        if not 0 <= index < len(self.lines) or not _TOP_LEVEL_STATEMENT.match(self.lines[index]):
            return None
        while index < len(self.lines) and self.lines[index].startswith(("@", *_DECORATOR_ARGUMENT_STARTS)):
            index += 1
        if index == len(self.lines) or not _DEFINITION_HEADER.match(self.lines[index]):
            return None
        end = index + 1
        while end < len(self.lines) and not _TOP_LEVEL_STATEMENT.match(self.lines[end]):
            end += 1
        try:
            tree = ast.parse("\n" * (first_line - 1) + "".join(self.lines[first_line - 1 : end]), self.filename)
        except (SyntaxError, ValueError):
            return None
        return _Definitions(tree) if len(tree.body) == 1 else None

    def _whole_file(self) -> _Definitions:
        if self._whole is None:
            try:
                self._whole = _Definitions(ast.parse(self.text, self.filename))
            except (SyntaxError, ValueError):
                self._whole = _Definitions(ast.Module(body=[], type_ignores=[]))
        return self._whole


class _Sources:
    """The source of classes and of the functions they call, each file read once, for `_computes_rotary_tables`.
    A syntax tree takes about 20 times its source's size in Python objects, and trees kept to the end of the walk
    leave that memory scattered among the imported modules' objects, where the allocator cannot give it back: one
    `_Sources` serves one module and is dropped with its trees (it holds no reference cycle, so they go at once)."""

    def __init__(self) -> None:
        self._files: dict[str, _SourceFile | None] = {}
        self._class_nodes: dict[type, ast.ClassDef | None] = {}

    def _file(self, filename: str) -> _SourceFile | None:
        if filename not in self._files:
            try:
                with tokenize.open(filename) as stream:  # in the encoding its coding line declares
                    text = stream.read()
            except (OSError, SyntaxError, ValueError):
                text = None  # no source to read: the class is judged by its name alone
            self._files[filename] = None if text is None else _SourceFile(filename, text)
        return self._files[filename]

    def resolve(self, callee: ast.expr, scope: object) -> computation.Resolved:
        """The definition of a function that model code calls (`helper`, `module.helper`), looked up in the globals
        of the module that calls it; only functions of the same top-level package are read (not torch's)."""
        if not isinstance(scope, dict):
            return None
        names: list[str] = []
        while isinstance(callee, ast.Attribute):
            names.insert(0, callee.attr)
            callee = callee.value
        if not isinstance(callee, ast.Name) or callee.id not in scope:
            return None
        value = scope[callee.id]
        for name in names:
            value = inspect.getattr_static(value, name, None)
        value = inspect.unwrap(value) if callable(value) else None  # through decorators such as a cache
        package = _top_package(getattr(value, "__module__", None) or "")
        if not (isinstance(value, types.FunctionType) and package == _top_package(scope.get("__name__", ""))):
            return None
        source = self._file(value.__code__.co_filename)
        function = source.function_def(value.__code__.co_firstlineno) if source else None
        return None if function is None else (function, value.__globals__)

    def class_node(self, klass: type) -> ast.ClassDef | None:
        if klass not in self._class_nodes:
            filename = getattr(sys.modules.get(klass.__module__), "__file__", None)
            source = self._file(filename) if filename else None
            self._class_nodes[klass] = source.class_def(klass.__qualname__) if source else None
        return self._class_nodes[klass]


# The functions whose call a table's computation needs (`torch.polar`, `torch.exp(1j * ...)`, cos, sin): a class
# whose code and helpers name none of them computes no table, and its source is not read.
_TABLE_FUNCTIONS = frozenset({"cos", "sin", "polar", "exp"})


@functools.cache
def _names_table_math(function: types.FunctionType, depth: int = computation.DEPTH) -> bool:
    """Whether the function's code, or a function of its module that it names, names a table function."""
    for code in _code_objects(function.__code__):
        if not _TABLE_FUNCTIONS.isdisjoint(code.co_names):
            return True
        called = (function.__globals__.get(name) for name in code.co_names) if depth else ()
        if any(_names_table_math_of(value, depth - 1) for value in called):
            return True
    return False


@functools.cache
def _class_names_table_math(klass: type) -> bool:
    return any(map(_names_table_math_of, map(_function_of, vars(klass).values())))


def _names_table_math_of(value: object, depth: int = computation.DEPTH) -> bool:
    value = inspect.unwrap(value) if callable(value) else value  # through decorators such as a cache
    return isinstance(value, types.FunctionType) and _names_table_math(value, depth)


# Whether each class's own methods compute tables, kept for the whole walk (a bool, unlike the trees it is read from):
# shared bases are read once.
_COMPUTES_TABLES: dict[type, bool] = {}


def _computes_tables(klass: type, sources: _Sources, recognizer: computation.RotaryComputation) -> bool:
    if klass not in _COMPUTES_TABLES:
        node = sources.class_node(klass)
        scope = vars(sys.modules[klass.__module__])
        _COMPUTES_TABLES[klass] = node is not None and recognizer.computes_tables(node, scope)
    return _COMPUTES_TABLES[klass]


def _computes_rotary_tables(cls: type, sources: _Sources, recognizer: computation.RotaryComputation) -> bool:
    """Whether the class (or a base, whose methods it runs) computes the cos/sin or complex exponential of
    positions times frequencies, and builds no layers: a module that provides tables, whatever its names."""
    own = [klass for klass in cls.__mro__ if not klass.__module__.startswith(("torch.", "builtins"))]
    # Cheapest first: only a class that names table math is read, and only a class that computes tables has the
    # source of its other classes read for layers.
    if not any(_computes_tables(klass, sources, recognizer) for klass in own if _class_names_table_math(klass)):
        return False
    return not any(node is not None and computation.builds_layers(node) for node in map(sources.class_node, own))


def computed_rotary_classes_of(module: types.ModuleType, skip: Sequence[type] = ()) -> list[type[nn.Module]]:
    """The `nn.Module` subclasses that the module defines, other than those in `skip`, and that compute rotary
    tables (see `_computes_rotary_tables`); the source read for them is released on return (see `_Sources`)."""
    sources = _Sources()
    # Its facts are keyed by the ids of the nodes of `sources`' trees: it lives no longer than they do.
    recognizer = computation.RotaryComputation(sources.resolve)
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, nn.Module)
        and value.__module__ == module.__name__
        and value not in skip
        and _computes_rotary_tables(value, sources, recognizer)
    ]


def _package_root(path: Path) -> tuple[Path, str]:
    """The directory to put on sys.path and the dotted module name of a package directory or a .py file in one;
    for a standalone .py file, its directory and ""."""
    directory = path if path.is_dir() else path.parent
    packages: list[str] = []
    while (directory / "__init__.py").is_file():
        packages.insert(0, directory.name)
        directory = directory.parent
    if not packages:
        return directory, ""
    module = [] if path.is_dir() or path.name == "__init__.py" else [path.stem]
    return directory, ".".join(packages + module)


def _import_path(path: Path) -> types.ModuleType:
    """Import a .py file; a file inside a package is imported as part of it, so relative imports work."""
    root, dotted = _package_root(path.resolve())
    if str(root) not in sys.path:
        # Like running a script: its directory (or its package's parent) is importable.
        sys.path.insert(0, str(root))
    if dotted:
        return importlib.import_module(dotted)
    taken = sys.modules.get(path.stem)
    if taken is not None and getattr(taken, "__file__", None) != str(path.resolve()):
        raise TargetError(f"{path}: its module name {path.stem!r} is already taken by {taken!r}")
    spec = importlib.util.spec_from_file_location(path.stem, path.resolve())
    if spec is None or spec.loader is None:
        raise TargetError(f"{path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def _walk_package_files(directory: Path, package: str) -> list[tuple[str, Path]]:
    """(dotted name, file) for every module of a regular package directory, sorted by name."""
    modules = []
    for current, subdirectories, files in os.walk(directory):
        here = Path(current)
        # Only regular subpackages (with __init__.py) are importable parts of the package.
        subdirectories[:] = sorted(
            name for name in subdirectories if name.isidentifier() and (here / name / "__init__.py").is_file()
        )
        prefix = ".".join([package, *here.relative_to(directory).parts])
        for name in sorted(files):
            stem = name[: -len(".py")]
            if name.endswith(".py") and stem.isidentifier() and stem != "__init__":
                modules.append((f"{prefix}.{stem}", here / name))
    return sorted(modules)


def _might_hold_rotary_class(path: Path) -> bool:
    try:
        source = path.read_bytes()
    except OSError:
        return True  # let the import report the problem
    return bool(_MENTIONS_TORCH.search(source)) and _mentions_rotary(source.lower())


def _mentions_rotary(text: bytes) -> bool:
    """Whether lowercased source mentions `inv_freq` or `rotary`, or cos, sin, polar or 1j as whole words."""
    if any(string in text for string in _ROTARY_STRINGS):
        return True
    starts = (found.start() for word in _ROTARY_WORDS for found in word.finditer(text))
    return any(start == 0 or text[start - 1] not in _WORD_BYTES for start in starts)


def _package_modules(directory: Path, package: str) -> list[str]:
    files = _walk_package_files(directory, package)
    modeling = [(name, path) for name, path in files if path.name.startswith(_MODELING_PREFIX)]
    others = [(name, path) for name, path in files if not path.name.startswith(_MODELING_PREFIX)]
    # The modeling modules first: where one of them may hold a rotary class, the others are not read at all.
    for group in (modeling, others):
        if found := [name for name, path in group if _might_hold_rotary_class(path)]:
            return found
    return []


def _import_into(discovery: Discovery, module_name: str) -> None:
    try:
        with quiet_model_code():
            module = importlib.import_module(module_name)
    except (Exception, SystemExit) as error:  # model code fails in every way; each failure is reported
        discovery.import_failures.append(ImportFailure(module_name, describe(error)))
        return
    discovery.add_module(module)


def _discover_named_class(discovery: Discovery, source: str, class_name: str) -> None:
    path = Path(source)
    try:
        with quiet_model_code():
            module = _import_path(path) if path.exists() else importlib.import_module(source)
    except (Exception, SystemExit) as error:
        raise TargetError(f"{source}: cannot import: {describe(error)}") from error
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise TargetError(f"{source}: has no nn.Module subclass named {class_name!r}")
    discovery.add_class(cls, FOUND_BY_TARGET)


def _discover_path(discovery: Discovery, path: Path) -> Iterator[None]:
    """Import the file, or the package's modules one at a time: a step after each of those."""
    if path.is_dir() and not (path / "__init__.py").is_file():
        raise TargetError(f"{path}: a directory must be a package (with __init__.py)")
    if path.is_dir():
        root, package = _package_root(path.resolve())
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        for module_name in _package_modules(path.resolve(), package):
            _import_into(discovery, module_name)
            yield
        return
    try:
        with quiet_model_code():
            module = _import_path(path)
    except (Exception, SystemExit) as error:
        discovery.import_failures.append(ImportFailure(str(path), describe(error)))
        return
    discovery.add_module(module)


def _discover_module_name(discovery: Discovery, name: str) -> Iterator[None]:
    """Import the module, or the package's modules one at a time: a step after each of those."""
    try:
        with quiet_model_code():
            spec = importlib.util.find_spec(name)
    except (Exception, SystemExit) as error:  # a parent package failed to import
        raise TargetError(f"{name}: cannot import: {describe(error)}") from error
    if spec is None:
        raise TargetError(f"{name}: no such file, module or package")
    if spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            for module_name in _package_modules(Path(location), name):
                _import_into(discovery, module_name)
                yield
    else:
        _import_into(discovery, name)


def discovered(targets: Sequence[str], discovery: Discovery) -> Iterator[type[nn.Module]]:
    """The rotary classes of every TARGET, added to `discovery`, each given as soon as the module that defines it is
    imported: a caller can probe them while the next modules are imported. Raises TargetError for a target that
    names nothing."""
    given = 0
    for target in targets:
        source, _, class_name = target.rpartition(":")
        steps: Iterable[None] = ()
        if source and class_name.isidentifier():
            _discover_named_class(discovery, source, class_name)
        elif Path(target).exists():
            steps = _discover_path(discovery, Path(target))
        elif all(part.isidentifier() for part in target.split(".")):
            steps = _discover_module_name(discovery, target)
        else:
            raise TargetError(f"{target}: no such file, module or package")
        for _ in itertools.chain(steps, [None]):  # after each module of a package, and once the target is done
            yield from discovery.classes[given:]
            given = len(discovery.classes)
    discovery.complete = True
