"""From files to findings: read, prefilter, parse what can match with `ast`, run the rules, apply suppressions.

`check` never imports LibCST, torch or the code it reads: a one-file check must start fast, and reading model code
must not run it. What only the check of a file needs (the prefilter's parser, the rules' file context, suppressions)
is imported when a file is checked: a warm run, whose files the result cache answers for, checks none.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from functools import cached_property, partial

from rope_lint import TYPE_CHECKING
from rope_lint.config import Config
from rope_lint.diagnostics import INTERNAL_ERROR, READ_ERROR, SYNTAX_ERROR, Diagnostic, Position
from rope_lint.files import (
    SOURCE_LIMIT,
    Excludes,
    Listings,
    SourceFile,
    absolute_paths,
    read_regular,
    status_signature,
)
from rope_lint.rules import Selection, matches, stands_if_called_at_construction
from rope_lint.rules.analysis.callers import PackageCallers

if TYPE_CHECKING:
    import re
    from collections.abc import Sequence
    from typing import Any, TypeVar

    from rope_lint import prefilter
    from rope_lint.cache import ResultCache
    from rope_lint.files import FilePath
    from rope_lint.prefilter import candidates
    from rope_lint.rules.base import Rule

    T = TypeVar("T")
    Item = TypeVar("Item")

# Below this many files a process pool costs more to start than it saves, and a result cache more to load, hash
# and write than it saves.
LARGE_RUN = 48


class Settings:
    """What the rules need to know of a run, resolved from config and flags."""

    def __init__(
        self,
        rules: Sequence[Rule],
        root: FilePath,
        per_file_ignores: dict[str, list[str]] | None = None,
        verbose: bool = False,
    ) -> None:
        # A `Selection` imports its rules once a file is checked: a warm check, which checks none, needs their codes.
        self.rules = rules
        self.codes = rules.codes if isinstance(rules, Selection) else [rule.code for rule in rules]
        self.root = root
        self.per_file_ignores = per_file_ignores or {}
        self.verbose = verbose  # print the traceback of a rule that fails, beside its RPL903 finding
        # The folders this run has listed, and what the rest of a package does with a file's public helpers.
        self.listings = Listings()
        self.callers = PackageCallers(
            frozenset(code for code in self.codes if not stands_if_called_at_construction(code)), self.listings
        )

    @classmethod
    def from_config(cls, config: Config, rules: Sequence[Rule], verbose: bool = False) -> Settings:
        return cls(rules=rules, root=config.root, per_file_ignores=config.per_file_ignores, verbose=verbose)

    # The rules' prefilters as one, made when the first file is read: the triggers a file must contain for a rule to
    # look at it, the screens of their occurrences, and the test of the classes parsed whole (see candidates).
    @cached_property
    def _specs(self) -> list[prefilter.PrefilterSpec]:
        return [rule.prefilter for rule in self.rules]

    @cached_property
    def triggers(self) -> tuple[str, ...]:
        return tuple({trigger.decode() for spec in self._specs for trigger in spec.triggers})

    @cached_property
    def groups(self) -> dict[str, re.Pattern[bytes]]:
        from rope_lint.prefilter.candidates import prefix_groups

        return prefix_groups(self.triggers)

    @cached_property
    def may_match(self) -> candidates.Prefilter:
        from rope_lint.prefilter.candidates import Prefilter

        return Prefilter(self.triggers, self.groups)

    @cached_property
    def screens(self) -> dict[str, candidates.Keep]:
        from rope_lint.prefilter import combined_screens

        return combined_screens(self._specs, self.triggers)

    @cached_property
    def parses_whole_class(self) -> prefilter.ClassTest | None:
        from rope_lint.prefilter import combined_class_test

        return combined_class_test(self._specs)

    def ignored_codes(self, path: FilePath) -> list[str]:
        codes: list[str] = []
        for pattern, pattern_codes in self.per_file_ignores.items():
            if Excludes([pattern], self.root)(path):
                codes.extend(pattern_codes)
        return codes


def check_source(
    path: str, source: str, settings: Settings, occurrences: candidates.Occurrences | None = None
) -> list[Diagnostic]:
    """Findings for one file's text, suppressions and per-file ignores applied. `occurrences` are of the file's
    bytes as read (`candidates.as_parsed`), where the caller has them."""
    return settings.callers.standing(_findings(path, source, settings, occurrences), source)


def _findings(
    path: str, source: str, settings: Settings, occurrences: candidates.Occurrences | None = None
) -> list[Diagnostic]:
    """`check_source`'s findings, before the package's other modules are asked about the file's public helpers: what
    the result cache keeps, as it depends on this file alone."""
    from rope_lint.prefilter import candidates
    from rope_lint.rules.analysis.context import FileContext, walks_remembered
    from rope_lint.suppressions import is_suppressed

    if occurrences is None:
        occurrences = candidates.Occurrences.of_text(source, settings.screens, settings.groups)
    triggers = settings.triggers
    if not occurrences.triggered(triggers):
        return []
    try:
        tree = candidates.parse(source, occurrences, triggers, settings.parses_whole_class, path)
    except SyntaxError as error:
        return [_error(path, SYNTAX_ERROR, f"syntax error: {error.msg}", error.lineno or 1, (error.offset or 1) - 1)]
    except (RecursionError, MemoryError):
        return [_error(path, SYNTAX_ERROR, "expression too deeply nested to parse", 1, 0)]
    except ValueError as error:  # null bytes, on Pythons that raise ValueError for them
        return [_error(path, SYNTAX_ERROR, f"cannot parse: {error}", 1, 0)]
    try:
        ctx = FileContext(path, source, tree, triggers, occurrences)
    except RecursionError:  # a 50,000-deep attribute chain parses, but is too deep to index
        return [_error(path, SYNTAX_ERROR, "expression too deeply nested to analyse", 1, 0)]
    ignored = settings.ignored_codes(path)
    found: list[Diagnostic] = []
    with walks_remembered():
        for rule in settings.rules:
            if matches(rule.code, ignored):
                continue
            try:
                found.extend(map(ctx.diagnostic, rule.check(ctx)))
            except (RecursionError, MemoryError, Exception) as error:  # one rule's bug must not stop the run
                if settings.verbose:
                    import traceback

                    traceback.print_exc(file=sys.stderr)
                found.append(
                    _error(path, INTERNAL_ERROR, f"rule {rule.code} failed: {type(error).__name__}: {error}", 1, 0)
                )
    return sorted(
        (d for d in found if not is_suppressed(d.code, ctx.lines, d.start.line, d.end.line)),
        key=lambda d: d.sort_key,
    )


def read(path: FilePath) -> SourceFile | Diagnostic:
    """The file, or the finding that says why it cannot be read."""
    data = read_bytes(path)
    return data if isinstance(data, Diagnostic) else decode(path, data)


def text_of(path: str, given: dict[str, str] | None) -> str | None:
    """The text of the file a finding names: as `given` holds it by path (what came on standard input), else as read;
    None where it cannot be read."""
    if given is not None and path in given:
        return given[path]
    source = read(path)
    return None if isinstance(source, Diagnostic) else source.text


def read_bytes(path: FilePath) -> bytes | Diagnostic:
    try:
        try:
            return read_regular(path, SOURCE_LIMIT)
        except IsADirectoryError:  # a folder the walk could not list: say why
            os.scandir(path).close()
            return _error(str(path), READ_ERROR, "cannot read folder", 1, 0)
    except OSError as error:
        return _error(str(path), READ_ERROR, f"cannot read: {error.strerror or error}", 1, 0)


def decode(path: FilePath, data: bytes) -> SourceFile | Diagnostic:
    try:
        return SourceFile.decode(path, data)
    except ValueError as error:
        return _error(str(path), READ_ERROR, str(error), 1, 0)


def check_file(path: FilePath, settings: Settings) -> list[Diagnostic]:
    return settings.callers.standing(_unresolved_findings(path, settings))


def check_bytes(path: str, data: bytes, settings: Settings) -> list[Diagnostic]:
    """The findings of `check_file` for a file that holds `data`, given rather than read (standard input): the rest of
    its package is read from disk, with `data`'s text in place of the file's."""
    triggered = _triggered_source(path, data, settings)
    if triggered is None or isinstance(triggered, Diagnostic):
        return [] if triggered is None else [triggered]
    source, occurrences = triggered
    return check_source(path, source.text, settings, occurrences)


def _unresolved_findings(path: FilePath, settings: Settings) -> list[Diagnostic]:
    """The file's findings before the package is asked about its public helpers (`_findings`)."""
    data = read_bytes(path)
    return [data] if isinstance(data, Diagnostic) else _check_bytes(path, data, settings)


def check_file_keyed(path: FilePath, settings: Settings) -> tuple[list[int] | None, str | None, list[Diagnostic]]:
    """The file's findings before the package is asked (`_findings`), the key they are cached under (None when the
    file could not be read), and the file's status before it was read."""
    from rope_lint.cache import content_key

    status = status_signature(path)
    data = read_bytes(path)
    if isinstance(data, Diagnostic):
        return None, None, [data]
    return status, content_key(data, settings.ignored_codes(path)), _check_bytes(path, data, settings)


def read_triggered(path: FilePath, settings: Settings) -> TriggeredSource | Diagnostic | None:
    """The file, decoded, with where its bytes hold triggers, or the finding that says why it cannot be read; None when
    it holds no rule's trigger, which a check never decodes, so that a fix says of a file what a check says."""
    data = read_bytes(path)
    return data if isinstance(data, Diagnostic) else _triggered_source(path, data, settings)


# A file's text, and the occurrences of triggers in its bytes as read, which its check reads (`check_source`).
TriggeredSource = tuple[SourceFile, "candidates.Occurrences"]


def _triggered_source(path: FilePath, data: bytes, settings: Settings) -> TriggeredSource | Diagnostic | None:
    # Triggers are ASCII, and Python source is in an ASCII-compatible encoding: bytes without one need no decoding.
    if not settings.may_match(data):
        return None
    from rope_lint.prefilter import candidates

    occurrences = candidates.Occurrences(candidates.as_parsed(data), screens=settings.screens, groups=settings.groups)
    if not occurrences.triggered(settings.triggers):
        return None
    source = decode(path, data)
    if isinstance(source, Diagnostic):
        return source
    occurrences.encoding = source.encoding
    return source, occurrences


def _check_bytes(path: FilePath, data: bytes, settings: Settings) -> list[Diagnostic]:
    triggered = _triggered_source(path, data, settings)
    if triggered is None:
        return []
    if isinstance(triggered, Diagnostic):
        return [triggered]
    source, occurrences = triggered
    return _findings(str(path), source.text, settings, occurrences)


def check_paths(paths: Iterable[FilePath], settings: Settings, cache: ResultCache | None = None) -> list[Diagnostic]:
    """Every file's findings, in order. With a cache, files whose key it holds are not checked again, and it
    learns the others."""
    paths = list(paths)
    if cache is None:
        # The package is asked once, for every file's findings: each question about a name not asked before reads
        # every module of the package (transformers 5.24.0's: 2,912 files, 0.1 s), and each process asked it again.
        found = map_files(partial(_unresolved_findings, settings=settings), paths)
        return settings.callers.standing([d for result in found for d in result])
    from rope_lint.cache import content_key

    found: dict[FilePath, list[Diagnostic]] = {}
    absolute = dict(zip(paths, absolute_paths(paths), strict=True))  # the cache knows files by their absolute paths
    if cache:  # a run with a cache to use looks every file up here, and checks only the others in parallel
        for path in paths:
            status = status_signature(path)
            key = cache.key_by_status(absolute[path], status)
            if key is None:  # a file whose status changed, or that the cache does not know: its bytes say
                data = read_bytes(path)
                if isinstance(data, Diagnostic):
                    continue  # reported by the check below
                key = content_key(data, settings.ignored_codes(path))
                cache.learn_status(absolute[path], status, key)
            cached = cache.get(key, str(path))
            if cached is not None:
                found[path] = cached
    unknown = [path for path in paths if path not in found]
    results = map_files(partial(check_file_keyed, settings=settings), unknown)
    for path, (status, key, diagnostics) in zip(unknown, results, strict=True):
        found[path] = diagnostics
        if key is not None:
            cache.put(key, diagnostics)
            cache.learn_status(absolute[path], status, key)
    settings.callers.remember(cache.packages, cache.status_taken)
    standing = settings.callers.standing([d for path in paths for d in found[path]])
    cache.packages = settings.callers.answers_to_remember()
    return standing


def map_files(
    work: Callable[[Item], T],
    files: Iterable[Item],
    processes: int | None = None,
    items_per_process: int | None = None,
    finish: Callable[[list[T]], list[T]] | None = None,
) -> list[T]:
    """`work` on every file (or other item: the probe's classes), spread over `processes` processes (one per core by
    default) when there are enough items to repay the start-up. With `finish`, each process passes the results of
    its items through it once it has taken its last item, before it hands them back: work that costs less done for
    many results at once (ruff's runs on the files a fix rewrote). With `items_per_process`, each forked process takes
    that many items and ends, and a fresh one takes the next: the memory that one item's work leaves fragmented does
    not raise the next items' peaks (the probe's classes: large tables of many sizes). Where there is no fork, a pool
    of long-lived processes takes them all.

    `files` may be an iterator that finds its items while the first are worked on (the probe's classes, module by
    module): a forked process of `items_per_process` items starts once they are found. A run without those forks
    takes every item first, so that work in this process never comes between the finding of two items.

    `work` must be picklable: a module-level function, or a `functools.partial` of one; so must its results.
    """
    processes = processes or os.cpu_count() or 1
    items = iter(files)
    first = list(itertools.islice(items, LARGE_RUN))
    if len(first) == LARGE_RUN and processes >= 2 and hasattr(os, "fork") and items_per_process:
        return _fresh_forks_map(work, itertools.chain(first, items), processes, items_per_process, finish)
    every = [*first, *items]
    if len(every) < LARGE_RUN or processes < 2:
        return _finished(finish, [work(path) for path in every])
    if hasattr(os, "fork"):
        return _forked_map(work, every, processes, finish)
    from concurrent.futures import ProcessPoolExecutor  # where there is no fork: Windows

    chunk = max(1, len(every) // (processes * 32))  # small enough that a slow file at the end does not idle a core
    with ProcessPoolExecutor(max_workers=processes) as pool:
        return _finished(finish, list(pool.map(work, every, chunksize=chunk)))


def _finished(finish: Callable[[list[T]], list[T]] | None, results: list[T]) -> list[T]:
    return finish(results) if finish is not None else results


def _indexes_kept(finish: Callable[[list[T]], list[T]], done: list[tuple[int, T]]) -> list[tuple[int, T]]:
    """`finish` of the results of indexed work (`_indexed`), with their indexes."""
    return list(zip([index for index, _ in done], finish([result for _, result in done]), strict=True))


def _forked_map(
    work: Callable[[Item], T], files: list[Item], processes: int, finish: Callable[[list[T]], list[T]] | None = None
) -> list[T]:
    """`work` on `files` in this process and `processes - 1` forked children, each taking the next file that none has
    taken yet (a counter in shared memory): a tree's few costly files (those a fix rewrites) end where they end, not
    in one process's fixed share while the others idle (every n-th file each: the fix of transformers 4.37.2
    `models/` kept one of two cores idle 0.6 s of 5.9). A pool would leave this process idle while it feeds the
    others: a whole-tree check took 7% longer."""
    from multiprocessing import Value

    taken = Value("q", 0)
    indexed = partial(_indexed, work)
    finish_indexed = partial(_indexes_kept, finish) if finish is not None else None
    children = [_forked(indexed, _untaken(files, taken), finish_indexed) for _ in range(1, processes)]
    results: list[T] = [None] * len(files)  # type: ignore[list-item]
    done = _finished(finish_indexed, [indexed(item) for item in _untaken(files, taken)])
    for child in children:
        done += _results_of(child)
    for index, result in done:
        results[index] = result
    return results


def _untaken(files: list[Item], taken: Any) -> Iterator[tuple[int, Item]]:
    """The files, with their indexes, that no process sharing the counter `taken` has taken yet, one at a time."""
    while True:
        with taken.get_lock():
            index = taken.value
            taken.value = index + 1
        if index >= len(files):
            return
        yield index, files[index]


def _indexed(work: Callable[[Item], T], item: tuple[int, Item]) -> tuple[int, T]:
    index, file = item
    return index, work(file)


def _fresh_forks_map(
    work: Callable[[Item], T],
    files: Iterator[Item],
    processes: int,
    items_per_process: int,
    finish: Callable[[list[T]], list[T]] | None = None,
) -> list[T]:
    """`work` on `files` in forked children of `items_per_process` files each, `processes` of them at a time, each
    started once its files are found; this process only finds the files, starts the children and collects their
    results, in order (the children end in about the order they start). A failure to find the next files (a
    probe's target that names nothing) kills the children first."""
    import signal

    running: list[tuple[int, int]] = []
    results: list[T] = []
    try:
        while chunk := list(itertools.islice(files, items_per_process)):
            if len(running) == processes:
                results += _results_of(running.pop(0))
            running.append(_forked(work, chunk, finish))
    except BaseException:
        for pid, read in running:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read)
        raise
    for child in running:
        results += _results_of(child)
    return results


def _forked(
    work: Callable[[Item], T], files: Iterable[Item], finish: Callable[[list[T]], list[T]] | None = None
) -> tuple[int, int]:
    """A forked child that runs `work` on `files` (its results passed through `finish`, where given) and sends its
    results back pickled through a pipe: (its pid, the pipe's end to read)."""
    import pickle

    parent = os.getpid()
    die_with_parent = _death_signal_setter()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its files, then out, whatever happens, without running the parent's code on
        try:
            os.close(read)
            die_with_parent()
            try:
                done = _finished(finish, [_unless_orphaned(work, path, parent) for path in files])
                payload = pickle.dumps((True, done))
            except BaseException as error:  # handed to the parent, which raises it as a pool would
                payload = pickle.dumps((False, error))
            with os.fdopen(write, "wb") as stream:
                stream.write(payload)
        finally:
            os._exit(0)
    os.close(write)
    return pid, read


def _results_of(child: tuple[int, int]) -> list:
    """What a `_forked` child sends back, once it ends; its error raised here."""
    import pickle

    pid, read = child
    with os.fdopen(read, "rb") as stream:
        payload = stream.read()
    os.waitpid(pid, 0)
    if not payload:
        raise RuntimeError(f"worker process {pid} ended without its results")
    finished, found = pickle.loads(payload)
    if not finished:
        raise found
    return found


def _death_signal_setter() -> Callable[[], None]:
    """What a forked child calls first so that the kernel kills it when this process dies: a `fix` killed mid-run
    must stop rewriting files, not leave its workers at it for seconds. Linux's prctl(PR_SET_PDEATHSIG); elsewhere
    nothing, and `_unless_orphaned` stops the child between files."""
    import signal

    prctl = linux_libc_function("prctl")
    if prctl is None:
        return lambda: None
    set_death_signal = 1  # PR_SET_PDEATHSIG in <linux/prctl.h>
    return lambda: prctl(set_death_signal, signal.SIGKILL)


def linux_libc_function(name: str) -> Callable[..., int] | None:
    """The C library's function `name` on Linux (prctl, glibc's mallopt), called with ints; None elsewhere, in a
    Python built without ctypes, or where the C library has no such function."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return getattr(ctypes.CDLL(None, use_errno=True), name)
    except (ImportError, OSError, AttributeError):
        return None


def _unless_orphaned(work: Callable[[Item], T], path: Item, parent: int) -> T:
    """`work` on `path`, unless the process that forked this one is gone (it died before the death signal was set,
    or the system has none): then this one ends at once."""
    if os.getppid() != parent:
        os._exit(1)
    return work(path)


def _error(path: str, code: str, message: str, line: int, column: int) -> Diagnostic:
    name = {READ_ERROR: "read-error", SYNTAX_ERROR: "syntax-error", INTERNAL_ERROR: "internal-error"}[code]
    position = Position(line, max(column, 0))
    return Diagnostic(path=path, code=code, name=name, message=message, start=position, end=position)
