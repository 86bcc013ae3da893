"""Writing a fixed file: all of it or none of it, with its mode, encoding, BOM and line endings kept."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from rope_lint.files import SourceFile


def write_atomically(source: SourceFile, text: str) -> None:
    """Replace the file with the edited text, or leave it as it was.

    The new bytes go to a temporary file in the same folder, which is renamed over the original, so a
    reader sees the old file or the new one and never half of one. The mode bits, encoding and BOM stay.
    Raises OSError, or FileChangedError when the file changed on disk since it was read.
    """
    path = source.path.resolve()  # through a symlink to the file it names, which keeps the link a link
    if path.read_bytes() != source.data:
        raise FileChangedError(f"{path} changed on disk since it was read; not written")
    mode = path.stat().st_mode
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".rope-lint")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(source.encode(text))
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode & 0o7777)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class FileChangedError(OSError):
    pass
