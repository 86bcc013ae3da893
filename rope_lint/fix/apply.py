"""Applying fixes: LibCST edits at each finding's range, re-parsed before anything is written.

LibCST keeps comments and formatting byte for byte outside the edited nodes. It is imported here only,
so that `check` never pays for it.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import difflib
import os
import re
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider, ScopeProvider

from rope_lint import banner, ruff
from rope_lint.diagnostics import Diagnostic, FixSafety
from rope_lint.display import printable
from rope_lint.engine import Settings, check_source, decode, read_bytes, read_triggered
from rope_lint.files import SourceFile, resolved
from rope_lint.fix.formatting import changed_regions, formatted_like_original, lines_formatted_with, original_diffs
from rope_lint.fix.names import ImportedLazily, ModuleNames, ScopeNeeded, with_imports
from rope_lint.fix.origins import carried_rewrites, spelled_as_origins
from rope_lint.fix.tidy import imports_tidied, original_codes
from rope_lint.fix.write import write_atomically
from rope_lint.prefilter.candidates import first_line
from rope_lint.rules import rule_class
from rope_lint.rules.analysis.callers import PackageCallers
from rope_lint.rules.analysis.context import child_statements, physical_lines, statements_holding
from rope_lint.rules.edits import Transformer
from rope_lint.rules.payloads import ClassRewrite
from rope_lint.transformers import generated

Range = tuple[tuple[int, int], tuple[int, int]]


class UnsafeResultError(Exception):
    """A fix produced code that does not parse: nothing is written."""


# The lines a fix changed: (old first, old end, new first, new end), 0-based line indexes, ends exclusive.
Region = tuple[int, int, int, int]


@dataclass
class FixResult:
    text: str
    applied: list[Diagnostic]
    regions: list[Region] = field(default_factory=list)  # what changed, for formatting the changed lines only
    # The lines of the original that formatting each region's old lines can change at most (`lines_formatted_with`).
    formatted_with: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class HeldFix:
    """A fixed text not written yet (`fix_file(..., hold=True)`): the file as read, the text that would replace it,
    and the findings before the fix, which stay if the fix is dropped."""

    source: SourceFile
    text: str
    found: list[Diagnostic]


@dataclass
class FileFixOutcome:
    """What fixing one file did: the findings fixed, those left, the diff, or why nothing was written."""

    path: str
    fixed: list[Diagnostic] = field(default_factory=list)
    remaining: list[Diagnostic] = field(default_factory=list)
    diff: str = ""
    error: str | None = None
    original: str | None = None  # the text before the fix, when the fix rewrote the file (for the copy check)
    held: HeldFix | None = None  # the fix held back, to be written or dropped (`fix_file(..., hold=True)`)


def fix_file(path: Path, settings: Settings, unsafe: bool, diff_only: bool, hold: bool = False) -> FileFixOutcome:
    """Check one file and apply its fixes: written atomically, or shown as a unified diff. With `hold`, nothing is
    written either way: a changed file's fixed text is held in the outcome, for `with_held_fix_written` to write, or
    `without_held_fix` to drop, once it is verified."""
    draft = drafted(path, settings, unsafe)
    return finished(draft, settings, diff_only, hold) if isinstance(draft, FixDraft) else draft


@dataclass
class FixDraft:
    """A file's fixes applied (`drafted`), before ruff formats and tidies them (`finished`): the file as read, its
    findings, the rewrites carried from the files it is generated from, and the fixed text, which `finished`
    compiles, or the text that ruff formats from it."""

    path: Path
    source: SourceFile
    found: list[Diagnostic]
    carried: list[Diagnostic]
    result: FixResult


@dataclass(frozen=True)
class RuffOnOriginal:
    """What ruff says of a file as the fix read it, asked of every file a fix rewrites at once (`ruff_on_originals`):
    its diff under `ruff format`, and its import codes under `ruff check`."""

    diff: str | None
    import_codes: set[str] | None


def drafted(path: Path, settings: Settings, unsafe: bool) -> FixDraft | FileFixOutcome:
    """The first half of `fix_file`: the file checked and its fixes applied; the outcome itself where it has none to
    apply, or where they fail."""
    triggered = read_triggered(path, settings)
    if triggered is None:
        return FileFixOutcome(str(path))
    if isinstance(triggered, Diagnostic):
        return FileFixOutcome(str(path), remaining=[triggered])
    source, occurrences = triggered
    found = check_source(str(path), source.text, settings, occurrences)
    found = spelled_as_origins(path, source.text, found, settings)
    chosen = fixable(found, unsafe)
    carried = fixable(carried_rewrites(path, source.text, found), unsafe)
    if not chosen + carried:
        return FileFixOutcome(str(path), remaining=found)
    try:
        return FixDraft(path, source, found, carried, unverified_fixes(source.text, chosen + carried, settings.callers))
    except Exception as error:
        return _failed(path, found, error)


def finished(
    draft: FixDraft,
    settings: Settings,
    diff_only: bool,
    hold: bool,
    originals: dict[Path, RuffOnOriginal] | None = None,
) -> FileFixOutcome:
    """The second half of `fix_file`: the drafted text formatted and tidied by ruff, written unless `diff_only` or
    `hold`, and checked again. `originals` say what ruff says of files as they were, where it was asked already
    (`ruff_on_originals`)."""
    path, source, found, result = draft.path, draft.source, draft.found, draft.result
    original = (originals or {}).get(path, RuffOnOriginal(None, None))
    try:
        # A formatted or tidied text is kept only if it compiles, and otherwise the text before it, if that does. The
        # draft is compiled only where ruff did not format it, or its formatting does not compile: ruff formats only
        # code that parses, and its formatting keeps the syntax tree, so the two compile alike.
        formatted = formatted_like_original(
            path, source.text, result.text, result.regions, original.diff, result.formatted_with
        )
        if formatted == result.text or compile_error(formatted) is not None:
            formatted = _compiled(result.text)
        text = _compiling_or(imports_tidied(path, source.text, formatted, original.import_codes), formatted)
        if not (diff_only or hold):
            write_atomically(source, text)
    except Exception as error:
        return _failed(path, found, error)
    diff = _unified_diff(path, source.text, text) if diff_only else ""
    remaining = check_source(str(path), text, settings)
    changed = text != source.text
    original_text = source.text if changed and not (diff_only or hold) else None
    held = HeldFix(source, text, found) if changed and hold else None
    fixed = gone([d for d in result.applied if d not in draft.carried], found, remaining)
    return FileFixOutcome(str(path), fixed, remaining, diff, original=original_text, held=held)


def _failed(path: Path, found: list[Diagnostic], error: Exception) -> FileFixOutcome:
    """The outcome of a fix that failed: nothing was written, and the file keeps its findings."""
    if isinstance(error, UnsafeResultError | OSError):
        return FileFixOutcome(str(path), remaining=found, error=str(error))
    # A rule's fix that fails is that file's problem, not the run's.
    return FileFixOutcome(str(path), remaining=found, error=f"a fix failed, file left as it was: {error!r}")


def with_drafts_finished(
    results: list[FixDraft | FileFixOutcome], settings: Settings, diff_only: bool, hold: bool
) -> list[FileFixOutcome]:
    """The results of `drafted` with each draft `finished`, what ruff says of their files as they were asked at once
    (`ruff_on_originals`)."""
    originals = ruff_on_originals([result for result in results if isinstance(result, FixDraft)])
    return [
        finished(result, settings, diff_only, hold, originals) if isinstance(result, FixDraft) else result
        for result in results
    ]


def ruff_on_originals(drafts: list[FixDraft]) -> dict[Path, RuffOnOriginal]:
    """What ruff says of each drafted file as it was read, asked in two runs for them all, of the files on disk: a
    run of ruff costs about 8 ms, most of it its start, and each changed file would take two. Only a file whose bytes
    on disk are still its UTF-8 text is asked (ruff reads UTF-8), that ruff formats at all (`ruff.LARGEST_TEXT`), and
    for which it reads the settings it reads for the text (`ruff.with_settings_as_for_text`); the others ask ruff of
    their text themselves."""
    asked = {
        os.path.abspath(draft.path): draft
        for draft in drafts
        if max(len(draft.source.text), len(draft.result.text)) <= ruff.LARGEST_TEXT
        and draft.source.data == draft.source.text.encode("utf-8")
    }
    paths = ruff.with_settings_as_for_text(sorted(asked))
    if not paths:
        return {}
    diffs, codes = original_diffs(paths), original_codes(paths)
    answers = {}
    for path in paths:
        # ruff read the file after the fix did: what it read is what the fix read only where the bytes are unchanged.
        if read_bytes(path) == asked[path].source.data:
            answers[asked[path].path] = RuffOnOriginal(diffs.get(path), codes.get(path))
    return answers


def _unified_diff(path: Path | str, before: str, after: str) -> str:
    return "".join(
        difflib.unified_diff(
            physical_lines(before),
            physical_lines(after),
            # A crafted name must not break the header line (and forge one after it).
            fromfile=f"a/{printable(str(path))}",
            tofile=f"b/{printable(str(path))}",
        )
    )


def with_converter_import_layout(outcomes: list[FileFixOutcome], diff_only: bool) -> list[FileFixOutcome]:
    """The held outcomes once every file generated from a modular source that the fix changes, or from that of a
    generated file it changes, has the gap above its imports that transformers' converter would give it
    (`transformers.import_layout`): a held text gets it, and a file of the run the fix left as it was gets a held
    fix of its own."""
    from rope_lint.transformers.import_layout import generated_files, laid_out

    outcomes = list(outcomes)
    index = {resolved(outcome.path): number for number, outcome in enumerate(outcomes)}
    modulars = set()
    for outcome in outcomes:
        if outcome.held is not None:
            path, text = outcome.path, outcome.held.source.text
            is_modular = banner.is_modular_source(path)
            modulars.add(resolved(path) if is_modular else banner.modular_source(path, text))

    def texts(path: str) -> tuple[str, str]:
        """A file's text before and after the held fix."""
        number = index.get(resolved(path))
        held = outcomes[number].held if number is not None else None
        return (held.source.text, held.text) if held is not None else (generated.file_text(path),) * 2

    for modular in sorted(filter(None, modulars)):
        modular_before, modular_after = texts(modular)
        for path in generated_files(modular):
            number = index.get(resolved(path))
            if number is None:  # not among the files of this run: never written
                continue
            generated_before, generated_after = texts(path)
            text = laid_out((generated_before, modular_before), (generated_after, modular_after))
            if text is None:
                continue
            outcome = outcomes[number]
            diff = _unified_diff(outcome.path, generated_before, text) if diff_only else ""
            if outcome.held is not None:
                held = dataclasses.replace(outcome.held, text=text)
                outcomes[number] = dataclasses.replace(outcome, held=held, diff=diff)
                continue
            source = decode(outcome.path, read_bytes(outcome.path))
            if isinstance(source, SourceFile) and source.text == generated_before:
                held = HeldFix(source, text, outcome.remaining)
                outcomes[number] = dataclasses.replace(outcome, held=held, diff=diff)
    return outcomes


def with_held_fix_written(outcome: FileFixOutcome) -> FileFixOutcome:
    """The outcome once its held fix is written; if the write fails, the file is as it was and the outcome says why."""
    held = outcome.held
    assert held is not None
    try:
        write_atomically(held.source, held.text)
    except OSError as error:
        return without_held_fix(outcome, str(error))
    return dataclasses.replace(outcome, original=held.source.text)


def without_held_fix(outcome: FileFixOutcome, reason: str) -> FileFixOutcome:
    """The outcome of dropping a held fix: the file as it was, with its findings, and `reason` as its error."""
    assert outcome.held is not None
    return FileFixOutcome(outcome.path, remaining=outcome.held.found, error=reason)


def restored(outcome: FileFixOutcome, reason: str) -> FileFixOutcome:
    """Undo a held fix that `with_held_fix_written` wrote: the file gets its original bytes back (its encoding, BOM
    and line endings were kept by the write, so the text encodes to them), and the outcome is that of dropping it."""
    held = outcome.held
    assert held is not None
    written = held.source._replace(data=held.source.encode(held.text), text=held.text)
    try:
        write_atomically(written, held.source.text)
    except OSError as error:
        return without_held_fix(outcome, f"{reason}; but it could not be restored: {error}")
    return without_held_fix(outcome, reason)


def regeneration_kept(outcomes: list[FileFixOutcome]) -> tuple[list[FileFixOutcome], list[Diagnostic]]:
    """The outcomes once the fix of every group of transformers files that breaks regeneration from a modular source
    is dropped (a written file restored, a held one not written), and an RPL905 finding for each break found
    (`transformers.regeneration`)."""
    from rope_lint.transformers.regeneration import checked_outcomes

    outcomes = list(outcomes)
    index = {o.path: number for number, o in enumerate(outcomes)}

    def drop(paths: set[str], reason: str) -> None:
        for path in paths:
            outcome = outcomes[index[path]]
            outcomes[index[path]] = (
                restored(outcome, reason) if outcome.original is not None else without_held_fix(outcome, reason)
            )

    held = [(o.path, o.held.source.text, o.held.text) for o in outcomes if o.held is not None]
    return outcomes, checked_outcomes(held, drop)


def gone(applied: list[Diagnostic], found: list[Diagnostic], remaining: list[Diagnostic]) -> list[Diagnostic]:
    """The findings of `applied` that the fixed text no longer has: what a fix counts as fixed.

    A fix can be applied and leave its finding: a class codemod may not reach every finding of its class, and a fix
    whose node an enclosing fix replaced changes nothing. Positions move with the edit, so a finding left is matched
    by its code and message (which of two identical findings counts as fixed is arbitrary; how many is not); those
    the fix did not touch account for their own matches first.
    """
    chosen = set(map(id, applied))
    left = Counter((d.code, d.message) for d in remaining)
    left.subtract((d.code, d.message) for d in found if id(d) not in chosen)
    fixed = []
    for diagnostic in applied:
        key = (diagnostic.code, diagnostic.message)
        if left[key] > 0:
            left[key] -= 1
        else:
            fixed.append(diagnostic)
    return fixed


def fixable(diagnostics: Iterable[Diagnostic], unsafe: bool) -> list[Diagnostic]:
    return [d for d in diagnostics if d.fix is not None and (unsafe or d.fix.safety is FixSafety.SAFE)]


def apply_fixes(source: str, diagnostics: list[Diagnostic]) -> FixResult:
    """Edit `source` at each finding's range (`unverified_fixes`). Raises UnsafeResultError when the result would not
    compile."""
    result = unverified_fixes(source, diagnostics)
    _compiled(result.text)
    return result


def unverified_fixes(source: str, diagnostics: list[Diagnostic], package: PackageCallers | None = None) -> FixResult:
    """Edit `source` at each finding's range, without compiling the result: `finished` compiles it, or the text that
    ruff formats from it.

    LibCST is slow on large files, so only the top-level statements that hold a finding are parsed and edited, each
    run of them on its own, and spliced back between the untouched lines. Every fix is local to its statement (a
    codemod to its class), except an added import, which is inserted in the whole text at the end. The module names
    a fix writes are resolved by scope (`names.ModuleNames`), against the whole file's module-level bindings. A
    codemod asks `package`, the run's, what the rest of the file's package does with its names, where given.
    """
    # A generated file's tree is the one that locating its origins parsed, a modular source's (the findings' path is
    # the file's) the one that its carried rewrites did: `parsed_text` keeps the last few. Another file's is not kept
    # (16 trees held 30 MB more).
    shared = banner.has_banner(source) or any(banner.is_modular_source(d.path) for d in diagnostics[:1])
    tree = (generated.parsed_text(source) if shared else None) or ast.parse(source)
    lines = physical_lines(source)
    names = ModuleNames(source, tree)
    applied: list[Diagnostic] = []
    pieces: list[str] = []
    regions: list[Region] = []
    done = new_done = 0
    for first, last, inside in _batched(_statement_runs(tree, len(lines), diagnostics), lines):
        pieces.append("".join(lines[done : first - 1]))
        new_first = new_done + first - 1 - done
        old_chunk = lines[first - 1 : last]
        fixed, fixed_here = _fix_chunk("".join(old_chunk), inside, first - 1, names, source, tree, package)
        new_chunk = physical_lines(fixed)
        regions += [
            (first - 1 + a, first - 1 + b, new_first + c, new_first + d)
            for a, b, c, d in changed_regions(old_chunk, new_chunk)
        ]
        pieces.append(fixed)
        applied += fixed_here
        done, new_done = last, new_first + len(new_chunk)
    pieces.append("".join(lines[done:]))
    text = "".join(pieces)
    if any(
        isinstance(d.fix.payload, ClassRewrite) and d.fix.payload.codemod == "rope_tables" for d in applied if d.fix
    ):
        from rope_lint.codemods.rope_tables import with_table_on_device

        text, at, added = with_table_on_device(text)
        regions = _shifted(regions, at, added)
    if names.imports:
        before = len(physical_lines(text))
        text, at = with_imports(text, names.imports)
        regions = _shifted(regions, at, len(physical_lines(text)) - before)
    formatted_with = {
        (first, end): around
        for first, end, _, _ in regions
        if end > first and (around := lines_formatted_with(tree, lines, first, end)) is not None
    }
    return FixResult(text, applied, regions, formatted_with)


def _shifted(regions: list[Region], at: int, added: int) -> list[Region]:
    """The changed regions after `added` lines were inserted at line `at` (0-based) of the new text."""
    return [(a, b, c + added, d + added) if c >= at else (a, b, c, d) for a, b, c, d in regions]


def _compiled(text: str) -> str:
    """`text`, which compiles; else UnsafeResultError."""
    error = compile_error(text)
    if error is not None:
        raise UnsafeResultError(f"the fixed code would not compile ({error}); the file was left as it was")
    return text


def compile_error(text: str) -> str | None:
    """Why `text` does not compile, or None. `compile`, not `ast.parse`: a `return` outside a function, or a name both
    global and assigned before, parse and still fail to compile."""
    with warnings.catch_warnings():  # the file's own warnings (an invalid escape) are not the fix's to report
        warnings.simplefilter("ignore")
        try:
            compile(text, "<fixed>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
            return str(error)
    return None


def _compiling_or(candidate: str, fallback: str) -> str:
    return candidate if candidate == fallback or compile_error(candidate) is None else fallback


def _statement_runs(
    tree: ast.Module, line_count: int, diagnostics: list[Diagnostic]
) -> list[tuple[int, int, list[Diagnostic]]]:
    """Line ranges (1-based, inclusive) of the runs of top-level statements that the findings touch, merged, each with
    its findings. Found by bisection, so that a file with a finding in every function costs no more per finding than
    a file with one.

    A finding outside every statement (there is none in practice) makes the run the whole file.
    """
    starts, ends = [], []
    for statement in tree.body:
        starts.append(first_line(statement))
        ends.append(statement.end_lineno or statement.lineno)
    runs: list[tuple[int, int, Diagnostic]] = []
    for diagnostic in diagnostics:
        first = bisect.bisect_left(ends, diagnostic.start.line)  # the first statement that ends at or after it
        last = bisect.bisect_right(starts, diagnostic.end.line) - 1  # the last one that starts at or before its end
        if first > last:
            return [(1, line_count, list(diagnostics))]
        runs.append((starts[first], ends[last], diagnostic))
    merged: list[tuple[int, int, list[Diagnostic]]] = []
    for first, last, diagnostic in sorted(runs, key=lambda run: run[:2]):
        if merged and first <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last), [*merged[-1][2], diagnostic])
        else:
            merged.append((first, last, [diagnostic]))
    return merged


def _batched(
    runs: list[tuple[int, int, list[Diagnostic]]], lines: list[str]
) -> list[tuple[int, int, list[Diagnostic]]]:
    """Runs of statements near each other joined, with the lines between them, into one run of up to `_BATCH_LINES`
    lines: each LibCST parse costs a few milliseconds beyond its lines, which a file with a finding in every function
    pays for every function otherwise. LibCST drops a form feed that starts a line of module level, so no run is
    joined across one."""
    batches: list[tuple[int, int, list[Diagnostic]]] = []
    for first, last, inside in runs:
        if batches:
            batch_first, batch_last, batch = batches[-1]
            if last - batch_first < _BATCH_LINES and not any("\x0c" in line for line in lines[batch_last:last]):
                batches[-1] = (batch_first, last, batch + inside)
                continue
        batches.append((first, last, inside))
    return batches


_BATCH_LINES = 400


def _fix_chunk(
    chunk: str,
    diagnostics: list[Diagnostic],
    line_offset: int,
    names: ModuleNames,
    source: str,
    tree: ast.Module,
    package: PackageCallers | None,
) -> tuple[str, list[Diagnostic]]:
    """Apply the findings' fixes to a run of top-level statements of `source` (whose syntax tree is `tree`) that starts
    after `line_offset` lines."""
    # Findings whose fix is a codemod over their whole class (the RPL2xx family) are fixed after the others.
    codemod_fixes = [d for d in diagnostics if d.fix is not None and isinstance(d.fix.payload, ClassRewrite)]
    in_place = [d for d in diagnostics if d not in codemod_fixes]
    applied: list[Diagnostic] = []
    scopes_needed = False
    if in_place:
        try:
            by_statement = _fixed_statement_by_statement(chunk, in_place, line_offset, names, tree)
        except ScopeNeeded:  # the scopes are worked out over the whole run, at once
            by_statement, scopes_needed = None, True
        if by_statement is not None:
            (chunk, applied), in_place = by_statement, []
    if not in_place and not codemod_fixes:
        return chunk, applied
    fixed = cst.parse_module(chunk)
    if in_place:
        by_range: dict[Range, list[Diagnostic]] = {}
        for diagnostic in in_place:
            by_range.setdefault(_shifted_range(diagnostic, line_offset), []).append(diagnostic)
        fixed, applied = _fixed_in_place(fixed, by_range, names, scopes_needed)
    if codemod_fixes:
        from rope_lint.codemods import apply_codemods

        # The findings' path is the file's: the rope codemod reads a copy's `# Copied from` source through it, and the
        # bases of a class and the file's imports from the whole text's tree.
        codemods = sorted({d.fix.payload.codemod for d in codemod_fixes if d.fix})
        fixed = apply_codemods(fixed, codemods, codemod_fixes[0].path, source, tree, package)
    # LibCST drops the form feeds that start a module, which are the start of this run's first line.
    lost = chunk[: len(chunk) - len(chunk.lstrip("\x0c"))]
    return lost + fixed.code.lstrip("\x0c"), applied + codemod_fixes


def _shifted_range(diagnostic: Diagnostic, line_offset: int) -> Range:
    """The finding's range in a text that starts after `line_offset` lines of its file."""
    start, end = diagnostic.start, diagnostic.end
    return (start.line - line_offset, start.column), (end.line - line_offset, end.column)


def _fixed_statement_by_statement(
    chunk: str, diagnostics: list[Diagnostic], line_offset: int, names: ModuleNames, tree: ast.Module
) -> tuple[str, list[Diagnostic]] | None:
    """The run of statements `chunk`, which starts after `line_offset` lines of the file of `tree`, with the findings'
    in-place fixes applied and the findings fixed, each simple statement that holds some parsed and fixed on its own.
    LibCST works out the position of every node it parses, at twice the cost of the parse, and a run is mostly a
    whole class for findings in a few of its lines. None where a finding is not inside a simple statement alone on its
    lines: the run is then fixed whole. Raises `ScopeNeeded` where a fix needs the scopes, which only the whole run
    has."""
    lines = physical_lines(chunk)
    newline = lines[0][len(lines[0].rstrip("\r\n")) :]
    held: dict[ast.stmt, list[Diagnostic]] = {}
    for diagnostic in diagnostics:
        statement = _simple_statement_holding(tree, diagnostic)
        if not newline or statement is None or not _alone_on_its_lines(statement, lines, line_offset, diagnostic):
            return None
        held.setdefault(statement, []).append(diagnostic)
    applied: list[Diagnostic] = []
    for statement in sorted(held, key=lambda statement: statement.lineno, reverse=True):  # lines above stay put
        first, end = statement.lineno - 1 - line_offset, (statement.end_lineno or statement.lineno) - line_offset
        # An indented statement is parsed as the block of an `if` of its indentation, its lines as they are; the
        # header ends as the run's first line does, which is the newline LibCST writes for the run.
        header = f"if 1:{newline}" if lines[first][:1] in (" ", "\t") else ""
        offset = line_offset + first - (1 if header else 0)
        by_range: dict[Range, list[Diagnostic]] = {}
        for diagnostic in held[statement]:
            by_range.setdefault(_shifted_range(diagnostic, offset), []).append(diagnostic)
        module, fixed_here = _visited(
            cst.parse_module(header + "".join(lines[first:end])), _FixTransformer(by_range, names)
        )
        lines[first:end] = [module.code[len(header) :]]
        applied[:0] = fixed_here  # in the order of the text, as a visit of the run finds them
    return "".join(lines), applied


def _simple_statement_holding(tree: ast.Module, diagnostic: Diagnostic) -> ast.stmt | None:
    """The simple statement of `tree` whose lines hold the finding's; None where the finding lies in a compound
    statement's header or decorators, or more than one statement holds its lines."""
    levels = list(statements_holding(tree.body, diagnostic.start.line, diagnostic.end.line))
    if not levels or any(len(holding) != 1 for holding in levels) or child_statements(levels[-1][0]):
        return None
    return levels[-1][0]


def _alone_on_its_lines(statement: ast.stmt, lines: list[str], line_offset: int, diagnostic: Diagnostic) -> bool:
    """Whether `statement` (of the file whose `lines` after `line_offset` are given) has its lines to itself, with
    nothing before it on its first line and nothing but a comment after it on its last, and the finding lies inside
    it rather than being all of it (a fix of a whole run of statements may move the comments above it)."""
    first, end = statement.lineno - 1 - line_offset, (statement.end_lineno or statement.lineno) - line_offset
    if first < 0 or end > len(lines):
        return False
    own = lines[first:end]
    indent = len(own[0]) - len(own[0].lstrip(" \t"))
    after = own[-1].encode("utf-8", "surrogatepass")[statement.end_col_offset or 0 :].decode("utf-8", "surrogatepass")
    whole = diagnostic.start == (statement.lineno, indent) and diagnostic.end.line == statement.end_lineno
    return (
        statement.col_offset == indent
        and _NOTHING_BUT_A_COMMENT.fullmatch(after) is not None
        and not any("\x0c" in line for line in own)  # LibCST drops a form feed that starts a module
        and not whole
    )


# What may follow a statement on its last line, where no other statement shares it.
_NOTHING_BUT_A_COMMENT = re.compile(r"[ \t]*(#[^\r\n]*)?(\r\n|\r|\n)?")


def _fixed_in_place(
    module: cst.Module, by_range: dict[Range, list[Diagnostic]], names: ModuleNames, scopes_needed: bool = False
) -> tuple[cst.Module, list[Diagnostic]]:
    """The findings' fixes applied to a run of statements, and the findings fixed. Without working out scopes first,
    unless they are known to be needed: they cost more than the fixes, and only a module name that a scope of the
    file binds needs them (`ScopeNeeded`)."""
    if scopes_needed:
        return _visited(module, _ScopedFixTransformer(by_range, names))
    try:
        return _visited(module, _FixTransformer(dict(by_range), names))
    except ScopeNeeded:
        return _visited(module, _ScopedFixTransformer(by_range, names))


def _visited(module: cst.Module, transformer: _Fixes) -> tuple[cst.Module, list[Diagnostic]]:
    return _Metadata(module, unsafe_skip_copy=True).visit(transformer), transformer.applied


class _Metadata(MetadataWrapper):
    """LibCST's wrapper, but for a batched visit with nothing to visit for, which it skips. LibCST resolves the
    positions, which no batched visit computes, and then visits the whole tree with the batched providers, of which
    there is none: a third of the in-place fixes' time."""

    def visit_batched(
        self,
        visitors: Iterable[cst.BatchableCSTVisitor],
        before_visit: Callable[[cst.CSTNode], None] | None = None,
        after_leave: Callable[[cst.CSTNode], None] | None = None,
    ) -> cst.CSTNode:
        visitors = list(visitors)
        if not visitors and before_visit is None and after_leave is None:
            return self.module  # what the visit gives back: a visitor changes nothing
        return super().visit_batched(visitors, before_visit, after_leave)


# Nodes whose body is a sequence of statements: the blocks that a finding spanning several statements lies in.
_STATEMENT_BLOCKS = (cst.Module, cst.IndentedBlock, cst.SimpleStatementLine, cst.SimpleStatementSuite)


class _Fixes(Transformer):
    """Calls each finding's rule on the node at the finding's range.

    That node is an expression, or else a run of statements of one block: a range from the start of one statement
    to the end of a later one (or the same one) of a block's body, which is a run of lines or a run of `;`-separated
    statements on one line. The rule's `fix` then receives the block cut down to that run (`block.with_changes(body=
    run)`) and returns it with the statements that replace the run in its body; nothing else of it is used.
    """

    def __init__(self, pending: dict[Range, list[Diagnostic]], names: ModuleNames) -> None:
        super().__init__()
        self.pending = pending
        self.names = names
        self.applied: list[Diagnostic] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        # Rebuilding every node of a class costs more than the fixes: a statement that holds no finding's range is
        # left as it is, unvisited. A statement's range holds all of it but its decorators; a block's would not hold
        # those of its first statement, so blocks are always visited.
        if not isinstance(node, cst.BaseStatement):
            return True
        start, end = _range(self.get_metadata(PositionProvider, node))
        for decorator in getattr(node, "decorators", ()):
            start = min(start, _range(self.get_metadata(PositionProvider, decorator))[0])
        return any(start <= first and last <= end for first, last in self.pending)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:
        if isinstance(original_node, _STATEMENT_BLOCKS):
            return self._fix_statement_runs(original_node, updated_node) if self.pending else updated_node
        # Several nodes can share a range (an argument and its value); the innermost expression comes first.
        if not isinstance(original_node, cst.BaseExpression):
            return updated_node
        position = self.get_metadata(PositionProvider, original_node, None)
        if position is None:
            return updated_node
        for diagnostic in self.pending.pop(_range(position), []):
            updated_node = self._fix(updated_node, diagnostic, original_node)
        return updated_node

    def _fix_statement_runs(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:
        starts = {start for start, _ in self.pending}
        positions = [self.get_metadata(PositionProvider, statement) for statement in original_node.body]
        body = list(updated_node.body)
        end = len(body)  # runs are taken from the last one up, and one that overlaps a later run stays unfixed
        for first in reversed(range(len(body))):
            start = _range(positions[first])[0]
            if start not in starts:
                continue
            for last in range(first, end):
                diagnostics = self.pending.pop((start, _range(positions[last])[1]), [])
                if diagnostics:
                    run = updated_node.with_changes(body=body[first : last + 1])
                    for diagnostic in diagnostics:
                        run = self._fix(run, diagnostic, original_node.body[first])
                    body[first : last + 1] = run.body
                    end = first
                    break
        return updated_node.with_changes(body=body) if end < len(positions) else updated_node

    def _fix(self, node: cst.CSTNode, diagnostic: Diagnostic, placed: cst.CSTNode) -> cst.CSTNode:
        """The rule's fix of `node`, its module names resolved in the scope of `placed`, the node in the original."""
        assert diagnostic.fix is not None
        fixed = rule_class(diagnostic.code)().fix(node, diagnostic.fix.payload)
        scoped = isinstance(self, _ScopedFixTransformer)
        scope = self.get_metadata(ScopeProvider, placed, None) if scoped else None
        try:
            resolved = self.names.resolved(node, fixed, scope, diagnostic.fix.adds_import, scopes_known=scoped)
        except ImportedLazily:
            return node  # the file must import without the module: no import of it is added at module level
        self.applied.append(diagnostic)
        return resolved


# Two classes, neither a subclass of the other: LibCST caches a class's metadata dependencies in a class attribute,
# which a subclass would inherit.
class _FixTransformer(_Fixes):
    METADATA_DEPENDENCIES = (PositionProvider,)


class _ScopedFixTransformer(_Fixes):
    """Also resolves the module names a fix writes in the scope of its node: for a run of statements where a fix wrote
    a name that a function, class, lambda or comprehension of the file binds."""

    METADATA_DEPENDENCIES = (PositionProvider, ScopeProvider)


def _range(position: CodeRange) -> Range:
    return ((position.start.line, position.start.column), (position.end.line, position.end.column))
