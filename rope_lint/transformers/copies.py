"""`# Copied from transformers.X.Y with A->B` groups, checked the way transformers' `utils/check_copies.py` checks them.

A copy is the class or function under such a comment; it must equal its source after the renames, with blank lines
dropped, blocks holding `# Ignore copy` left out on both sides, and the source's header name read as the copy's.
A fix applied to a source and all its copies keeps them equal only if it rewrites each the same way, so `fix` checks
the groups it touched and reports any that it made diverge (`COPY_DIVERGED`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from rope_lint import ruff
from rope_lint.diagnostics import COPY_DIVERGED, Diagnostic, Position
from rope_lint.files import SOURCE_LIMIT, read_regular, resolved
from rope_lint.rules.analysis.context import physical_lines
from rope_lint.transformers import generated

_COPY_COMMENT = re.compile(r"^(\s*)#\s*Copied from\s+transformers\.(\S+\.\S+)\s*($|\S.*$)")
_RENAME = re.compile(r"^\s*(\S+)->(\S+)(\s+.*|$)")
_HEADER_END = re.compile(r"^\s*\)(\s*->.*:|:)\s*$")
_IGNORED = "# Ignore copy"
_CHAIN_LIMIT = 16  # a copy of a copy of ...: deeper than any real chain, and a guard against a cycle of comments


@dataclass(frozen=True)
class Copy:
    """One `# Copied from` comment: where it is, the object it names (after `transformers.`), and its renames."""

    path: Path
    line: int  # 1-based line of the comment
    source: str
    renames: str


@dataclass(frozen=True)
class Divergence:
    copy: Copy
    reason: str


def package_root(path: Path) -> Path | None:
    """The `transformers` package folder that `path` lies in (a checkout's `src/transformers` or an unpacked wheel)."""
    root = generated.package_root(resolved(path))
    return None if root is None else Path(root)


class CopyChecker:
    """The copies of one transformers package and their sources, read from disk once and cached."""

    def __init__(self, root: Path, texts: dict[Path, str] | None = None, disk: CopyChecker | None = None) -> None:
        """`texts` stands in for the files on disk that it names (resolved paths): the tree as it was before a fix.
        `disk`, a checker of the same tree on disk, reads the other files for this one: a file the fix left alone is
        then held once for the two."""
        self.root = root.resolve()
        self._lines: dict[Path, list[str] | None] = {path: physical_lines(text) for path, text in (texts or {}).items()}
        self._disk = disk
        self._without_copies: set[Path] = set()  # files on disk read once and found without a copy comment

    @functools.cached_property
    def _files(self) -> list[Path]:
        """The package's Python files, listed once for this checker and the one before a fix that reads through it."""
        return self._disk._files if self._disk is not None else sorted(self.root.rglob("*.py"))

    def copies(self) -> list[Copy]:
        """Every copy comment in the package."""
        found: list[Copy] = []
        for path in self._files:
            for number, line in enumerate(self._read(path, copies_only=True) or []):
                if "Copied from" not in line:
                    continue
                match = _COPY_COMMENT.search(line)
                if match:
                    found.append(Copy(path, number + 1, match.group(2), match.group(3)))
        return found

    def source_path(self, copy: Copy) -> Path | None:
        """The file that holds the copy's source: the shortest prefix of its dotted name that is a module file."""
        parts = copy.source.split(".")
        for end in range(1, len(parts)):
            candidate = self.root.joinpath(*parts[:end]).with_suffix(".py")
            if candidate.is_file():
                return candidate
        return None

    def copy_of(self, path: Path, name: str) -> Copy | None:
        """The `# Copied from` comment of the top-level class or function `name` of `path` (above its decorators)."""
        lines = self._read(path) or []
        header = re.compile(rf"^(class|def)\s+{re.escape(name)}(\(|:)")
        line = next((number for number, text in enumerate(lines) if header.search(text)), None)
        while line is not None and line > 0 and lines[line - 1].startswith("@"):
            line -= 1
        match = _COPY_COMMENT.search(lines[line - 1]) if line else None
        if line is None or match is None or match.group(1):
            return None
        return Copy(path, line, match.group(2), match.group(3))

    def divergence(self, copy: Copy) -> Divergence | None:
        """Why the copy differs from its source, or None when it matches (or its source cannot be found)."""
        located = self._source_block(copy)
        lines = self._read(copy.path)
        if located is None or lines is None:
            return None
        source_lines, start, end = located
        theoretical_indent = _indent("".join(source_lines[start:end]))
        body_indent = _indent("".join(source_lines[start + 1 : end]))
        comment = copy.line - 1
        marker = _COPY_COMMENT.search(lines[comment])
        if marker is None:  # the file changed since `copies` read it
            return None
        indent = marker.group(1)
        copy_start = comment + 1 if indent == theoretical_indent else comment
        if copy_start >= len(lines):
            return Divergence(copy, "no definition follows the comment")
        copy_end = _observed_end(lines, copy_start, body_indent)
        expected = _blocks(source_lines, start, end, len(body_indent))
        observed = _blocks(lines, copy_start, copy_end, len(body_indent))
        if expected is None or observed is None:
            return Divergence(copy, "its definition header cannot be read")
        expected = [(_renamed(name, copy.renames), _renamed(code, copy.renames)) for name, code in expected]
        # A block of the copy that says `# Ignore copy` is left out, and so is the source's block of the same name.
        ignored = {name for name, code in observed if _IGNORED in code}
        want = "".join(code for name, code in expected if name not in ignored)
        have = "".join(code for name, code in observed if name not in ignored)
        if _same(have, want):
            return None
        # transformers formats the renamed source before comparing, since a rename can change line lengths.
        if copy.renames.strip() and _same(have, _formatted(want, copy.path)):
            return None
        return Divergence(copy, "its code differs after the renames")

    def _source_block(self, copy: Copy) -> tuple[list[str], int, int] | None:
        path = self.source_path(copy)
        lines = self._read(path) if path else None
        if path is None or lines is None:
            return None
        names = copy.source.split(".")[len(path.relative_to(self.root).with_suffix("").parts) :]
        index, indent = 0, ""
        for name in names:
            header = re.compile(rf"^{indent}(class|def)\s+{re.escape(name)}(\(|\:)")
            while index < len(lines) and not header.search(lines[index]):
                index += 1
            indent += "    "
            index += 1
        if index > len(lines) or not names:
            return None
        start = index - 1
        return lines, start, _block_end(lines, start, indent)

    def _read(self, path: Path, copies_only: bool = False) -> list[str] | None:
        """The file's lines, cached; with `copies_only`, None for a file without a copy comment, whose lines are not
        kept (most of a package has no copy, and its lines held by both checkers of a fix took 85 MB) and whose bytes
        are not read again for the next checker that asks."""
        if path not in self._lines and self._disk is not None:
            return self._disk._read(path, copies_only)
        if path not in self._lines:
            if copies_only and path in self._without_copies:
                return None
            try:
                data = read_regular(path, SOURCE_LIMIT)
                if copies_only and b"Copied from" not in data:
                    self._without_copies.add(path)
                    return None
                text = data.decode("utf-8")
            except (OSError, UnicodeDecodeError):
                self._lines[path] = None
                return None
            self._lines[path] = physical_lines(text)
        return self._lines[path]


def _indent(code: str) -> str:
    for line in code.split("\n"):
        if line:
            return line[: len(line) - len(line.lstrip())]
    return ""


def _continues(line: str, indent: str) -> bool:
    return line.startswith(indent) or not line.strip() or _HEADER_END.search(line) is not None


def _trim_blank_end(lines: list[str], end: int) -> int:
    end = min(end, len(lines))
    while end > 0 and len(lines[end - 1]) <= 1:
        end -= 1
    return end


def _block_end(lines: list[str], start: int, indent: str) -> int:
    """One past the last line of the definition at `start` whose body is indented by `indent`."""
    end = start + 1
    while end < len(lines) and _continues(lines[end], indent):
        end += 1
    return _trim_blank_end(lines, end)


def _observed_end(lines: list[str], start: int, indent: str) -> int:
    """As `_block_end`, but an `# End copy` line at the body's indent also ends the copy."""
    end = start + 1
    while (
        end + 1 < len(lines)
        and _continues(lines[end + 1], indent)
        and not lines[end + 1].startswith(f"{indent}# End copy")
    ):
        end += 1
    return _trim_blank_end(lines, end + 1)


def _blocks(lines: list[str], start: int, end: int, indent: int) -> list[tuple[str, str]] | None:
    """The definition split into named parts: its header, each inner def or class (with the comments and decorators
    right above it), and the runs of other lines between them, so that `# Ignore copy` can drop one part."""
    header = re.search(rf"^{' ' * (indent - 4)}((class|def)\s+\S+?)(\(|\:)", lines[start]) if start < end else None
    if header is None:
        return None
    body = start
    if "(" in lines[start] and "):" not in lines[start]:
        while body < end and not _HEADER_END.search(lines[body]):
            body += 1
    body += 1
    parts = [(header.group(1), "".join(lines[start:body]))]
    inner = re.compile(rf"^{' ' * indent}((class|def)\s+\S+?)(\(|\:)")
    previous, index, unnamed = body, body, 0
    while index < end:
        found = inner.search(lines[index])
        if found is None:
            index += 1
            continue
        block_end = _block_end(lines, index, " " * (indent + 4))
        first = index
        while first - 1 >= previous and lines[first - 1].strip() and lines[first - 1].startswith(" " * indent):
            first -= 1
        if first > previous:
            parts.append((f"_between_{unnamed}", "".join(lines[previous:first])))
            unnamed += 1
        parts.append((found.group(1), "".join(lines[first:block_end])))
        previous = index = max(block_end, index + 1)
    if end > previous:
        parts.append((f"_between_{unnamed}", "".join(lines[previous:end])))
    return parts


def _renamed(code: str, renames: str) -> str:
    """`with A->B, C->D all-casing`: regular-expression replacements, in order, as transformers applies them."""
    for pattern in renames.replace("with", "").split(","):
        match = _RENAME.search(pattern)
        if match is None:
            continue
        old, new, option = match.groups()
        try:
            code = re.sub(old, new, code)
            if option.strip() == "all-casing":
                code = re.sub(old.lower(), new.lower(), code)
                code = re.sub(old.upper(), new.upper(), code)
        except re.error:  # not a pattern transformers could apply either; the comparison then fails
            continue
    return code


def _same(observed: str, expected: str) -> bool:
    """Equal with blank lines dropped, the header's class or function name excepted."""
    have = [line for line in observed.splitlines() if line.strip()]
    want = [line for line in expected.splitlines() if line.strip()]
    if not have or not want or len(have) != len(want) or have[1:] != want[1:]:
        return False
    name = re.compile(r"^(\s*(?:class|def)\s+)([^\(:]+)")
    return name.sub(r"\1", have[0]) == name.sub(r"\1", want[0])


def _formatted(code: str, path: Path) -> str:
    """`code` as ruff formats it with the settings of the project that `path` is in; unchanged without ruff."""
    command = ruff.command()
    if command is None:
        return code
    wrapped = bool(_indent(code))
    text = f"class Bla:\n{code}" if wrapped else code
    formatted = ruff.run_on_text(command, ["format", "--quiet"], path, text)
    if not formatted:
        return code
    return formatted[len("class Bla:\n") :] if wrapped else formatted


def source_chain(path: Path, text: str, name: str) -> list[str]:
    """The code that the top-level class or function `name` of `path` (whose text is `text`) must stay equal to: its
    `# Copied from` source after the renames, then that source's own source after both renames, and so on. Empty
    when `name` is no copy or `path` lies outside a transformers package.

    A fix that rewrites a copy from what its own code says can go a different way from its source where the copy's
    `# Ignore copy` lines differ; the fix reads the source's code here to go the source's way.
    """
    root = package_root(path)
    if root is None:
        return []
    checker = CopyChecker(root, {path.resolve(): text})
    chain: list[str] = []
    renames: list[str] = []
    current: Path | None = path.resolve()
    while current is not None and len(chain) < _CHAIN_LIMIT:
        copy = checker.copy_of(current, name)
        located = checker._source_block(copy) if copy else None
        if copy is None or located is None:
            break
        lines, start, end = located
        renames.insert(0, copy.renames)  # the source's own renames made it, then this copy's renames
        code = "".join(lines[start:end])
        for applied in renames:
            code = _renamed(code, applied)
        chain.append(code)
        current = checker.source_path(copy)
        dotted = copy.source.split(".")
        # Only a top-level source can carry a comment of its own; a method's chain ends here.
        if current is None or len(dotted) != len(current.relative_to(checker.root).with_suffix("").parts) + 1:
            break
        name = dotted[-1]
    return chain


CopyKey = tuple[str, str, str, int]


def divergent_copies(root: Path) -> dict[CopyKey, Divergence]:
    """Every copy in the package at `root` that differs from its source, keyed so that two versions of a tree (before
    and after a fix) compare: by file relative to the package, source, renames, and which such comment it is."""
    checker = CopyChecker(root)
    keyed = _keyed(checker, checker.copies())
    return {key: found for key, copy in keyed.items() if (found := checker.divergence(copy)) is not None}


def diverged_by_fix(originals: dict[Path, str]) -> tuple[int, list[Diagnostic]]:
    """The copy groups that edits touched, and a finding for each copy that matched its source before and does not
    now. `originals` maps each edited file to its text before the edit; files outside a transformers package are no
    part of any group.

    A group is touched when the copy or its source was edited. Copies that differed before (released trees have a
    few) are left alone: the fix did not cause them.
    """
    by_root: dict[Path, dict[Path, str]] = {}
    for path, text in originals.items():
        root = package_root(path)
        if root is not None:
            by_root.setdefault(root, {})[path.resolve()] = text
    checked, found = 0, []
    for root, texts in by_root.items():
        after = CopyChecker(root)
        before = CopyChecker(root, texts, disk=after)
        old, new = _keyed(before, before.copies()), _keyed(after, after.copies())
        for key, copy in new.items():
            if copy.path not in texts and after.source_path(copy) not in texts:
                continue
            checked += 1
            previous = old.get(key)
            now = after.divergence(copy)
            if now is not None and (previous is None or before.divergence(previous) is None):
                found.append(_finding(now))
    return checked, found


def _keyed(checker: CopyChecker, copies: list[Copy]) -> dict[CopyKey, Copy]:
    """Copies keyed by what survives an edit above them: file, source, renames, and which such comment it is."""
    seen: dict[tuple[str, str, str], int] = {}
    keyed = {}
    for copy in copies:
        group = (copy.path.relative_to(checker.root).as_posix(), copy.source, copy.renames)
        seen[group] = seen.get(group, -1) + 1
        keyed[(*group, seen[group])] = copy
    return keyed


def _finding(divergence: Divergence) -> Diagnostic:
    copy = divergence.copy
    renames = f" {copy.renames}" if copy.renames else ""
    message = (
        f"this copy of `transformers.{copy.source}`{renames} no longer matches it after the fix "
        f"({divergence.reason}); transformers' `utils/check_copies.py` would reject the tree"
    )
    position = Position(copy.line, 0)
    return Diagnostic(_shown(copy.path), COPY_DIVERGED, "copy-diverged", message, position, position)


def _shown(path: Path) -> str:
    """The path relative to the working folder when it lies under it, as paths given on the command line print."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
