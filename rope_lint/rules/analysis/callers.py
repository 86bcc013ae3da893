"""Whether another module of a package calls a public helper while models are built: the part of "does this code
run at construction?" (`enumerations.runs_only_after_construction`) that one file cannot answer, since any module may
import a public function.

The package is the tree of folders with an `__init__.py` that holds the helper's file, or, for a file outside any
package, the Python files beside it. Only its modules that mention the helper's name are read, and of those only the
statements around the name are parsed. A use there counts unless the module binds the name to something else: a
definition of its own, or an import from another module that defines one. A call counts as made after construction
as a call in the helper's own file does; a name read as a type (an annotation, `isinstance`) runs nothing; any other
use (the function passed as a value, a call at module level) may run at construction. A helper that no module of the
package calls is left to code outside, which the rules do not see: not called at construction, as far as they know.

Looked up by the engine after each file's check (`Diagnostic.rests_on_helpers`), so that a cached result
never depends on another file. The result cache keeps a package's answers with a fingerprint of its files' statuses
(`remember`): a warm run reads none of them while none has changed.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import Diagnostic
from rope_lint.files import SOURCE_LIMIT, Excludes, Listings, SourceFile, discover, read_regular, status_signature
from rope_lint.prefilter import candidates
from rope_lint.rules.analysis.context import FileContext, FunctionNode, walk

if TYPE_CHECKING:
    from typing import Any


class PackageCallers:
    """The answers of one run, by file and helper; a module's text is read once however many helpers it mentions."""

    def __init__(
        self, codes_standing_after_construction: frozenset[str] = frozenset(), listings: Listings | None = None
    ) -> None:
        # The rules whose findings stand where no module calls their helpers at construction (the others' stand where
        # one does: `rules.Entry.stands_if_called_at_construction`).
        self._codes_standing_after = codes_standing_after_construction
        self._listings = Listings() if listings is None else listings  # the run's, which has listed the tree checked
        self._answers: dict[tuple[str, str], bool] = {}
        self._tops: dict[str, str] = {}
        self._package_modules: dict[str, list[str]] = {}
        self._sources: dict[str, str] = {}  # texts checked that are not, or not yet, what their file holds
        # The modules that mention a helper's name, by package and name; the names asked for are looked up together,
        # in one reading of the package.
        self._mentions: dict[tuple[str, str], list[str]] = {}
        self._wanted: set[tuple[str, str]] = set()
        # Answers of an earlier run by package: the fingerprint of the package's files then, and (path, name, answer)
        # rows (None in a run without a result cache); the fingerprints of this run's packages, taken before their
        # first answer; the packages it looked in.
        self._remembered: dict[str, Any] | None = None
        self._fingerprints: dict[str, str | None] = {}
        self._looked_in: set[str] = set()
        self._statuses_taken: dict[str, list[int]] = {}

    def remember(self, packages: dict[str, Any], statuses_taken: dict[str, list[int]] | None = None) -> None:
        """Take the answers of an earlier run (`answers_to_remember`), as a package's that has not changed since.
        `statuses_taken`: the statuses (`status_signature`) that this run took of the files it checked, by absolute
        path, which a package's fingerprint before its first answer reads rather than asking the system again: the
        files as they were checked (a warm check of transformers 4.37.2 `models/` took 1,337 of the 1,533 again)."""
        self._remembered = packages
        self._statuses_taken = statuses_taken or {}

    def answers_to_remember(self) -> dict[str, Any]:
        """The answers by package, for a later run: those remembered, and this run's where no file of the package has
        changed since before the first was found."""
        packages = dict(self._remembered or {})
        for top in self._looked_in:
            fingerprint = self._fingerprints[top]
            if fingerprint is not None and fingerprint == self._fingerprint(top):
                answers = self._answers.items()
                packages[top] = [fingerprint, [[*key, answer] for key, answer in answers if self._top(key[0]) == top]]
        return packages

    def standing(self, diagnostics: list[Diagnostic], source: str | None = None) -> list[Diagnostic]:
        """The findings that stand, resolved: a finding that rests on public helpers stands where another module of
        the package calls one of them at construction, or none calls them at all; for the rules that report code run
        after construction, where neither holds. `source` is the text the findings are of, where it may not be the
        file's (standard input, a fix not yet written)."""
        if source is not None and diagnostics:
            self._sources[os.path.abspath(diagnostics[0].path)] = source
        for d in diagnostics:
            if d.rests_on_helpers:
                top = self._top(os.path.abspath(d.path))
                self._wanted.update((top, name) for name in d.rests_on_helpers)
        return [d._replace(rests_on_helpers=()) for d in diagnostics if not d.rests_on_helpers or self._stands(d)]

    def _stands(self, d: Diagnostic) -> bool:
        called = any(self.called_at_construction(d.path, name) for name in d.rests_on_helpers)
        return called != (d.code in self._codes_standing_after)

    def called_at_construction(self, path: str, name: str) -> bool:
        key = (os.path.abspath(path), name)
        if key not in self._answers and self._remembered is not None:
            top = self._top(key[0])
            if top not in self._fingerprints:
                self._fingerprints[top] = self._fingerprint(top, self._statuses_taken)
                self._answers.update(_answers_if_unchanged(self._remembered.get(top), self._fingerprints[top]))
        if key not in self._answers:
            self._answers[key] = False  # a cycle of helpers calling one another proves nothing more
            self._answers[key] = self._look_up(*key)
            if self._remembered is not None:
                self._looked_in.add(self._top(key[0]))
        return self._answers[key]

    def _fingerprint(self, top: str, statuses_taken: dict[str, list[int]] | None = None) -> str | None:
        """A digest of the package's files and their statuses (`status_signature`), those in `statuses_taken` as
        taken there; None where one changed too recently for its status to tell."""
        import hashlib  # only a run with a result cache takes fingerprints

        taken, lines = statuses_taken or {}, []
        for module in self._modules(top):
            status = taken.get(module) or status_signature(module)
            if status is None and os.path.exists(module):
                return None
            lines.append(f"{module}\0{status}\n")
        return hashlib.blake2b("".join(lines).encode(), digest_size=16).hexdigest()

    def _look_up(self, path: str, name: str) -> bool:
        """Whether a module of the package calls the helper at construction. A public helper that its own package
        never calls is there for code outside to call, which the rules do not see: like any code that they do not
        see run at construction, it counts as run after."""
        top = self._top(path)
        for module in self._mentioning(top, name):
            if module == path:
                continue
            # Its imports too, relative ones (`from .helpers import *`) among them, which may not name the helper.
            ctx = _context(module, (name, "import"), self._sources.get(module))
            if ctx is None:
                continue
            if ctx is False:
                return True  # a module that does not parse may call it anywhere
            binding = _binding(ctx, name, path, top)
            if binding[0] not in (None, name):  # imported under another name: parse around that too
                ctx = _context(module, (name, "import", binding[0]), self._sources.get(module)) or ctx
            found = _calls(ctx, name, binding)
            if found is None or any(self.called_at_construction(module, helper) for helper in set().union(*found)):
                return True
        return False

    def _mentioning(self, top: str, name: str) -> list[str]:
        """The package's modules that can call `name` of another module: where an import names it, a star import
        may, or an attribute of that name is read off something other than `self` or `cls` (`embeddings.name`)."""
        if (top, name) not in self._mentions:
            names = {name} | {wanted for package, wanted in self._wanted if package == top}
            names -= {known for package, known in self._mentions if package == top}
            found: dict[str, list[str]] = {n: [] for n in names}
            for module in self._modules(top):
                try:
                    data = read_regular(module, SOURCE_LIMIT)
                except OSError:
                    continue  # the check of that file says why it cannot be read
                star = b"import *" in data
                for n in names:
                    if n.encode() in data and (star or _reaches(data, n)):
                        found[n].append(module)
            self._mentions.update(((top, n), modules) for n, modules in found.items())
        return self._mentions[(top, name)]

    def _top(self, path: str) -> str:
        """The package's top folder: the highest of the folders with an `__init__.py` above `path`, or its own folder
        where it has none."""
        folder = os.path.dirname(path)
        if folder not in self._tops:
            top = folder
            while _is_package(top) and _is_package(os.path.dirname(top)) and os.path.dirname(top) != top:
                top = os.path.dirname(top)
            self._tops[folder] = top
        return self._tops[folder]

    def _modules(self, top: str) -> list[str]:
        """The package's Python files, by absolute path: its tree, or the files beside one outside any package."""
        if top not in self._package_modules:
            if _is_package(top):
                modules = list(discover([top], Excludes([], top), self._listings))  # absolute, as `top` is
            else:
                try:
                    names = sorted(os.listdir(top))
                except OSError:  # a path that is not on disk (a check of text given on standard input)
                    names = []
                modules = [os.path.join(top, name) for name in names if name.endswith(".py")]
            self._package_modules[top] = modules
        return self._package_modules[top]


def _answers_if_unchanged(remembered: object, fingerprint: str | None) -> dict[tuple[str, str], bool]:
    """An earlier run's answers for a package (`answers_to_remember`), where its fingerprint is the package's now."""
    if fingerprint is None or not isinstance(remembered, list) or len(remembered) != 2:
        return {}
    if remembered[0] != fingerprint or not isinstance(remembered[1], list):
        return {}
    answers = {}
    for row in remembered[1]:
        if isinstance(row, list) and len(row) == 3 and all(isinstance(part, str) for part in row[:2]):
            answers[(row[0], row[1])] = row[2] is True
    return answers


def _is_package(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, "__init__.py"))


def _binding(ctx: FileContext, name: str, helper_path: str, top: str) -> tuple[str | None, set[str]]:
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


def _reaches(data: bytes, name: str) -> bool:
    """Whether a module's text can call `name` of another module: an import statement names it (on its logical line,
    or in the parentheses of `import (...)`), or an attribute `name` is read off something other than `self` or `cls`
    (`embeddings.name`)."""
    needle = name.encode()
    start = data.find(needle)
    while start != -1:
        end = start + len(needle)
        word = not _IDENTIFIER.match(data, end) and (start == 0 or not _IDENTIFIER.match(data, start - 1))
        if word and data[start - 1 : start] == b".":
            if not data[max(0, start - 5) : start - 1].endswith((b"self", b"cls")):
                return True
        elif word:
            line_start = data.rfind(b"\n", 0, start) + 1
            while data[line_start - 2 : line_start] == b"\\\n":  # a line continued with a backslash
                line_start = data.rfind(b"\n", 0, line_start - 2) + 1
            line = data[line_start:start]
            opening = data.rfind(b"(", 0, start)
            before = data[data.rfind(b"\n", 0, opening) + 1 : opening] if opening != -1 else b""
            if b"import" in line or (before.rstrip().endswith(b"import") and b")" not in data[opening:start]):
                return True
        start = data.find(needle, end)
    return False


_IDENTIFIER = re.compile(rb"\w")


def _context(module: str, needles: tuple[str, ...], text: str | None) -> FileContext | bool | None:
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


def _calls(ctx: FileContext, name: str, binding: tuple[str | None, set[str]]) -> list[frozenset[str]] | None:
    """For each call of the helper in the module, the module's public helpers that its running after construction
    rests on (`enumerations.function_runs_after`); None where a use may run at construction: a call at module level
    or in a class body, or the function passed as a value."""
    from rope_lint.rules.analysis import enumerations  # only a lookup needs it: a warm check makes none

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
    from rope_lint.rules.analysis import enumerations

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
