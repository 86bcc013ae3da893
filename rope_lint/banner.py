"""The banner of a file that transformers generates from a modular source: whether a file carries one, and the
modular source it names. Read from the file's first bytes, without parsing: most files that a check or a fix meets
are hand-written, and only a generated file's findings need syntax trees to find where they are written
(`generated`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable

from rope_lint import TYPE_CHECKING
from rope_lint.files import SOURCE_LIMIT, read_regular, resolved

if TYPE_CHECKING:
    from rope_lint.files import FilePath

# The pattern compiles on first use, by `re`'s cache: most checks meet no generated file.
_BANNER_TEXT = "This file was automatically generated from"
_BANNER = _BANNER_TEXT + r" (\S*?modular_\w+\.py)"
_BANNER_SPAN = 2048  # the banner is the file's first comment block


def is_modular_source(path: FilePath) -> bool:
    """A transformers modular source (`modular_<model>.py`), which transformers runs only through the file it
    generates from it."""
    return os.path.basename(path).startswith("modular_")


def has_banner(text: str) -> bool:
    """Whether the text begins as a file that transformers generates from a modular source does."""
    return _BANNER_TEXT in text[:_BANNER_SPAN]


def modular_source(path: FilePath, text: str, is_file: Callable[[str], bool] = os.path.isfile) -> str | None:
    """The modular file named in a generated file's banner (links resolved), or None for a hand-written file or where
    `is_file` says that no file is there."""
    match = re.search(_BANNER, text[:_BANNER_SPAN])
    if match is None:
        return None
    candidate = os.path.join(os.path.dirname(resolved(path)), os.path.basename(match.group(1)))
    return candidate if is_file(candidate) else None


def generated_text(path: FilePath) -> str | None:
    """The file's text when it has the banner, else None. Only the banner's span is read of a file without one."""
    try:
        if not _begins_with_banner(path):
            return None
        data = read_regular(path, SOURCE_LIMIT)  # the file of that banner, unless it was written over since
        return data.decode("utf-8") if _BANNER_TEXT.encode() in data[:_BANNER_SPAN] else None
    except (OSError, UnicodeDecodeError):
        return None


def generated_paths(paths: Iterable[str]) -> list[str]:
    """Those of `paths` whose files begin with the banner, each once, in order: only the banner's span is read."""
    found = []
    for path in dict.fromkeys(paths):
        try:
            if _begins_with_banner(path):
                found.append(path)
        except OSError:
            continue
    return found


def _begins_with_banner(path: FilePath) -> bool:
    return _BANNER_TEXT.encode() in read_regular(path, SOURCE_LIMIT, head=_BANNER_SPAN)
