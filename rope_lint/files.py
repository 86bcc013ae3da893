"""Which files a run looks at, and how their bytes become text."""

from __future__ import annotations

import codecs
import errno
import fnmatch
import functools
import io
import os
import re
import stat
import time
from collections import namedtuple
from collections.abc import Iterable, Iterator

from rope_lint import TYPE_CHECKING

try:  # hashlib's own BLAKE2b: importing `hashlib` loads OpenSSL as well, a twentieth of a warm check's time
    from _blake2 import blake2b
except ImportError:  # a Python built without its own hash modules
    from hashlib import blake2b

if TYPE_CHECKING:
    from typing import TypeAlias

    # A file's path: the check path has strings (see `discover`); fixes and tests pass `Path`s too.
    FilePath: TypeAlias = str | os.PathLike[str]

# Folders no one wants linted, as ruff's default excludes name them (hidden folders are skipped too), and any
# virtual environment, found by its pyvenv.cfg.
_SKIPPED_FOLDERS = frozenset(
    {"__pycache__", "__pypackages__", "_build", "buck-out", "build", "dist", "node_modules", "site-packages", "venv"}
)


# The most a run reads of a source file. Hand-written source is rarely over 1 MB; past this a file is data, and a
# device or a file that keeps growing must not be read without end.
SOURCE_LIMIT = 50 * 1024 * 1024
# O_NONBLOCK: opening a FIFO must not wait for a writer (its type is checked once it is open). Neither flag exists on
# Windows, which has no FIFOs to open and whose links `lstat` sees.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_SPECIAL_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))


class RefusedFileError(OSError):
    """A file a run does not read or write: not a regular file, a link where none may be, or too large."""


def read_regular(path: FilePath, limit: int, follow_symlinks: bool = True, head: int | None = None) -> bytes:
    """The bytes of the regular file at `path`; with `head`, only its first `head` bytes, whatever its size. Raises
    IsADirectoryError for a folder, RefusedFileError for a FIFO, device or socket, for a link when `follow_symlinks`
    is false, and for a file over `limit` bytes (a file that grows while it is read included), and OSError for what
    the system refuses."""
    flags = os.O_RDONLY | getattr(os, "O_BINARY", 0) | _NONBLOCK | (0 if follow_symlinks else _NOFOLLOW)
    try:
        descriptor = os.open(path, flags)
    except OSError:
        if not follow_symlinks and os.path.islink(path):  # what O_NOFOLLOW's "too many levels of links" means
            raise RefusedFileError("a symbolic link, which is never followed here") from None
        raise
    try:
        status = os.fstat(descriptor)
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        if not stat.S_ISREG(status.st_mode):
            kind = next((kind for test, kind in _SPECIAL_KINDS if test(status.st_mode)), "a socket")
            raise RefusedFileError(f"not a regular file but {kind}, which is never read")
        if head is not None:
            return os.read(descriptor, head)
        too_large = f"larger than the {limit >> 20} MB a run reads of such a file"
        if status.st_size > limit:
            raise RefusedFileError(too_large)
        chunks: list[bytes] = []
        total, wanted = 0, status.st_size + 1  # one byte more than the size: the end shows in the first read
        while total <= limit:
            chunk = os.read(descriptor, min(wanted, limit + 1 - total))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
            wanted = 1 << 20
        raise RefusedFileError(f"{too_large} (it grew while it was read)")
    finally:
        os.close(descriptor)


# A file written this recently may be written again within one tick of the file system's clock and keep its size:
# until it is older, its status says nothing of its bytes (git's "racily clean" index entries).
_SETTLING_NS = 2_000_000_000


def status_signature(path: FilePath) -> list[int] | None:
    """What the file's status says of its bytes while it stays the same: its size, modification and change times and
    inode (a write, a rename over it or a restored modification time each change one). None where it cannot be
    read, or changed too recently to be told apart this way."""
    return input_status(path) or None


def input_status(path: FilePath) -> list[int] | None:
    """What a result that read the file at `path`, or looked for one there, depends on: its `status_signature`, or []
    where nothing is there; None where that cannot be told (a file written too recently, one that cannot be read)."""
    try:
        status = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError:
        return None
    found = [status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino]
    recent = time.time_ns() - _SETTLING_NS
    return None if found[1] > recent or found[2] > recent else found


def resolved(path: FilePath) -> str:
    """`os.path.realpath(path)`, the folder above the file resolved once a run (`resolve_afresh`): `realpath` asks the
    system about every folder above a file, for each of a tree's thousands of files (0.2 s a fix of the transformers
    5.24.0 package waited for). A file that is a link itself, and a path that climbs (`..`), are resolved whole. A
    link loop does not raise: the file is read later, and reported as an RPL901 finding."""
    spelled = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(spelled))
    if name in ("", ".", "..") or ".." in spelled.split(os.sep) or os.path.islink(spelled):
        return os.path.realpath(spelled)
    return os.path.join(_resolved_folder(folder), name)


@functools.lru_cache(maxsize=4096)
def _resolved_folder(folder: str) -> str:
    return os.path.realpath(folder)


def resolve_afresh() -> None:
    """Forget the folders that `resolved` has met: each run resolves its own, whatever a run before it in the same
    process found there."""
    _resolved_folder.cache_clear()


def digest(text: str, size: int) -> str:
    """The hex BLAKE2b digest, of `size` bytes, of `text`: the files' statuses that a package's fingerprint is made of,
    or what a cache file's findings depend on."""
    return blake2b(text.encode(), digest_size=size).hexdigest()


class Excludes:
    """Glob patterns, matched like ruff's `exclude`: against the path relative to the config's folder, and
    against every trailing part of it (so `fixtures` excludes `a/fixtures/b.py`)."""

    def __init__(self, patterns: Iterable[str], root: FilePath) -> None:
        self.patterns = [pattern.rstrip("/") for pattern in patterns]
        self.root = root

    def __call__(self, path: FilePath) -> bool:
        if not self.patterns:
            return False
        real, root = resolved(path), resolved(self.root)
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            relative = os.path.relpath(real, root)
        else:
            relative = as_given(os.fspath(path))
        relative = relative.replace(os.sep, "/")
        parts = relative.split("/")
        candidates = {relative, *("/".join(parts[i:]) for i in range(len(parts))), *parts}
        return any(fnmatch.fnmatchcase(candidate, pattern) for pattern in self.patterns for candidate in candidates)


def discover(paths: Iterable[str], excluded: Excludes, listings: Listings | None = None) -> Iterator[str]:
    """Python files under `paths`, in a stable order, spelled as `pathlib` would (`./a.py` as `a.py`). Excludes
    apply to files named explicitly too, as pre-commit passes every staged file by name. Paths are strings, not
    `Path`s: a one-file check would spend more on importing `pathlib` than on the check. `listings`: the folders this
    run has listed already, which are not listed again."""
    for given in paths:
        path = as_given(given)
        if os.path.isdir(path):
            yield from _walk(path, excluded, Listings() if listings is None else listings)
        elif not excluded(path):
            yield path


def as_given(path: str) -> str:
    """`path` as `str(Path(path))` spells it: without `.` parts and repeated or trailing separators (and, on
    Windows, with `/` as `\\`)."""
    if os.altsep:
        path = path.replace(os.altsep, os.sep)
    parts = [part for part in path.split(os.sep) if part not in ("", ".")]
    double = os.sep * 2  # POSIX leaves two leading slashes to the system, and pathlib keeps them
    root = double if path.startswith(double) and not path.startswith(os.sep * 3) else os.sep * path.startswith(os.sep)
    return root + os.sep.join(parts) or "."


def absolute_paths(paths: list[FilePath]) -> list[str]:
    """`os.path.abspath` of each path, each folder's made once: a file's name has nothing to resolve. `os.path`'s
    split and join took a warm check of 1,337 files longer than `abspath` did; a folder is its spelling up to the last
    separator (on POSIX, where that is the only separator and a path has no drive)."""
    if os.altsep is not None:
        return [os.path.abspath(path) for path in paths]
    prefixes: dict[str, str] = {}  # a folder's spelling, with its separator, and its absolute path, with one
    absolute = []
    for path in map(os.fspath, paths):
        folder, separator, name = path.rpartition(os.sep)
        if name in ("", ".", ".."):
            absolute.append(os.path.abspath(path))
            continue
        spelled = folder + separator
        prefix = prefixes.get(spelled)
        if prefix is None:
            prefix = os.path.abspath(spelled or ".")
            prefix = prefixes[spelled] = prefix if prefix.endswith(os.sep) else prefix + os.sep
        absolute.append(prefix + name)
    return absolute


class Listings(dict):
    """What a run found in each folder it listed, by absolute path: the folder's Python files and the subfolders to
    walk, in name order, before any exclude, and whether it is a virtual environment. A warm check walks the tree,
    then the package that holds it for its fingerprint (`PackageCallers`): the tree's folders are listed once. For one
    run: a listing is the folder as it was when the run listed it."""


def _walk(folder: str, excluded: Excludes, listings: Listings) -> Iterator[str]:
    """The Python files under `folder` in `os.walk`'s order (top-down, names sorted), never inside a link to a
    folder."""
    top = "" if folder == "." else folder  # pathlib spells `./a/b.py` as `a/b.py`
    pending = [(top, os.path.abspath(folder))]  # each folder as spelled, and its absolute path
    while pending:
        root, key = pending.pop()
        listing = listings.get(key, False)
        if listing is False:
            try:
                listing = listings[key] = _listing(root)
            except OSError as error:
                # Reading it reports why it cannot be listed (engine.read).
                yield as_given(error.filename or root or ".")
                continue
        files, folders, is_environment = listing
        if is_environment and root != top:
            continue
        prefix = root if not root or root.endswith(os.sep) else root + os.sep  # `os.path.join`, a call less per file
        paths = [prefix + name for name in files]
        absolute = key if key.endswith(os.sep) else key + os.sep
        subfolders = [(prefix + name, absolute + name) for name in reversed(folders)]
        if excluded.patterns:
            paths = [path for path in paths if not excluded(path)]
            subfolders = [pair for pair in subfolders if not excluded(pair[0])]
        yield from paths
        pending += subfolders


def _listing(root: str) -> tuple[list[str], list[str], bool]:
    """The Python files and the subfolders to walk in `root`, in name order, and whether it is a virtual environment.
    The folder is listed once, and the entries' types say the rest: a virtual environment is known by the `pyvenv.cfg`
    in its own listing and a link by its entry, where `os.walk` with a filter asks the system again for every folder,
    twice."""
    with os.scandir(root or ".") as listing:
        entries = list(listing)
    is_environment = any(entry.name == "pyvenv.cfg" for entry in entries) and os.path.exists(
        os.path.join(root, "pyvenv.cfg")
    )
    folders, files = [], []
    for entry in entries:
        if _is_folder(entry):
            if not entry.name.startswith(".") and entry.name not in _SKIPPED_FOLDERS and not _is_link(entry):
                folders.append(entry.name)  # a link to a folder is not walked into, as in `os.walk`
        elif entry.name.endswith((".py", ".pyi")):
            files.append(entry.name)
    return sorted(files), sorted(folders), is_environment


def _is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:  # as in `os.walk`: an entry whose type cannot be read is taken for a file
        return False


def _is_link(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return False


class SourceFile(namedtuple("SourceFile", ("path", "data", "text", "encoding", "bom"))):
    """A file's bytes and its text, with what it takes to write edited text back byte for byte."""

    __slots__ = ()
    path: FilePath
    data: bytes
    text: str
    encoding: str
    bom: bool

    @classmethod
    def decode(cls, path: FilePath, data: bytes) -> SourceFile:
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

    encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    # Python refuses a cookie that names an encoding in which the cookie itself does not read (UTF-16, UTF-32): the
    # text would decode to something else than the bytes say.
    if encoding != "utf-8-sig" and _ASCII_SAMPLE.encode(encoding, errors="replace") != _ASCII_SAMPLE.encode():
        raise SyntaxError(f"encoding problem: {encoding} is not ASCII-compatible, as Python source must be")
    return encoding


_ASCII_SAMPLE = "# -*- coding: x -*-\nimport a_b\n"


# PEP 263's cookie, as `tokenize` matches it; compiled on first use, by `re`'s cache.
_CODING_COOKIE = rb"[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)"


def _is_utf8(name: bytes) -> bool:
    """Whether `tokenize` names this encoding "utf-8" (it takes "UTF_8" and "utf-8-unix" so too, not "utf8")."""
    normal = name[:12].lower().replace(b"_", b"-")
    return normal == b"utf-8" or normal.startswith(b"utf-8-")
