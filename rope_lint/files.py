"""Which files a run looks at, and how their bytes become text."""

from __future__ import annotations

import codecs
import fnmatch
import io
import os
import tokenize
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

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
    for root, folders, files in os.walk(folder, onerror=unreadable.append):
        # A folder that cannot be listed is yielded itself, so that reading it reports why (engine.read).
        while unreadable:
            failed = unreadable.pop()
            yield Path(failed.filename or root)
        here = Path(root)
        folders[:] = sorted(
            name
            for name in folders
            if not name.startswith(".")
            and name not in _SKIPPED_FOLDERS
            and not (here / name / "pyvenv.cfg").exists()
            and not excluded(here / name)
        )
        for name in sorted(files):
            if name.endswith((".py", ".pyi")) and not excluded(here / name):
                yield here / name
    while unreadable:
        failed = unreadable.pop()
        yield Path(failed.filename or folder)


class SourceFile(NamedTuple):
    """A file's bytes and its text, with what it takes to write edited text back byte for byte."""

    path: Path
    data: bytes
    text: str
    encoding: str
    bom: bool

    @classmethod
    def read(cls, path: Path) -> SourceFile:
        """Raises OSError, or ValueError for bytes that are not source text."""
        data = path.read_bytes()
        try:
            # A PEP 263 coding cookie or a UTF-8 BOM decides the encoding, as for Python itself.
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
            bom = encoding == "utf-8-sig"
            encoding = "utf-8" if bom else encoding
            text = data.removeprefix(codecs.BOM_UTF8).decode(encoding) if bom else data.decode(encoding)
        except (UnicodeDecodeError, SyntaxError, LookupError) as error:
            raise ValueError(f"cannot decode: {error}") from None
        return cls(path, data, text, encoding, bom)

    def encode(self, text: str) -> bytes:
        """Edited text back to bytes, in the file's own encoding and with its BOM."""
        return (codecs.BOM_UTF8 if self.bom else b"") + text.encode(self.encoding)
