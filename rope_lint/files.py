"""Which files a run looks at, and how their bytes become text."""

from __future__ import annotations

import codecs
import fnmatch
import io
import os
import re
from collections import namedtuple
from collections.abc import Iterable, Iterator
from pathlib import Path

# Folders no one wants linted, as ruff's default excludes name them (hidden folders are skipped too), and any
# virtual environment, found by its pyvenv.cfg.
_SKIPPED_FOLDERS = frozenset(
    {"__pycache__", "__pypackages__", "_build", "buck-out", "build", "dist", "node_modules", "site-packages", "venv"}
)


class Excludes:
    """Glob patterns, matched like ruff's `exclude`: against the path relative to the config's folder, and
    against every trailing part of it (so `fixtures` excludes `a/fixtures/b.py`)."""

    def __init__(self, patterns: Iterable[str], root: Path) -> None:
        self.patterns = [pattern.rstrip("/") for pattern in patterns]
        self.root = root

    def __call__(self, path: Path) -> bool:
        if not self.patterns:
            return False
        try:
            relative = path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            relative = path.as_posix()
        parts = relative.split("/")
        candidates = {relative, *("/".join(parts[i:]) for i in range(len(parts))), *parts}
        return any(fnmatch.fnmatchcase(candidate, pattern) for pattern in self.patterns for candidate in candidates)


def discover(paths: Iterable[str], excluded: Excludes) -> Iterator[Path]:
    """Python files under `paths`, in a stable order. Excludes apply to files named explicitly too, as
    pre-commit passes every staged file by name."""
    for given in paths:
        path = Path(given)
        if path.is_dir():
            yield from _walk(path, excluded)
        elif not excluded(path):
            yield path


def _walk(folder: Path, excluded: Excludes) -> Iterator[Path]:
    unreadable: list[OSError] = []
    # Strings, not Paths, until a file is yielded: a Path per folder entry costs more than the walk.
    for root, folders, files in os.walk(folder, onerror=unreadable.append):
        # A folder that cannot be listed is yielded itself, so that reading it reports why (engine.read).
        while unreadable:
            failed = unreadable.pop()
            yield Path(failed.filename or root)
        folders[:] = sorted(
            name
            for name in folders
            if not name.startswith(".")
            and name not in _SKIPPED_FOLDERS
            and not os.path.exists(os.path.join(root, name, "pyvenv.cfg"))
            and not (excluded.patterns and excluded(Path(root, name)))
        )
        for name in sorted(files):
            if name.endswith((".py", ".pyi")) and not (excluded.patterns and excluded(Path(root, name))):
                yield Path(root, name)
    while unreadable:
        failed = unreadable.pop()
        yield Path(failed.filename or folder)


class SourceFile(namedtuple("SourceFile", ("path", "data", "text", "encoding", "bom"))):
    """A file's bytes and its text, with what it takes to write edited text back byte for byte."""

    __slots__ = ()
    path: Path
    data: bytes
    text: str
    encoding: str
    bom: bool

    @classmethod
    def read(cls, path: Path) -> SourceFile:
        """Raises OSError, or ValueError for bytes that are not source text."""
        return cls.decode(path, path.read_bytes())

    @classmethod
    def decode(cls, path: Path, data: bytes) -> SourceFile:
        """Raises ValueError for bytes that are not source text."""
        try:
            # A PEP 263 coding cookie or a UTF-8 BOM decides the encoding, as for Python itself.
            encoding = _declared_encoding(data)
            bom = encoding == "utf-8-sig"
            encoding = "utf-8" if bom else encoding
            text = data.removeprefix(codecs.BOM_UTF8).decode(encoding) if bom else data.decode(encoding)
        except (UnicodeDecodeError, SyntaxError, LookupError) as error:
            raise ValueError(f"cannot decode: {error}") from None
        return cls(path, data, text, encoding, bom)

    def encode(self, text: str) -> bytes:
        """Edited text back to bytes, in the file's own encoding and with its BOM."""
        return (codecs.BOM_UTF8 if self.bom else b"") + text.encode(self.encoding)


def _declared_encoding(data: bytes) -> str:
    """The encoding Python reads `data` in. Most files declare nothing, or UTF-8 on their first line (`# coding=utf-8`
    heads most of transformers): those skip `tokenize`, which costs more to import than a file takes to check."""
    first = data.find(b"\n")
    second = data.find(b"\n", first + 1) if first != -1 else -1
    head = data if second == -1 else data[:second]  # a cookie is on the first or second line
    if not data.startswith(codecs.BOM_UTF8):
        if b"coding" not in head:
            return "utf-8"
        cookie = re.match(_CODING_COOKIE, data[: first if first != -1 else None])
        if cookie and _is_utf8(cookie[1]):
            return "utf-8"  # a cookie on the first line rules, whatever the second says
    import tokenize

    return tokenize.detect_encoding(io.BytesIO(data).readline)[0]


# PEP 263's cookie, as `tokenize` matches it; compiled on first use, by `re`'s cache.
_CODING_COOKIE = rb"[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)"


def _is_utf8(name: bytes) -> bool:
    """Whether `tokenize` names this encoding "utf-8" (it takes "UTF_8" and "utf-8-unix" so too, not "utf8")."""
    normal = name[:12].lower().replace(b"_", b"-")
    return normal == b"utf-8" or normal.startswith(b"utf-8-")
