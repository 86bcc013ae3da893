"""Whether another module of a package calls a public helper while models are built: the part of "does this code
run at construction?" (`enumerations.runs_only_after_construction`) that one file cannot answer, since any module may
import a public function.

The package is the tree of folders with an `__init__.py` that holds the helper's file, or, for a file outside any
package, the Python files beside it. Only its modules that mention the helper's name are read, and of those only the
statements around the name are parsed (`helper_uses`). A use there counts unless the module binds the name to
something else: a definition of its own, or an import from another module that defines one. A call counts as made
after construction as a call in the helper's own file does; a name read as a type (an annotation, `isinstance`) runs
nothing; any other use (the function passed as a value, a call at module level) may run at construction. A helper
that no module of the package calls is left to code outside, which the rules do not see: not called at
construction, as far as they know.

The same package answers, for `fix`, whether code outside a rotary class reads one of its tables off a module, which
the rope codemod's rewrite would change (`table_reads`): only the modules that read an attribute of the table's name
off something other than `self` or `cls` are parsed, around it. `check` does not ask: every rotary file of a
transformers checkout would read the whole package, and a pre-commit check of one file took 3.5 times as long.

Looked up by the engine after each file's check (`Diagnostic.rests_on_helpers`, `Fix.moves_tables`), so that a
cached result never depends on another file. The result cache keeps a package's answers with a fingerprint of its
files' statuses (`remember`): a warm run reads none of them while none has changed.
"""

from __future__ import annotations

import functools
import os
import re

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import Diagnostic
from rope_lint.files import SOURCE_LIMIT, Excludes, Listings, digest, discover, read_regular, status_signature

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeAlias

    # The status (`status_signature`) that a run took of a file, by absolute path, or None.
    StatusTaken: TypeAlias = Callable[[str], list[int] | None]


def _no_status_taken(absolute_path: str) -> None:
    """No status taken (`PackageCallers.remember`)."""


class PackageCallers:
    """The answers of one run, by file and helper, and by package and table; a module's text is read once however many
    helpers it mentions, and once for every table."""

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
        self._tables_read: dict[tuple[str, str], bool] = {}  # by package and table, for every file of the package
        # Whether a fix's moved tables are looked up (`fix` does), or the fix is left offered (`check`: a pre-commit
        # check of one file would read its whole package).
        self.resolves_table_reads = False
        self._readers: dict[str, dict[str, list[str]]] = {}  # by package: `_table_readers`
        # Answers of an earlier run by package: the fingerprint of the package's files then, and (path, name, answer)
        # rows (None in a run without a result cache); the fingerprints of this run's packages, taken before their
        # first answer; the packages it looked in.
        self._remembered: dict[str, Any] | None = None
        self._fingerprints: dict[str, str | None] = {}
        self._looked_in: set[str] = set()
        self._status_taken: StatusTaken = _no_status_taken

    def remember(self, packages: dict[str, Any], status_taken: StatusTaken = _no_status_taken) -> None:
        """Take the answers of an earlier run (`answers_to_remember`), as a package's that has not changed since.
        `status_taken`: the status (`status_signature`) that this run took of a file it checked, by absolute path, or
        None, which a package's fingerprint before its first answer reads rather than asking the system again: the
        files as they were checked (a warm check of transformers 4.37.2 `models/` took 1,337 of the 1,533 again)."""
        self._remembered = packages
        self._status_taken = status_taken

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
        after construction, where neither holds. In a run that `resolves_table_reads` (`fix`), a fix that moves
        tables off the module is kept where no code of the package reads one of them off a module
        (`table_read_elsewhere`). `source` is the text the findings are of, where it may not be the file's (standard
        input, a fix not yet written)."""
        if source is not None and diagnostics:
            self._sources[os.path.abspath(diagnostics[0].path)] = source
        for d in diagnostics:
            if d.rests_on_helpers:
                top = self._top(os.path.abspath(d.path))
                self._wanted.update((top, name) for name in d.rests_on_helpers)
        # Most rest on nothing, and stand as they are.
        return [
            self._resolved(d) if d.rests_on_helpers or (d.fix and d.fix.moves_tables) else d
            for d in diagnostics
            if not d.rests_on_helpers or self._stands(d)
        ]

    def _stands(self, d: Diagnostic) -> bool:
        called = any(self.called_at_construction(d.path, name) for name in d.rests_on_helpers)
        return called != (d.code in self._codes_standing_after)

    def _resolved(self, d: Diagnostic) -> Diagnostic:
        """The finding without its helpers, and with its fix where the tables it moves are read nowhere else (or not
        looked up: `resolves_table_reads`)."""
        fix = d.fix
        if fix and fix.moves_tables:
            read = self.resolves_table_reads and any(self.table_read_elsewhere(d.path, n) for n in fix.moves_tables)
            fix = None if read else fix._replace(moves_tables=())
        return d._replace(rests_on_helpers=(), fix=fix)

    def called_at_construction(self, path: str, name: str) -> bool:
        key = (os.path.abspath(path), name)
        if key not in self._answers and self._remembered is not None:
            top = self._top(key[0])
            if top not in self._fingerprints:
                self._fingerprints[top] = self._fingerprint(top, self._status_taken)
                self._answers.update(_answers_if_unchanged(self._remembered.get(top), self._fingerprints[top]))
        if key not in self._answers:
            self._answers[key] = False  # a cycle of helpers calling one another proves nothing more
            self._answers[key] = self._look_up(*key)
            if self._remembered is not None:
                self._looked_in.add(self._top(key[0]))
        return self._answers[key]

    def table_read_elsewhere(self, path: str, name: str) -> bool:
        """Whether code of the package reads the table `name` off a module from outside the class of `path` that
        stores it, where the rope codemod would not rewrite the read (`table_reads`): the same answer for every file
        of the package, found once a run. Only `fix` asks, and a fix keeps no result cache to remember it in."""
        from rope_lint.rules.analysis import helper_uses, table_reads  # parses modules: a check never

        top = self._top(os.path.abspath(path))
        if (top, name) not in self._tables_read:
            read = False
            for module in self._table_readers(top).get(name, []):
                ctx = helper_uses.parsed_around(module, (name,), self._sources.get(module))
                # A module that does not parse may read it anywhere.
                if ctx is False or (ctx is not None and table_reads.read_off_modules(ctx, name)):
                    read = True
                    break
            self._tables_read[(top, name)] = read
        return self._tables_read[(top, name)]

    def _fingerprint(self, top: str, status_taken: StatusTaken = _no_status_taken) -> str | None:
        """A digest of the package's files and their statuses (`status_signature`), those that `status_taken` knows
        as taken there; None where one changed too recently for its status to tell."""
        lines = []
        for module in self._modules(top):
            status = status_taken(module) or status_signature(module)
            if status is None and os.path.exists(module):
                return None
            lines.append(f"{module}\0{status}\n")
        return digest("".join(lines), 16)

    def _look_up(self, path: str, name: str) -> bool:
        """Whether a module of the package calls the helper at construction. A public helper that its own package
        never calls is there for code outside to call, which the rules do not see: like any code that they do not
        see run at construction, it counts as run after."""
        from rope_lint.rules.analysis import helper_uses  # parses modules: a warm check, which looks nothing up, never

        top = self._top(path)
        for module in self._mentioning(top, name):
            if module == path:
                continue
            # Its imports too, relative ones (`from .helpers import *`) among them, which may not name the helper.
            ctx = helper_uses.parsed_around(module, (name, "import"), self._sources.get(module))
            if ctx is None:
                continue
            if ctx is False:
                return True  # a module that does not parse may call it anywhere
            binding = helper_uses.binding(ctx, name, path, top)
            if binding[0] not in (None, name):  # imported under another name: parse around that too
                ctx = helper_uses.parsed_around(module, (name, "import", binding[0]), self._sources.get(module)) or ctx
            found = helper_uses.calls(ctx, name, binding)
            if found is None or any(self.called_at_construction(module, helper) for helper in set().union(*found)):
                return True
        return False

    def _table_readers(self, top: str) -> dict[str, list[str]]:
        """The package's modules that name an attribute like a table (`rotary.TABLE_NEEDLES`) off something other than
        `self` or `cls`, by the attribute's name: found for every table in one reading of the package."""
        if top not in self._readers:
            readers: dict[str, list[str]] = {}
            cores, pattern = _table_attribute()
            for module in self._modules(top):
                try:
                    data = read_regular(module, SOURCE_LIMIT)
                except OSError:
                    continue  # the check of that file says why it cannot be read
                if not any(core in data for core in cores):
                    continue
                names = {found[1] for found in pattern.finditer(data) if not _off_self(data, found.start())}
                for name in names:
                    readers.setdefault(name.decode(), []).append(module)
            self._readers[top] = readers
        return self._readers[top]

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
            if not _off_self(data, start - 1):
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


@functools.cache
def _table_attribute() -> tuple[tuple[bytes, ...], re.Pattern[bytes]]:
    """What every word that names a table holds (`rotary.TABLE_NEEDLE_CORES`), and `.<table>`: an attribute named like
    one. Made on first use: a warm check imports no rotary analysis."""
    from rope_lint.rules.analysis.rotary import TABLE_NEEDLE_CORES, TABLE_NEEDLES

    needles = b"|".join(re.escape(needle.encode()) for needle in TABLE_NEEDLES)
    return tuple(core.encode() for core in TABLE_NEEDLE_CORES), re.compile(rb"\.(\w*(?:" + needles + rb")\w*)")


def _off_self(data: bytes, dot: int) -> bool:
    """Whether the attribute whose dot is at `dot` is read off `self` or `cls`."""
    start = dot
    while start > 0 and _IDENTIFIER.match(data, start - 1):
        start -= 1
    return data[start:dot] in (b"self", b"cls")
