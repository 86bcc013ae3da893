"""The result cache of `check`: findings by file content, so that a second run checks no file it has seen.

A file's findings are keyed by its bytes and the codes its path ignores (`content_key`); the cache file is named
by everything else its findings depend on: rope-lint's own code, the rules selected and their settings. Beside them
it keeps each file's status with its key (`files.status_signature`), so that a file whose status is unchanged is not
read again; the answers of the packages that a finding's public helpers send the check to (`callers`), with a
fingerprint of the package's files; and the origins that a generated transformers file's findings name
(`transformers.generated.origin_notes`), with the status of each file they were read from or looked for. It lives
in `.rope_lint_cache/` beside the configuration, which holds a `.gitignore` of its own, as ruff's cache does. Runs of
fewer files than `engine.LARGE_RUN` check them without it.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import Diagnostic, Fix, FixSafety, Position
from rope_lint.files import digest, input_status, read_regular
from rope_lint.rules import payloads

if TYPE_CHECKING:
    from typing import Any

    from rope_lint.files import FilePath

FOLDER = ".rope_lint_cache"
# A cache file no run has written for this long belongs to an old version or an old configuration.
_STALE_SECONDS = 30 * 24 * 3600
# The most of a cache file that is read: 100,000 entries (below) take a few tens of MB.
_SIZE_LIMIT = 256 * 1024 * 1024
# Past this many entries, a cache keeps only the files of the run that writes it.
_MAX_ENTRIES = 100_000
# The layout of an entry: a cache file of another layout is never read. 2: fixes hold typed payloads; 3: the helpers a
# finding rests on; 4: files' statuses and packages' answers beside the findings; 5: the tables a fix moves; 6: the
# origins of generated files' findings.
_FORMAT = "6"
# A cache file's parts: findings by content key, statuses and keys by path, answers by package, origin notes by path.
_PARTS = ("results", "files", "packages", "origins")


class ResultCache:
    def __init__(self, folder: str, settings_key: str) -> None:
        # Paths as strings: importing `pathlib` would cost a warm check, which reads this cache, a tenth of its run.
        self.folder = folder
        self.file = os.path.join(folder, f"check-{settings_key}.json")
        self._entries: dict[str, list[list[Any]]] = {}
        self._seen: dict[str, list[list[Any]]] = {}
        # A file's status and its key, by absolute path: of the cache file, and learnt by this run.
        self._statuses: dict[str, list[Any]] = {}
        self._learnt_statuses: dict[str, list[Any]] = {}
        # The packages' answers (`PackageCallers.remember`), of the cache file, then of this run.
        self.packages: dict[str, Any] = {}
        self._loaded_packages: dict[str, Any] = {}
        # Origin notes by absolute path, of the cache file and of this run (`origin_notes`), and the statuses of their
        # inputs as this run found them.
        self._origins: dict[str, Any] = {}
        self._seen_origins: dict[str, Any] = {}
        self._input_statuses: dict[str, list[int] | None] = {}
        try:
            # JSON, not pickle: a cache file is read from the project, and must not be able to run code. Only a regular
            # file, not a link, in a folder that is not a link: a cache in any other state is not followed, but ignored.
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                return
            loaded = json.loads(read_regular(self.file, _SIZE_LIMIT, follow_symlinks=False))
            if isinstance(loaded, dict) and all(isinstance(loaded.get(part), dict) for part in _PARTS):
                self._entries, self._statuses, self._loaded_packages, self._origins = (loaded[part] for part in _PARTS)
                self.packages = dict(self._loaded_packages)
        except (OSError, ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            pass  # no cache yet, or one that cannot be read: the run checks every file and writes a new one

    @classmethod
    def for_run(cls, root: FilePath, rule_codes: list[str], per_file_ignores: dict[str, list[str]]) -> ResultCache:
        settings = repr((sorted(rule_codes), sorted(per_file_ignores.items())))
        return cls(os.path.join(root, FOLDER), digest(f"{_FORMAT};{_code_version()}{settings}", 12))

    def __bool__(self) -> bool:
        """Whether the cache holds anything to look up."""
        return bool(self._entries)

    def key_by_status(self, absolute_path: str, status: list[int] | None) -> str | None:
        """The key of the file at `absolute_path` that an earlier run read, where its status (`status_signature`) is
        still what it was then, which this run has then learnt as `learn_status` would; None where it must be read."""
        known = self._statuses.get(absolute_path) if status is not None else None
        if not isinstance(known, list) or known[:-1] != status or not isinstance(known[-1], str):
            return None  # unknown, changed, or an entry this version did not write (`status` is never empty)
        self._learnt_statuses[absolute_path] = known  # the entry itself: `save` knows it unchanged by identity
        return known[-1]

    def learn_status(self, absolute_path: str, status: list[int] | None, key: str) -> None:
        """That the file at `absolute_path`, whose status was `status` before it was read, has the key `key`."""
        if status is not None:
            self._learnt_statuses[absolute_path] = [*status, key]

    def status_taken(self, absolute_path: str) -> list[int] | None:
        """The status this run took of the file at `absolute_path`, where it has looked the file up or checked it."""
        known = self._learnt_statuses.get(absolute_path)
        return None if known is None else known[:-1]

    def get(self, key: str, path: str) -> list[Diagnostic] | None:
        found = self._entries.get(key)
        if found is None:
            return None
        try:
            diagnostics = [_diagnostic(path, entry) for entry in found]
        except (TypeError, ValueError, KeyError):  # an entry this version did not write: check the file again
            return None
        self._seen[key] = found
        return diagnostics

    def put(self, key: str, diagnostics: list[Diagnostic]) -> None:
        self._seen[key] = [_entry(diagnostic) for diagnostic in diagnostics]

    def origin_notes(self, absolute_path: str, lines: set[int]) -> dict[int, str] | None:
        """The origin notes of `lines` of the generated file at `absolute_path` (`learn_origin_notes`), where an earlier
        run found them for those lines and every file they were read from or looked for is as it was then; None where
        they must be found again."""
        entry = self._origins.get(absolute_path)
        try:
            asked, notes, inputs = entry  # type: ignore[misc]
            if not lines.issubset(asked) or any(self._input_status(path) != status for path, status in inputs):
                return None
            found = {line: note for line, note in notes if type(line) is int and isinstance(note, str)}
        except (TypeError, ValueError):  # an entry this version did not write
            return None
        self._seen_origins[absolute_path] = entry
        return found

    def learn_origin_notes(
        self, absolute_path: str, lines: set[int], notes: dict[int, str], inputs: dict[str, list[int] | None]
    ) -> None:
        """The origin notes of `lines` of the generated file at `absolute_path`, found from `inputs` (each file read or
        looked for, with its status before: `files.input_status`); not kept where a status could not be told."""
        if all(status is not None for status in inputs.values()):
            self._seen_origins[absolute_path] = [sorted(lines), [[*item] for item in notes.items()], [*inputs.items()]]

    def _input_status(self, path: object) -> list[int] | None:
        if not isinstance(path, str):
            raise TypeError("an input is a path")
        if path not in self._input_statuses:
            self._input_statuses[path] = input_status(path)
        return self._input_statuses[path]

    def save(self) -> None:
        """Write the cache, atomically; a folder that cannot be written leaves the run uncached, not failed."""
        new = {key: found for key, found in self._seen.items() if key not in self._entries}
        statuses = {
            path: known
            for path, known in self._learnt_statuses.items()
            if (loaded := self._statuses.get(path)) is not known and loaded != known
        }
        origins = {key: entry for key, entry in self._seen_origins.items() if self._origins.get(key) is not entry}
        if not new and not statuses and not origins and self.packages == self._loaded_packages:
            return
        entries = {**self._entries, **new} if len(self._entries) + len(new) <= _MAX_ENTRIES else self._seen
        if len(self._statuses) + len(statuses) <= _MAX_ENTRIES:
            statuses = {**self._statuses, **statuses}
        else:
            statuses = self._learnt_statuses
        origins = (
            {**self._origins, **origins} if len(self._origins) + len(origins) <= _MAX_ENTRIES else self._seen_origins
        )
        try:
            os.makedirs(self.folder, exist_ok=True)
            if not stat.S_ISDIR(os.lstat(self.folder).st_mode):
                return  # a link in place of the folder: never written through
            _create_gitignore(os.path.join(self.folder, ".gitignore"))
            import tempfile  # only a run that learned something writes

            # mkstemp creates a file of its own (O_EXCL), and os.replace puts it in place of whatever is at `file`, a
            # link or a FIFO included, never writing through it.
            descriptor, temporary = tempfile.mkstemp(dir=self.folder, prefix=".tmp-")
        except OSError:
            return
        try:
            with os.fdopen(descriptor, "wb") as stream:
                parts = (entries, statuses, self.packages, origins)
                stream.write(json.dumps(dict(zip(_PARTS, parts, strict=True)), separators=(",", ":")).encode())
            os.replace(temporary, self.file)
            _remove_stale(self.folder)
        except OSError:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)


def _create_gitignore(path: str) -> None:
    """The cache folder's `.gitignore`, unless something is there already: O_EXCL and O_NOFOLLOW, so that a link in
    its place, dangling or not, is left alone and its target is never created or written."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(path, flags, 0o644)
    except FileExistsError:
        return
    with os.fdopen(descriptor, "w") as stream:
        stream.write("# Created by rope-lint\n*\n")


def _entry(diagnostic: Diagnostic) -> list[Any]:
    """A finding without its path, as JSON. A fix's payload is its type's name and its fields (`_payload`)."""
    fix = diagnostic.fix
    if fix is not None:
        payload = None if fix.payload is None else [type(fix.payload).__name__, *fix.payload]
        fix = [fix.safety.value, fix.adds_import, payload, *([list(fix.moves_tables)] if fix.moves_tables else [])]
    start, end = diagnostic.start, diagnostic.end
    return [
        *(diagnostic.code, diagnostic.name, diagnostic.message, start.line, start.column, end.line, end.column, fix),
        list(diagnostic.rests_on_helpers),
    ]


def _diagnostic(path: str, entry: list[Any]) -> Diagnostic:
    """The finding an `_entry` holds, at `path`; TypeError, ValueError or KeyError for anything else (a cache file is
    input like any other: a number such as 1e400, a string for a line, a list of the wrong length, an unknown
    safety)."""
    if not isinstance(entry, list) or len(entry) != 9:
        raise ValueError("an entry is a list of 9 fields")
    code, name, message, start_line, start_column, end_line, end_column, fix, helpers = entry
    if not isinstance(helpers, list) or not all(isinstance(text, str) for text in (code, name, message, *helpers)):
        raise TypeError("a finding's code, name, message and helpers are strings")
    if fix is not None:
        safety, adds_import, payload, *moved = fix
        tables = moved[0] if len(moved) == 1 else []
        if len(moved) > 1 or not isinstance(tables, list) or not all(isinstance(name, str) for name in tables):
            raise TypeError("a fix's moved tables are a list of names")
        if adds_import is not None and not isinstance(adds_import, str):
            raise TypeError("an import is a module's name")
        fix = Fix(_SAFETIES[safety], None if payload is None else _payload(*payload), adds_import, tuple(tables))
    start = Position(_offset(start_line), _offset(start_column))
    end = Position(_offset(end_line), _offset(end_column))
    return Diagnostic(path, code, name, message, start, end, fix, tuple(helpers))


# Each safety by its value: a lookup costs a tenth of calling the enum, once for each cached finding with a fix.
_SAFETIES = {safety.value: safety for safety in FixSafety}


def _offset(value: object) -> int:
    """A line or column as an entry holds it: an int (not a bool or a float), from 0 to what a file can have."""
    if type(value) is not int or not 0 <= value < 2**31:
        raise ValueError(f"{value!r} is no line or column")
    return value


def _payload(type_name: str, *fields: object) -> tuple:
    """The fix payload of the type of that name (`rules.payloads`), with those fields."""
    if any(field is not None and not isinstance(field, str | int) for field in fields):
        raise TypeError("a fix payload holds strings, numbers and flags")
    payload_type = payloads.BY_NAME.get(type_name)
    if payload_type is None:
        raise ValueError(f"no rule has a fix payload named {type_name!r}")
    return payload_type(*fields)


def content_key(data: bytes, ignored_codes: list[str]) -> str:
    """What a file's findings depend on besides the rules: its bytes, and the codes its path ignores."""
    import hashlib  # only a file that is read is keyed: a warm run reads none

    key = hashlib.sha256(data)  # the fastest of hashlib's here: SHA extensions in the CPU
    key.update(",".join(ignored_codes).encode())
    return key.hexdigest()[:32]  # 128 bits: each key is written twice in the cache, which a warm run reads whole


def _code_version() -> str:
    """rope-lint's version and the path, size and time of each of its modules, the rules' analyses and the prefilter
    among them: an edited rule is a new rule set."""
    parts, pending = [], [os.path.dirname(__file__)]
    while pending:
        with os.scandir(pending.pop()) as entries:  # each entry's type without a call: `os.walk` took twice as long
            for entry in entries:
                if entry.name.endswith(".py"):
                    found = entry.stat()
                    parts.append(f"{entry.path}:{found.st_size}:{found.st_mtime_ns}")
                elif entry.name != "__pycache__" and entry.is_dir():
                    pending.append(entry.path)
    from rope_lint import __version__

    return __version__ + ";" + ";".join(sorted(parts))


def _remove_stale(folder: str) -> None:
    now = time.time()
    for entry in os.scandir(folder):
        name = entry.name
        if name.startswith(("check-", ".tmp-")) and now - entry.stat(follow_symlinks=False).st_mtime > _STALE_SECONDS:
            os.unlink(entry.path)
