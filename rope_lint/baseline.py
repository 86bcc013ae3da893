"""Gate on new code only: a baseline file of known findings, and leaving those out of a later run.

A finding is known by its path, its code and its snippet (the source text of its range, whitespace collapsed),
never by its line: code added or removed above a finding moves it without making it new. Matching counts: two
identical findings in a file with one in the baseline leave one reported. Paths are stored relative to the
baseline's folder, so the file works from any working directory. Findings about the run itself (RPL9xx) are
never baselined: a file that cannot be read or parsed must always be seen.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import ERROR_CODES, Diagnostic
from rope_lint.engine import read
from rope_lint.files import read_regular
from rope_lint.rules.analysis.context import physical_lines

if TYPE_CHECKING:
    from rope_lint.files import FilePath

Key = tuple[str, str, str]
VERSION = 1
# The most of a baseline file that is read: a finding takes about 200 bytes, so this is a million findings, and
# `--baseline /dev/zero` or a runaway file stops here.
SIZE_LIMIT = 200 * 1024 * 1024


class BaselineError(ValueError):
    """A baseline file that is missing or not ours."""


def write(path: FilePath, diagnostics: list[Diagnostic]) -> int:
    """Write the baseline; returns how many findings it holds."""
    path = Path(path)
    counts = _keys(diagnostics, path.resolve().parent)
    entries = [
        {"path": p, "code": code, "snippet": snippet, "count": count}
        for (p, code, snippet), count in sorted(counts.items())
    ]
    path.write_text(json.dumps({"version": VERSION, "findings": entries}, indent=2, ensure_ascii=False) + "\n")
    return sum(counts.values())


def load(path: FilePath) -> Counter[Key]:
    path = Path(path)
    try:
        data = json.loads(read_regular(path, SIZE_LIMIT))
        if data.get("version") != VERSION:
            raise BaselineError(f"{path}: not a rope-lint baseline (version {data.get('version')!r})")
        return Counter({(e["path"], e["code"], e["snippet"]): int(e["count"]) for e in data["findings"]})
    except OSError as error:
        raise BaselineError(f"cannot read baseline {path}: {error.strerror or error}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise BaselineError(f"{path}: not a rope-lint baseline ({error})") from None
    except RecursionError:  # JSON nested deeper than the parser's recursion: no file rope-lint wrote
        raise BaselineError(f"{path}: not a rope-lint baseline (nested too deeply)") from None


def new_findings(diagnostics: list[Diagnostic], baseline_path: FilePath) -> list[Diagnostic]:
    """The findings the baseline does not hold, in their order."""
    remaining = load(baseline_path)
    root = Path(baseline_path).resolve().parent
    snippets = _Snippets()
    kept = []
    for diagnostic in diagnostics:
        key = None if diagnostic.code in ERROR_CODES else _key(diagnostic, root, snippets)
        if key is not None and remaining[key] > 0:
            remaining[key] -= 1
        else:
            kept.append(diagnostic)
    return kept


def _keys(diagnostics: list[Diagnostic], root: Path) -> Counter[Key]:
    snippets = _Snippets()
    return Counter(_key(d, root, snippets) for d in diagnostics if d.code not in ERROR_CODES)


def _key(diagnostic: Diagnostic, root: Path, snippets: _Snippets) -> Key:
    path = Path(os.path.relpath(Path(diagnostic.path).resolve(), root)).as_posix()
    return (path, diagnostic.code, snippets(diagnostic))


class _Snippets:
    """A finding's source text with whitespace collapsed, each file read once."""

    def __init__(self) -> None:
        self._lines: dict[str, list[str]] = {}

    def __call__(self, diagnostic: Diagnostic) -> str:
        if diagnostic.path not in self._lines:
            source = read(Path(diagnostic.path))
            # Lines as Python numbers them: `str.splitlines` also breaks at a form feed.
            lines = [] if isinstance(source, Diagnostic) else physical_lines(source.text)
            self._lines[diagnostic.path] = [line.rstrip("\r\n") for line in lines]
        lines = self._lines[diagnostic.path][diagnostic.start.line - 1 : diagnostic.end.line]
        if not lines:
            return ""
        if len(lines) == 1:
            text = lines[0][diagnostic.start.column : diagnostic.end.column]
        else:
            text = "\n".join([lines[0][diagnostic.start.column :], *lines[1:-1], lines[-1][: diagnostic.end.column]])
        return " ".join(text.split())
