"""Writing a fixed file: all of it or none of it, with its mode, encoding, BOM and line endings kept, and only where
the run was asked to write.

A fix writes regular files only, never through a symbolic link (the file itself, or a folder on the way that leads
out of the paths given), and only under the paths given on the command line, or, for the modular sources and parent
models that a transformers fix also edits, under the transformers package they belong to.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from rope_lint.files import SOURCE_LIMIT, RefusedFileError, SourceFile, read_regular

# What `write_atomically` names its temporary file (mkstemp's 8 random characters between the file's name and the
# suffix): a run killed between creating and renaming it leaves one behind.
_SUFFIX = ".rope-lint"
_TEMPORARY = re.compile(r"\.(.+\.pyi?)\.[a-z0-9_]{8}" + re.escape(_SUFFIX))
# A temporary lives for the milliseconds of one write: one older than this is a killed run's, and a younger one may be
# a run going on beside this one.
_STALE_TEMPORARY_SECONDS = 60


def write_atomically(source: SourceFile, text: str) -> None:
    """Replace the file with the edited text, or leave it as it was.

    The new bytes go to a temporary file in the same folder, which is renamed over the original, so a
    reader sees the old file or the new one and never half of one. The mode bits, encoding and BOM stay.
    Raises OSError: RefusedFileError for a link or anything but a regular file, which is never written, and
    FileChangedError when the file changed on disk since it was read.
    """
    path = os.fspath(source.path)
    status = os.lstat(path)
    if stat.S_ISLNK(status.st_mode):
        raise RefusedFileError(f"{path} is a symbolic link; a fix never writes through one")
    if read_regular(path, SOURCE_LIMIT, follow_symlinks=False) != source.data:
        raise FileChangedError(f"{path} changed on disk since it was read; not written")
    handle, temporary = tempfile.mkstemp(
        dir=os.path.dirname(path) or os.curdir, prefix=f".{os.path.basename(path)}.", suffix=_SUFFIX
    )
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(source.encode(text))
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, status.st_mode & 0o7777)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class FileChangedError(OSError):
    pass


def writable_roots(paths: Iterable[str]) -> list[str]:
    """The folders (or files) under which a fix of `paths` may write. A relative path is taken as spelled below the
    working folder, links and all, so that `tree/link/a.py` with `link` leading elsewhere leads nowhere; an absolute
    one with the folders above it resolved (a system may put a project behind a link, `/home` to `/mnt/home`), not its
    own last part, so that a path that is itself a link leads nowhere either."""
    working = os.path.realpath(os.curdir)
    roots = []
    for given in paths:
        if os.path.isabs(given):
            absolute = os.path.normpath(given)
            roots.append(os.path.join(os.path.realpath(os.path.dirname(absolute)), os.path.basename(absolute)))
        else:
            roots.append(os.path.normpath(os.path.join(working, given)))
    return roots


def why_not_writable(path: str | os.PathLike[str], roots: Iterable[str]) -> str | None:
    """None when a fix may write `path`: a regular file, not a link, whose real path lies under one of `roots`.
    Otherwise why not, as a line for the user."""
    try:
        status = os.lstat(path)
    except OSError:
        return None  # reading it reports why it cannot be read
    if stat.S_ISLNK(status.st_mode):
        return "a symbolic link; not fixed, as a fix never writes through a link"
    real = os.path.realpath(path)
    if not any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots):
        return f"resolves to {real}, out of the paths given, through a linked folder; not fixed"
    return None


def remove_stale_temporaries(files: Iterable[str | os.PathLike[str]]) -> None:
    """Remove the temporary files that a killed run of `write_atomically` left in the folders of `files`: regular
    files named as it names them, and last written a while before this run."""
    oldest = time.time() - _STALE_TEMPORARY_SECONDS
    for folder in sorted({os.path.dirname(os.fspath(path)) or os.curdir for path in files}):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if not _TEMPORARY.fullmatch(entry.name):
                continue
            try:
                status = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(status.st_mode) and status.st_mtime < oldest:
                    os.unlink(entry.path)
            except OSError:
                continue
