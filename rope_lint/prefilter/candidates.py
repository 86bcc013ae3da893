"""Which parts of a file can hold a finding, so that only those are parsed: parsing is most of a check's time.

A rule's search starts where its trigger text is: the imports (which resolve names) and the top-level functions and
classes that hold a trigger are the only ones parsed, and of such a class only the methods that matter (`parse`).
The rest is blanked to empty lines, which keeps every line and column where it was and costs the parser almost
nothing. Where the split into statements is in doubt, the whole file is parsed. The text screens
(`screens`) first drop the occurrences of a trigger that no rule can flag. The same split gives a file's outline
(`parse_outline`): its top-level statements, with the bodies of its functions and classes cut.

All of it works on the file's bytes (UTF-8 unless a coding cookie says otherwise; every needle is ASCII), as read:
the text a rule reads is decoded once, beside. Bytes are searched with `bytes.find`, or one pattern for needles that
begin alike (`prefix_groups`): a regex alternation of a dozen words with no common start scans ten times slower.
"""

from __future__ import annotations

import ast
import bisect
import codecs
import functools
import re
from collections import namedtuple
from collections.abc import Callable, Mapping


@functools.cache
def _statement_start(indent: bytes) -> re.Pattern[bytes]:
    """A line that begins a statement at `indent`: neither a blank, a comment nor a closing bracket follows it."""
    return re.compile(rb"\n" + indent + rb"[^ \t\f\r\n#)\]}]")


# The indentation of a class's methods: the least that any `def` or decorator in it has.
_MEMBER_DEF = re.compile(rb"\n([ \t]+)(?:async[ \t]+def[ \t]|def[ \t]|@)")
_DEFINITION_START = re.compile(rb"class[ \t]|def[ \t]|async[ \t]+def[ \t]")
_DEFINITION = re.compile(rb"(?:async[ \t]+)?def[ \t]+(\w+)")
_CLASS_NAME = re.compile(rb"class[ \t]+(\w+)")
_DEFINITION_NODES = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_ASSIGNS_ATTRIBUTE = re.compile(rb"self\.\w+\s*(?::[^=\n]*)?=(?!=)|register_buffer|setattr\(")


@functools.cache
def _definition_line(indent: bytes) -> re.Pattern[bytes]:
    return re.compile(rb"\n" + indent + rb"(?=class[ \t]|def[ \t]|async[ \t])")


# Whether a rule can flag the trigger at a position of a file's bytes.
Screen = Callable[[bytes, int], bool]
# Of the positions of a trigger in a file, those that some rule can flag: what its rules' requirements and screens
# keep (`prefilter.combined_screens`).
Keep = Callable[["Occurrences", list[int]], list[int]]

# Clauses of the compound statement before them, not statements of their own.
_CLAUSE = re.compile(rb"(?:else|elif|except|finally)\b")
_NOT_A_STATEMENT = frozenset(b" \t\f\r\n#")


class Occurrences:
    """Where each needle occurs in one file's bytes: every needle is searched once, however many rules ask."""

    def __init__(
        self,
        data: bytes,
        encoding: str = "utf-8",
        screens: Mapping[str, Keep] | None = None,
        groups: Mapping[str, re.Pattern[bytes]] | None = None,
    ) -> None:
        self.data = data
        self.encoding = encoding  # of `data`
        # By needle, what keeps the occurrences that may start a search, dropping those that no rule can flag
        # (`prefilter.combined_screens`).
        self.screens = screens or {}
        self.groups = groups or {}  # see `prefix_groups`
        self._positions: dict[str, list[int]] = {}
        self._triggered: dict[str, list[int]] = {}
        self._met: dict[Callable[[Occurrences], bool], bool] = {}
        self._lines: dict[tuple[str, ...], list[int]] = {}
        self._marked: dict[tuple[str, ...], list[int]] = {}
        # The split into statements once read (`layout`): a cell, so that the copies `unscreened` makes share it.
        self._layout: list[_Layout | None] = []

    @classmethod
    def of_text(
        cls,
        source: str,
        screens: Mapping[str, Keep] | None = None,
        groups: Mapping[str, re.Pattern[bytes]] | None = None,
    ) -> Occurrences:
        """For a text that was not read as bytes (an edited file, a test's snippet): its UTF-8 bytes."""
        return cls(as_parsed(source.encode("utf-8", errors="surrogatepass")), screens=screens, groups=groups)

    def positions(self, needles: tuple[str, ...]) -> list[int]:
        """Where any of `needles` occurs, in order."""
        found: list[int] = []
        for needle in needles:
            if needle not in self._positions:
                group = self.groups.get(needle)
                if group is None:
                    self._positions[needle] = _find_all(self.data, needle.encode())
                else:  # one scan finds every needle of the group
                    found_by_group: dict[str, list[int]] = {
                        other: [] for other in self.groups if self.groups[other] is group
                    }
                    for match in group.finditer(self.data):
                        found_by_group[match.group().decode()].append(match.start())
                    self._positions.update(found_by_group)
            found.extend(self._positions[needle])
        return sorted(found)

    def holds_any(self, needles: tuple[str, ...]) -> bool:
        """Whether any of `needles` occurs."""
        return any(self.positions((needle,)) for needle in needles)

    def meets(self, requirement: Callable[[Occurrences], bool]) -> bool:
        """What a rule's requirement (`PrefilterSpec.requires`) says of the file, asked once for all its triggers."""
        if requirement not in self._met:
            self._met[requirement] = requirement(self)
        return self._met[requirement]

    def lines(self, needles: tuple[str, ...]) -> list[int]:
        """The lines on which any of `needles` occurs, in order."""
        if needles not in self._lines:
            self._lines[needles] = _line_numbers(self.data, self.positions(needles))
        return self._lines[needles]

    def marked_lines(self, needles: tuple[str, ...]) -> list[int]:
        """The lines of the `marked` places, in order."""
        return _line_numbers(self.data, self.marked(needles))

    def triggered(self, needles: tuple[str, ...]) -> list[int]:
        """Where any of `needles` occurs and its screen, if any, lets a rule start there, in order."""
        found: list[int] = []
        for needle in needles:
            if needle not in self._triggered:
                keep = self.screens.get(needle)
                positions = self.positions((needle,))
                self._triggered[needle] = positions if keep is None else keep(self, positions)
            found.extend(self._triggered[needle])
        return sorted(found)

    def layout(self) -> _Layout | None:
        """The file's top-level statements (`_Layout`), read once however many parses split it; None where the split
        is in doubt."""
        if not self._layout:
            self._layout.append(_module_layout(self.data, _triple_quoted_spans(self)))
        return self._layout[0]

    def unscreened(self) -> Occurrences:
        """These bytes' occurrences with no screen: every occurrence of a needle. They share the split into statements
        (`layout`), which no screen changes."""
        every = Occurrences(self.data, self.encoding)
        every._layout = self._layout
        return every

    def marked(self, needles: tuple[str, ...]) -> list[int]:
        """The triggered places, and where an import statement's `import` is (`_is_import`): the places whose
        statements a rule must see. An `import` in a docstring's example (`>>> from x import y`) is none."""
        if needles not in self._marked:
            imports = [position for position in self.positions(("import ",)) if _is_import(self.data, position)]
            self._marked[needles] = sorted(self.triggered(needles) + imports)
        return self._marked[needles]


def as_parsed(data: bytes) -> bytes:
    """A file's bytes with their lines as the parser counts them: without a byte order mark, and with a lone
    carriage return ending a line as `\n` does. The same bytes, as the same object, for nearly every file."""
    data = data.removeprefix(codecs.BOM_UTF8)
    if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return data


class Prefilter:
    """Whether a file's bytes hold any of the needles: the question asked of every file, with one scan per group of
    needles (`prefix_groups`) and none past the first hit. Most files hold none and cost nothing more."""

    def __init__(self, needles: tuple[str, ...], groups: Mapping[str, re.Pattern[bytes]]) -> None:
        self.plain = tuple(needle.encode() for needle in needles if needle not in groups)
        self.patterns = tuple(dict.fromkeys(groups[needle] for needle in needles if needle in groups))

    def __call__(self, data: bytes) -> bool:
        return any(needle in data for needle in self.plain) or any(pattern.search(data) for pattern in self.patterns)


def prefix_groups(needles: tuple[str, ...]) -> dict[str, re.Pattern[bytes]]:
    """For the needles that begin with the same two characters as another (`Rotary`, `Rope`, `RoPE`), one pattern
    that finds them all, by needle: `re` searches a pattern's literal prefix about as fast as `bytes.find` searches
    a needle, so one scan does the work of several."""
    by_start: dict[str, list[str]] = {}
    for needle in dict.fromkeys(needles):
        by_start.setdefault(needle[:2], []).append(needle)
    found: dict[str, re.Pattern[bytes]] = {}
    for members in by_start.values():
        if len(members) > 1:
            prefix = members[0]
            while not all(member.startswith(prefix) for member in members):
                prefix = prefix[:-1]
            rest = "|".join(re.escape(member[len(prefix) :]) for member in sorted(members, key=len, reverse=True))
            pattern = re.compile(f"{re.escape(prefix)}(?:{rest})".encode())
            found.update(dict.fromkeys(members, pattern))
    return found


def _find_all(source: bytes, needle: bytes) -> list[int]:
    found = []
    start = source.find(needle)
    while start != -1:
        found.append(start)
        start = source.find(needle, start + 1)
    return found


def _is_import(source: bytes, position: int) -> bool:
    """Whether the `import` at `position` is that of an import statement which can name torch: `import x` or
    `from x import y`, but not a relative `from .x import y` (which `FileContext` leaves unresolved)."""
    line = source[source.rfind(b"\n", 0, position) + 1 : position].lstrip()
    return not line or (line.startswith(b"from ") and not line[5:].lstrip().startswith(b"."))


def _line_numbers(source: bytes, positions: list[int]) -> list[int]:
    """The 1-based line of each of the sorted `positions`, each line once, counting lines as `ast` does."""
    numbers: list[int] = []
    line, previous = 1, 0
    for position in positions:
        line += source.count(b"\n", previous, position)
        previous = position
        if not numbers or numbers[-1] != line:
            numbers.append(line)
    return numbers


def parse(
    source: str,
    occurrences: Occurrences,
    needles: tuple[str, ...],
    parses_whole_class: Callable[[bytes], bool] | None,
    filename: str,
) -> ast.Module:
    """The syntax tree of the file without the functions and classes that contain none of `needles`; raises what
    `ast.parse` raises when what is kept does not parse. A syntax error in what is left out goes unnoticed, as in
    a file without any needle, which is not parsed at all. `occurrences` are of `as_parsed` bytes.

    Of a class, only the methods holding a needle are kept, with `__init__` and the other methods that assign an
    attribute (where attributes get their values), and every statement that is not a method; unless `parses_whole_class`
    says, of the class's text from its `class` keyword on, that it is to be kept whole, or the class names such a
    class (a subclass of a rotary class is read whole too)."""
    reduced = _reduced(occurrences, needles, parses_whole_class)
    if reduced is not None:
        data, expected = reduced
        try:
            # Parsed as text, as the whole file would be: a coding cookie is no longer the parser's to apply.
            tree = ast.parse(data.decode(occurrences.encoding), filename=filename)
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # UnicodeDecodeError is a ValueError
            tree = None  # a split that cut through a bracket or a string: the whole file decides
        if tree is not None and _first_lines(tree.body) == expected[0] and _members_as_expected(tree, expected):
            return tree
    return ast.parse(source, filename=filename)


def parse_outline(source: str) -> ast.Module:
    """The syntax tree of the file's top-level statements, with the body of each top-level function and class cut to
    a `pass` on the body's last line: what an outline of a file reads (names, decorators, bases, first and last
    lines, imports) for a fifth of a whole parse's cost. A body is left whole where code follows its header on the
    header's line. Raises what `ast.parse` raises when what is kept does not parse; a syntax error in a body goes
    unnoticed. Where the split is in doubt, the whole file is parsed."""
    # A byte order mark is the parser's to strip from bytes, and an error in a text: the whole text decides.
    hollowed = None if source.startswith("\ufeff") else _hollowed(Occurrences.of_text(source).data)
    if hollowed is not None:
        data, firsts, passes = hollowed
        try:
            tree = ast.parse(data.decode("utf-8", errors="surrogatepass"))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None  # a split that cut through a bracket: the whole file decides
        if tree is not None and _first_lines(tree.body) == firsts and _cut_as_expected(tree, passes):
            return tree
    return ast.parse(source)


def _hollowed(source: bytes) -> tuple[bytes, set[int], dict[int, int]] | None:
    """The source with each top-level definition's body blanked but for a `pass` on its last code line, the first
    line of every statement, and the `pass` line of each cut definition by its first line; None in doubt.

    Every other statement is kept whole, and so is a definition with code after its header's colon, with a line of
    its body at the first column, or whose last line is in doubt: the parse then tells where it ends, and shows a
    statement of the module that the split missed (after a comment ending in a backslash). A split inside a bracket
    (continued at the first column) leaves the bracket's closing in a statement of its own, which does not parse."""
    layout = Occurrences(source).layout()
    if layout is None:
        return None
    strings, statements, headers, definitions = layout
    pieces: list[bytes] = [b"\n" * source.count(b"\n", 0, statements[0][0])]
    firsts: set[int] = set()
    passes: dict[int, int] = {}
    line = 1 + len(pieces[0])
    for (start, end), header, definition in zip(statements, headers, definitions, strict=True):
        firsts.add(line)
        body = _body_start(source, header, end) if definition else None
        last = _last_code_line(source, strings, body, end) if body is not None else None
        if body is None or last is None or _code_at_column_zero(source, strings, body, end):
            pieces.append(source[start:end])
        else:
            blank = source.count(b"\n", body, last)
            pieces += [source[start:body], b"\n" * blank, b" pass", b"\n" * source.count(b"\n", last, end)]
            passes[line] = line + source.count(b"\n", start, body) + blank
        line += source.count(b"\n", start, end)
    return b"".join(pieces), firsts, passes


def _body_start(source: bytes, header: int, end: int) -> int | None:
    """Where the body of the definition whose `def` or `class` is at `header` begins: the line after the colon that
    ends the header (the first outside brackets, strings and comments). None where code follows that colon on its
    line, or where the header cannot be read."""
    depth, offset = 0, header
    # From mark to mark: a header is mostly names and spaces, and a long signature spans many lines.
    while (mark := _HEADER_MARK.search(source, offset, end)) is not None:
        offset = mark.start()
        character = source[offset : offset + 1]
        if character in b"([{":
            depth += 1
        elif character in b")]}":
            depth -= 1
        elif character == b"#":
            offset = source.find(b"\n", offset, end)
            if offset == -1:
                return None
            continue
        elif character in b"\"'":
            offset = _string_end(source, offset, end)
            if offset is None:
                return None
            continue
        elif depth == 0:  # a colon
            line_end = source.find(b"\n", offset, end)
            rest = source[offset + 1 : line_end].strip()
            return line_end + 1 if line_end != -1 and (not rest or rest.startswith(b"#")) else None
        offset += 1
    return None


# What a definition's header turns on: brackets, a comment, a string, the colon.
_HEADER_MARK = re.compile(rb"[()\[\]{}#\"':]")


def _string_end(source: bytes, opening: int, end: int) -> int | None:
    """The offset after the string literal whose quote is at `opening`; None past `end` or a line's end."""
    quote = source[opening : opening + 3]
    if quote in (b'"""', b"'''"):
        closing = source.find(quote, opening + 3, end)
        return None if closing == -1 else closing + 3
    stop = _STRING_STOP[source[opening : opening + 1]]
    offset = opening + 1
    while (found := stop.search(source, offset, end)) is not None:
        character = found.group()
        if character == b"\n":
            return None
        if character != b"\\":
            return found.end()
        offset = found.end() + 1  # an escaped character, whatever it is
    return None


# Where a one-line string literal may end, by its quote: the quote, a line's end, or a backslash that escapes the next.
_STRING_STOP = {quote: re.compile(rb"[\\\n" + quote + rb"]") for quote in (b'"', b"'")}


def _code_at_column_zero(source: bytes, strings: list[int], begin: int, end: int) -> bool:
    """Whether a line between `begin` and `end`, outside triple-quoted strings, starts with code at the first column
    (a closing bracket aside): in a definition's body, a statement of the module that the split did not take as one,
    or a bracket continued there."""
    return any(
        bisect.bisect_left(strings, match.start() + 1) % 2 == 0
        for match in _statement_start(b"").finditer(source, begin - 1, end)
    )


def _last_code_line(source: bytes, strings: list[int], begin: int, end: int) -> int | None:
    """Where the last line between `begin` and `end` that holds code begins: a line that is neither blank nor a
    comment, or one that a triple-quoted string continues (`#  text'''` may close a docstring); None in doubt."""
    line_end = end
    while line_end > begin:
        line_start = source.rfind(b"\n", begin, line_end - 1) + 1 or begin
        text = source[line_start:line_end].strip()
        if bisect.bisect_left(strings, line_start) % 2 == 1 or (text and not text.startswith(b"#")):
            return line_start
        if _continues(source, line_start):  # a comment, or a string that a backslash continues: in doubt
            return None
        line_end = line_start
    return None


def _cut_as_expected(tree: ast.Module, passes: dict[int, int]) -> bool:
    """Whether each cut definition parsed with its `pass` as its whole body, where it was put."""
    for statement in tree.body:
        line = passes.get(first_line(statement))
        if line is not None:
            body = getattr(statement, "body", None)
            if not (isinstance(statement, _DEFINITION_NODES) and body and len(body) == 1):
                return False
            if not (isinstance(body[0], ast.Pass) and body[0].lineno == line):
                return False
    return True


# The first line of every kept region, by the first line of the statement that holds it (0 for the module).
_Expected = dict[int, set[int]]


def _reduced(
    occurrences: Occurrences, needles: tuple[str, ...], parses_whole_class: Callable[[bytes], bool] | None
) -> tuple[bytes, _Expected] | None:
    """The source with the statements that hold no needle blanked, and where each kept one begins; None when
    the split is in doubt or would keep everything."""
    source = occurrences.data
    layout = occurrences.layout()
    if layout is None:
        return None
    strings, statements, headers, definitions = layout
    marks = occurrences.marked(needles)
    kept: list[tuple[int, int]] = []
    members: dict[int, list[tuple[int, int]]] = {}  # by the index in `kept` of their class
    # A rule may read the statements before a trigger in its block: where the module's own code (not its functions
    # and classes) holds a trigger, all of that code is kept.
    triggers = occurrences.triggered(needles)
    module_code = any(
        not definition and _holds(triggers, start, end)
        for (start, end), definition in zip(statements, definitions, strict=True)
    )
    whole_names: set[bytes] = set()  # of the classes kept whole: a subclass in the file is read whole too
    for (start, end), header, definition in zip(statements, headers, definitions, strict=True):
        name = _CLASS_NAME.match(source, header)
        if name and whole_names and _names_any(source[header : source.find(b"\n", header)], whole_names):
            whole_names.add(name.group(1))
        elif not _holds(marks, start, end):
            if module_code and not definition:
                kept.append((start, end))
            continue
        elif name and parses_whole_class and parses_whole_class(source[header:end]):
            whole_names.add(name.group(1))
        elif name:
            kept_members = _kept_members(source, strings, start, header, end, marks)
            if kept_members is not None:
                members[len(kept)] = kept_members
                kept.extend(kept_members)
                continue
        kept.append((start, end))
    if kept == statements:
        return None
    text, first_lines = _assemble(source, kept)
    expected: _Expected = {0: set()}
    class_of = {index: owner for owner, owned in members.items() for index in range(owner, owner + len(owned))}
    for index, line in enumerate(first_lines):
        owner = class_of.get(index)
        if owner is None:
            expected[0].add(line)
        elif index == owner:  # the class's own header
            expected[0].add(line)
            expected[line] = set()
        else:
            expected[first_lines[owner]].add(line)
    return text, expected


class _Layout(namedtuple("_Layout", ("strings", "statements", "headers", "definitions"))):
    """A file's top-level statements, as both splits (`_reduced`, `_hollowed`) read them."""

    __slots__ = ()
    strings: list[int]  # `_triple_quoted_spans`
    statements: list[tuple[int, int]]  # offset ranges (`_regions`)
    headers: list[int]  # where each statement's own line is, after its decorators
    definitions: list[bool]  # whether each is a `def` or `class`


def _module_layout(source: bytes, strings: list[int] | None) -> _Layout | None:
    """The `_Layout` of a file's bytes, whose triple-quoted strings are `strings`; None where those are in doubt, or
    where something other than comments comes before the first statement."""
    if strings is None:
        return None
    statements = _regions(source, strings, 0, len(source), b"")
    if not statements or not _only_comments(source[: statements[0][0]]):
        return None
    headers = [_after_decorators(source, start, end) for start, end in statements]
    definitions = [bool(_DEFINITION_START.match(source, header)) for header in headers]
    return _Layout(strings, statements, headers, definitions)


def _kept_members(
    source: bytes, strings: list[int], start: int, header: int, end: int, marks: list[int]
) -> list[tuple[int, int]] | None:
    """A class's decorators and header, then the members worth parsing: what is not a method, `__init__`, the
    methods holding a mark and those that assign an attribute of `self`. None when its members cannot be told
    apart."""
    indents = [match.group(1) for match in _MEMBER_DEF.finditer(source, header, end)]
    if not indents:
        return None
    indent = min(indents, key=len)
    members = _regions(source, strings, header, end, indent)
    if not members:
        return None
    kept = [(start, members[0][0])]
    for member_start, member_end in members:
        definition = _DEFINITION.match(source, _after_decorators(source, member_start, member_end, indent))
        if (
            definition is None
            or definition.group(1) == b"__init__"
            or _holds(marks, member_start, member_end)
            or _ASSIGNS_ATTRIBUTE.search(source, member_start, member_end)  # where an attribute gets its value
        ):
            kept.append((member_start, member_end))
    return kept


def _regions(source: bytes, strings: list[int], begin: int, end: int, indent: bytes) -> list[tuple[int, int]]:
    """The statements at `indent` between `begin` and `end`, as offset ranges: each starts on a line indented by
    `indent` exactly, outside triple-quoted strings, that is neither a clause (`else:`) nor the definition after
    a decorator, and runs to the next."""
    candidates = [0] if begin == 0 and source and source[0] not in _NOT_A_STATEMENT else []
    candidates.extend(match.start() + 1 for match in _statement_start(indent).finditer(source, begin, end))
    starts: list[int] = []
    after_decorator = False
    for start in candidates:
        inside = bisect.bisect_left(strings, start) % 2 == 1  # a line that opens a string is outside it
        if inside or _CLAUSE.match(source, start + len(indent)) or _continues(source, start):
            continue
        if not after_decorator:
            starts.append(start)
        after_decorator = source.startswith(b"@", start + len(indent))
    if not starts:  # no statement at all: a file of comments only, a trigger word among them
        return []
    return list(zip(starts, [*starts[1:], end], strict=True))


def _continues(source: bytes, start: int) -> bool:
    """Whether the line before `start` ends in a backslash: `start` continues it (code, or a quoted string)."""
    return source[max(0, start - 3) : start].rstrip(b"\r\n").endswith(b"\\")


def _assemble(source: bytes, regions: list[tuple[int, int]]) -> tuple[bytes, list[int]]:
    """The regions' text in place, everything else blank lines; and the first line of each region."""
    pieces: list[bytes] = []
    first_lines: list[int] = []
    line, previous = 1, 0
    for start, end in regions:
        blank = source.count(b"\n", previous, start)
        pieces.append(b"\n" * blank)
        line += blank
        first_lines.append(line)
        pieces.append(source[start:end])
        line += source.count(b"\n", start, end)
        previous = end
    return b"".join(pieces), first_lines


def _names_any(header: bytes, names: set[bytes]) -> bool:
    """Whether a class's header line names any of `names` (as a base, most likely)."""
    return any(re.search(rb"\b" + re.escape(name) + rb"\b", header) for name in names)


def _holds(positions: list[int], start: int, end: int) -> bool:
    index = bisect.bisect_left(positions, start)
    return index < len(positions) and positions[index] < end


def _after_decorators(source: bytes, start: int, end: int, indent: bytes = b"") -> int:
    """Where a statement's text begins once its decorators, of one line or of several, are passed."""
    if not source.startswith(b"@", start + len(indent)):
        return start + len(indent)
    match = _definition_line(indent).search(source, start, end)
    return match.end() if match else start


def _members_as_expected(tree: ast.Module, expected: _Expected) -> bool:
    for statement in tree.body:
        members = expected.get(first_line(statement))
        if members is not None and not (
            isinstance(statement, ast.ClassDef) and _first_lines(statement.body) == members
        ):
            return False
    return True


def _first_lines(statements: list[ast.stmt]) -> set[int]:
    return {first_line(statement) for statement in statements}


def _triple_quoted_spans(occurrences: Occurrences) -> list[int] | None:
    """Sorted offsets that alternate between a triple-quoted string's opening and its closing; None when they do
    not pair up, or when a quote may be part of something else: a one-line string that holds three quotes, a
    comment, an escape."""
    source = occurrences.data
    quotes = occurrences.positions(('"""', "'''"))
    bounds: list[int] = []
    opening: bytes | None = None
    for position in quotes:
        if bounds and position < bounds[-1] + 3:
            continue  # `""""`: the same run of quotes
        quote = source[position : position + 3]
        if position > 0 and source[position - 1 : position] in (b"\\", b"'", b'"'):
            return None
        if opening is None:
            if b"#" in source[source.rfind(b"\n", 0, position) + 1 : position]:
                return None
            opening = quote
            bounds.append(position)
        elif quote == opening:
            opening = None
            bounds.append(position)
    return None if opening is not None else bounds


def first_line(statement: ast.stmt) -> int:
    """Where a statement's text begins: a decorated definition's line is that of its first decorator, not its `def`."""
    decorators = getattr(statement, "decorator_list", [])
    return min([statement.lineno, *(decorator.lineno for decorator in decorators)])


def _only_comments(text: bytes) -> bool:
    return all(not line.strip() or line.lstrip().startswith(b"#") for line in text.splitlines())
