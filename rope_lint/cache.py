"""The result cache of `check`: findings by file content, so that a second run reads files but checks none.

A file's entry is keyed by its bytes and the codes its path ignores (`content_key`); the cache file is named
by everything else its findings depend on: rope-lint's own code, the rules selected and their settings. It lives in
`.rope_lint_cache/` beside the configuration, which holds a `.gitignore` of its own, as ruff's cache does. Runs of
fewer files than `engine.LARGE_RUN` check them without it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import Diagnostic, Fix, FixSafety, Position
from rope_lint.rules import ALL_RULES

if TYPE_CHECKING:
    from typing import Any

    from rope_lint.files import FilePath

FOLDER = ".rope_lint_cache"
# A cache file no run has written for this long belongs to an old version or an old configuration.
_STALE_SECONDS = 30 * 24 * 3600
# Past this many entries, a cache keeps only the files of the run that writes it.
_MAX_ENTRIES = 100_000
# The layout of an entry: a cache file of another layout is never read. 2: fixes hold typed payloads.
_FORMAT = "2"
# The fix payloads an entry can hold, by their type's name.
_PAYLOAD_TYPES = {payload.__name__: payload for rule in ALL_RULES for payload in rule.fix_payloads}


class ResultCache:
    def __init__(self, folder: Path, settings_key: str) -> None:
        self.folder = folder
        self.file = folder / f"check-{settings_key}.json"
        self._entries: dict[str, list[list[Any]]] = {}
        self._seen: dict[str, list[list[Any]]] = {}
        try:
            # JSON, not pickle: a cache file is read from the project, and must not be able to run code.
            with self.file.open("rb") as stream:
                loaded = json.load(stream)
            if isinstance(loaded, dict):
                self._entries = loaded
        except (OSError, ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            pass  # no cache yet, or one that cannot be read: the run checks every file and writes a new one

    @classmethod
    def for_run(cls, root: FilePath, rule_codes: list[str], per_file_ignores: dict[str, list[str]]) -> ResultCache:
        digest = hashlib.blake2b(f"{_FORMAT};{_code_version()}".encode(), digest_size=12)
        digest.update(repr((sorted(rule_codes), sorted(per_file_ignores.items()))).encode())
        return cls(Path(root) / FOLDER, digest.hexdigest())

    def __bool__(self) -> bool:
        """Whether the cache holds anything to look up."""
        return bool(self._entries)

    def get(self, key: str, path: str) -> list[Diagnostic] | None:
        found = self._entries.get(key)
        if found is None:
            return None
        try:
            diagnostics = [_diagnostic(path, entry) for entry in found]
        except (TypeError, ValueError):  # an entry this version did not write: check the file again
            return None
        self._seen[key] = found
        return diagnostics

    def put(self, key: str, diagnostics: list[Diagnostic]) -> None:
        self._seen[key] = [_entry(diagnostic) for diagnostic in diagnostics]

    def save(self) -> None:
        """Write the cache, atomically; a folder that cannot be written leaves the run uncached, not failed."""
        new = {key: found for key, found in self._seen.items() if key not in self._entries}
        if not new:
            return
        entries = {**self._entries, **new} if len(self._entries) + len(new) <= _MAX_ENTRIES else self._seen
        try:
            self.folder.mkdir(exist_ok=True)
            ignore = self.folder / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# Created by rope-lint\n*\n")
            import tempfile  # only a run that learned something writes

            descriptor, temporary = tempfile.mkstemp(dir=self.folder, prefix=".tmp-")
        except OSError:
            return
        try:
            with os.fdopen(descriptor, "wb") as stream:
                stream.write(json.dumps(entries, separators=(",", ":")).encode())
            os.replace(temporary, self.file)
            _remove_stale(self.folder)
        except OSError:
            Path(temporary).unlink(missing_ok=True)


def _entry(diagnostic: Diagnostic) -> list[Any]:
    """A finding without its path, as JSON. A fix's payload is its type's name and its fields (`_payload`)."""
    fix = diagnostic.fix
    if fix is not None:
        payload = None if fix.payload is None else [type(fix.payload).__name__, *fix.payload]
        fix = [fix.safety.value, fix.adds_import, payload]
    start, end = diagnostic.start, diagnostic.end
    return [diagnostic.code, diagnostic.name, diagnostic.message, start.line, start.column, end.line, end.column, fix]


def _diagnostic(path: str, entry: list[Any]) -> Diagnostic:
    """The finding an `_entry` holds, at `path`; TypeError or ValueError for anything else."""
    code, name, message, start_line, start_column, end_line, end_column, fix = entry
    if fix is not None:
        safety, adds_import, payload = fix
        if adds_import is not None and not isinstance(adds_import, str):
            raise TypeError("an import is a module's name")
        fix = Fix(FixSafety(safety), None if payload is None else _payload(*payload), adds_import)
    start, end = Position(int(start_line), int(start_column)), Position(int(end_line), int(end_column))
    return Diagnostic(path, str(code), str(name), str(message), start, end, fix)


def _payload(type_name: str, *fields: object) -> tuple:
    """The fix payload of the type that rules declare under that name (`Rule.fix_payloads`), with those fields."""
    if any(field is not None and not isinstance(field, str | int) for field in fields):
        raise TypeError("a fix payload holds strings, numbers and flags")
    payload_type = _PAYLOAD_TYPES.get(type_name)
    if payload_type is None:
        raise ValueError(f"no rule has a fix payload named {type_name!r}")
    return payload_type(*fields)


def content_key(data: bytes, ignored_codes: list[str]) -> str:
    """What a file's findings depend on besides the rules: its bytes, and the codes its path ignores."""
    digest = hashlib.sha256(data)  # the fastest of hashlib's here: SHA extensions in the CPU
    digest.update(",".join(ignored_codes).encode())
    return digest.hexdigest()


def _code_version() -> str:
    """rope-lint's version and the size and time of each of its modules: an edited rule is a new rule set."""
    package = Path(__file__).parent
    parts = []
    for folder, subfolders, names in os.walk(package):  # the rules' analyses and the prefilter too
        subfolders[:] = [name for name in subfolders if name != "__pycache__"]
        for name in names:
            if name.endswith(".py"):
                stat = os.stat(os.path.join(folder, name))
                parts.append(f"{os.path.relpath(folder, package)}/{name}:{stat.st_size}:{stat.st_mtime_ns}")
    from rope_lint import __version__

    return __version__ + ";" + ";".join(sorted(parts))


def _remove_stale(folder: Path) -> None:
    now = time.time()
    for entry in os.scandir(folder):
        if entry.name.startswith(("check-", ".tmp-")) and now - entry.stat().st_mtime > _STALE_SECONDS:
            os.unlink(entry.path)
