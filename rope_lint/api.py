"""The run layer: paths and options in, a report out. What `rope-lint check`, `baseline` and `fix` do between
parsing their arguments and printing, for the command line, the flake8 plugin, scripts and tests alike.

- `check(paths, options)` gives a `Report`: the findings, and on request each finding's edit (for SARIF).
- `write_baseline(paths, output, options)` writes a baseline file and gives a `BaselineReport`.
- `fix(paths, options)` fixes files, or says how it would, and gives a `FixReport`.
- `check_input(data, path, options)` gives the `Report` of a file's bytes that came on standard input.
- `check_text(path, text, options)` gives the findings in a text that was not read from disk.

The reports are defined in `rope_lint.output` (`Report`), `rope_lint.output.fix_report` (`FixReport`) and
`rope_lint.output.baseline_report` (`BaselineReport`), which render them. A run that cannot be made (a configuration
that cannot be used, an unknown rule code, a baseline or git ref that cannot be read) raises `RunError`. What goes
wrong with a file is a finding about the run itself (RPL9xx), reported with the others.

What only some runs need (the result cache, baselines, git, LibCST for fixes and edits) is imported where it is used,
so that checking one file pays for none of it.
"""

from __future__ import annotations

import os
from collections import namedtuple
from functools import partial

from rope_lint import TYPE_CHECKING, progress
from rope_lint.config import Config, ConfigError, load, load_file
from rope_lint.diagnostics import ERROR_CODES, Diagnostic
from rope_lint.engine import LARGE_RUN, Settings, check_bytes, check_file, check_paths, check_source, decode, map_files
from rope_lint.files import Excludes, SourceFile, as_given, discover, resolve_afresh
from rope_lint.output import Report
from rope_lint.rules import UnknownCodeError, matches, select_rules, validate_selectors

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rope_lint.cache import ResultCache
    from rope_lint.files import FilePath
    from rope_lint.output.baseline_report import BaselineReport
    from rope_lint.output.fix_report import FixReport
    from rope_lint.transformers.generated import OriginNotes

__all__ = ["Options", "Report", "RunError", "check", "check_input", "check_text", "fix", "write_baseline"]


class RunError(Exception):
    """A run that cannot be made; the message is one line that says why (the command line prints it after
    `rope-lint: error: ` and exits 2)."""


class Options(
    namedtuple(
        "Options", ("select", "ignore", "exclude", "verbose", "config"), defaults=(None, None, None, False, None)
    )
):
    """What chooses a run's rules and files, as the command line's flags do.

    `select` and `ignore` are lists of codes or prefixes (`RPL1`, `ALL`), `exclude` of glob patterns. Each replaces the
    configuration's list when given; when None, the configuration's holds: that of `config`, a pyproject.toml-style
    file whose `[tool.rope-lint]` section is read (`--config`), when given; else that of the nearest pyproject.toml
    with the section, else every rule but the informational ones (RPL104), and no exclusion. `ignore` also drops
    findings about the run itself (RPL9xx), which `select` cannot. `verbose` prints the traceback of a rule that
    fails to stderr.
    """

    __slots__ = ()
    select: list[str] | None  # default None
    ignore: list[str] | None  # default None
    exclude: list[str] | None  # default None
    verbose: bool  # default False
    config: str | None  # default None


def check(
    paths: Sequence[str],
    options: Options | None = None,
    *,
    baseline: FilePath | None = None,
    diff_base: str | None = None,
    edits: bool = False,
    edit_limit: int | None = None,
    cache: bool = True,
    show_progress: bool = False,
) -> Report:
    """The findings of `rope-lint check`.

    In: `paths`, files and folders as a command line gives them (folders are searched for Python files; the
    configuration is found from the first path, `.` when there is none, unless `options.config` names it);
    `options`. And, as the flags of `check`: `baseline`, a file `write_baseline` wrote, whose findings are left out;
    `diff_base`, a git ref: only findings on lines changed since it are kept; `edits`, whether to compute each
    finding's edit (a LibCST parse per fixable finding; SARIF and `full` show them), and with `edit_limit` only
    those of the first `edit_limit` fixable findings (the others have none in the report: the `full` output shows a
    screenful, and need not wait on a parse per finding of a whole tree); `cache`, whether a run of many files may
    use the result cache in `.rope_lint_cache/` at the configuration's root (never with `verbose`, which wants a
    fresh run's tracebacks); `show_progress`, a progress bar on stderr, shown only on a terminal and for a long run.

    Out: a `Report` of the findings, sorted by path and position within each file, files in the order found. A
    finding in a file transformers generates from a modular source names, in its message, the source (or parent
    model) it comes from. Raises `RunError`.
    """
    config, settings, files = _resolved(paths, options or Options())
    results = _result_cache(config, settings, files, cache)
    try:
        findings = _findings(config, settings, files, results, show_progress)
        # Imported only when asked for: a plain check (a pre-commit run) pays for neither.
        if baseline is not None:
            from rope_lint.baseline import BaselineError, new_findings

            try:
                findings = new_findings(findings, baseline)
            except BaselineError as error:
                raise RunError(str(error)) from error
        if diff_base is not None:
            from rope_lint.gitdiff import GitDiffError, on_changed_lines

            try:
                findings = on_changed_lines(findings, diff_base, _repository_folder(_first(paths)))
            except GitDiffError as error:
                raise RunError(str(error)) from error
        findings = _with_origins_named(findings, results)
    finally:
        if results is not None:
            results.save()
    return _report(findings, edits, edit_limit)


def check_input(
    data: bytes,
    path: str | None = None,
    options: Options | None = None,
    *,
    edits: bool = False,
    edit_limit: int | None = None,
) -> Report:
    """The findings of `rope-lint check -`: a file's bytes that come on standard input (an editor's buffer), not
    read from disk.

    In: `data`; `path`, the file's name (`--stdin-filename`): the findings name it, the configuration is found from
    it, and the per-file ignores that match it apply, as for the file on disk; the configuration's excludes do not
    (ruff's apply to standard input only with `--force-exclude`). Without `path`, the findings name `-`, and the
    configuration is found from the current folder. `options`, `edits` and `edit_limit` as for `check`.

    Out: a `Report`, whose `sources` hold the text by the findings' path. A finding in a file that transformers
    generates does not name the source it comes from: that is read from the generated file on disk. Raises
    `RunError`.
    """
    name = "-" if path is None else as_given(path)
    config, settings = _configured("." if path is None else path, options or Options())
    findings = _without_ignored_errors(check_bytes(name, data, settings), config)
    source = decode(name, data)
    return _report(findings, edits, edit_limit, {name: source.text} if isinstance(source, SourceFile) else {})


def _report(
    findings: list[Diagnostic], edits: bool, edit_limit: int | None, sources: dict[str, str] | None = None
) -> Report:
    """The report of `findings`, with the edits of the first `edit_limit` fixable ones (all when None) if `edits`."""
    if not edits:
        return Report(findings, None, sources)
    from rope_lint.fix.edits import finding_edits

    edited = findings if edit_limit is None else _through_fixable(findings, edit_limit)
    return Report(findings, finding_edits(edited, sources) + [[] for _ in findings[len(edited) :]], sources)


def _with_origins_named(findings: list[Diagnostic], cache: ResultCache | None = None) -> list[Diagnostic]:
    """The findings, those in a file that transformers generates naming the modular source (or parent model) that
    they come from in their message (`generated.origin_notes`): from `cache` where every file that they were read from
    is as it was, else found over all cores and learnt by `cache`. Only a generated file's notes need syntax trees,
    and its banner says which it is: a warm check, which parses no file, imports no `ast`."""
    lines: dict[str, set[int]] = {}
    for d in findings:
        lines.setdefault(d.path, set()).add(d.start.line)
    notes: dict[str, dict[int, str]] = {}
    for path, wanted in lines.items():
        known = cache.origin_notes(os.path.abspath(path), wanted) if cache is not None else None
        if known is not None:
            notes[path] = known
    from rope_lint.banner import generated_paths

    # `origin_notes` reads each whole file itself, once it has taken its status.
    generated = sorted(generated_paths(path for path in lines if path not in notes))
    found = map_files(_origin_notes, [(path, sorted(lines[path])) for path in generated])
    for path, (found_notes, inputs) in zip(generated, found, strict=True):
        notes[path] = found_notes
        if cache is not None:
            cache.learn_origin_notes(os.path.abspath(path), lines[path], found_notes, inputs)
    return [
        d._replace(message=f"{d.message} ({note})") if (note := notes.get(d.path, {}).get(d.start.line)) else d
        for d in findings
    ]


def _origin_notes(item: tuple[str, list[int]]) -> OriginNotes:
    from rope_lint.transformers.generated import origin_notes

    return origin_notes(*item)


def _through_fixable(findings: list[Diagnostic], count: int) -> list[Diagnostic]:
    """The findings up to and with the `count`th one that has a fix."""
    fixable = [index for index, d in enumerate(findings) if d.fix is not None]
    if len(fixable) <= count:
        return findings
    return findings[: fixable[count - 1] + 1] if count else []


def write_baseline(
    paths: Sequence[str],
    output: FilePath,
    options: Options | None = None,
    *,
    cache: bool = True,
    show_progress: bool = False,
) -> BaselineReport:
    """`rope-lint baseline`: check `paths` as `check` does (without baseline, diff base or origins) and write the
    findings to the baseline file `output`, which a later `check(..., baseline=output)` leaves out.

    Out: a `BaselineReport`, with how many findings the file holds, and the findings about the run itself, which it
    never holds. Raises `RunError`, and `OSError` when `output` cannot be written.
    """
    from rope_lint import baseline
    from rope_lint.output.baseline_report import BaselineReport

    config, settings, files = _resolved(paths, options or Options())
    results = _result_cache(config, settings, files, cache)
    findings = _findings(config, settings, files, results, show_progress)
    if results is not None:
        results.save()
    written = baseline.write(output, findings)
    return BaselineReport(output, written, [d for d in findings if d.code in ERROR_CODES])


def fix(
    paths: Sequence[str],
    options: Options | None = None,
    *,
    unsafe: bool = False,
    diff: bool = False,
    verify: bool = False,
    verify_models: bool = True,
) -> FixReport:
    """`rope-lint fix`: apply the fixes of the findings in `paths`, safe ones only unless `unsafe`.

    In: `paths` and `options` as for `check`; `unsafe`, also apply fixes that may change a dtype or device; `diff`,
    write nothing and give the changes as a unified diff; `verify`, import each changed file's original and fixed
    code side by side and prove, before anything is written, that they compute the same in fp32 (and, in a
    transformers tree, that a tiny model saved by the original code loads with the fixed code to the same logits):
    a file that fails is left as it was, and its failure is reported. `verify` runs the code it fixes and needs
    torch; `verify_models` false leaves out the model level, which takes minutes per hundred architectures. A
    generated transformers file among `paths` brings its modular source and the parent models its findings come
    from, so that a regeneration keeps the fix. Every file is checked afresh (no result cache).

    Out: a `FixReport`: the findings fixed; those left after the fix, in the order of `check`, with an RPL904
    finding for each `# Copied from` copy that matched its source before a rewrite and does not now, and an RPL905
    finding for each definition of a generated transformers file that regeneration from its fixed modular source
    would not give back (the fix of its group is not written); the files a fix could not be applied to (left as they
    were), and counts; with `verify`, what was verified. Raises `RunError`.
    """
    from pathlib import Path

    from rope_lint.fix.apply import (
        drafted,
        regeneration_kept,
        with_converter_import_layout,
        with_drafts_finished,
        with_held_fix_written,
    )
    from rope_lint.fix.origins import release_caches
    from rope_lint.fix.write import remove_stale_temporaries, why_not_writable, writable_roots
    from rope_lint.output.fix_report import FixReport
    from rope_lint.transformers import generated
    from rope_lint.transformers.copies import diverged_by_fix

    if verify:
        _require_torch()
    config, settings, given = _resolved(paths, options or Options())
    settings.callers.resolves_table_reads = True  # the rope class fix is withheld where other code reads its tables
    with_origins, origin_roots = generated.with_origins(given, settings)
    # A link, or a file reached through a linked folder out of the paths given (or, for a transformers origin, out of
    # its package), is checked but never fixed, and said so: a fix writes nowhere it was not asked to.
    roots = [*writable_roots(paths or ["."]), *origin_roots]
    refused = {path: reason for path in with_origins if (reason := why_not_writable(path, roots))}
    files = [Path(path) for path in with_origins if path not in refused]
    if not diff:
        remove_stale_temporaries(files)
    # The fixed texts are held back: written once verified (with `verify`), and kept only where a transformers tree
    # still regenerates to them. Each process asks ruff about the files it rewrote at once, when it has taken its
    # last file (`with_drafts_finished`).
    finish = partial(with_drafts_finished, settings=settings, diff_only=diff, hold=True)
    outcomes = map_files(partial(drafted, settings=settings, unsafe=unsafe), files, finish=finish)
    outcomes = with_converter_import_layout(outcomes, diff_only=diff)
    release_caches()  # the map's and the layout's trees and origins are not read again: their memory goes to the checks
    verifications = None
    if verify:
        from rope_lint.verify.run import verified_outcomes

        outcomes, verifications = verified_outcomes(outcomes, write=not diff, models=verify_models)
    elif not diff:
        outcomes = [with_held_fix_written(o) if o.held is not None else o for o in outcomes]
    outcomes, regenerated = regeneration_kept(outcomes)
    originals = {Path(o.path): o.original for o in outcomes if o.original is not None}
    groups, diverged = diverged_by_fix(originals) if originals else (0, [])
    unfixed = [d for path in refused for d in check_file(path, settings)]
    remaining = sorted(
        [*(d for o in outcomes for d in o.remaining), *unfixed, *diverged, *regenerated], key=lambda d: d.sort_key
    )
    return FixReport(
        fixed=[d for o in outcomes for d in o.fixed],
        remaining=_without_ignored_errors(_with_origins_named(remaining), config),
        diff="".join(o.diff for o in outcomes),
        failures=[
            *((str(path), reason) for path, reason in refused.items()),
            *((o.path, o.error) for o in outcomes if o.error),
        ],
        files_changed=len(originals),
        copy_groups=groups,
        written=not diff,
        verifications=verifications,
    )


def _require_torch() -> None:
    """`fix --verify` runs the code it fixes, with torch; without it, a RunError that says how to get it."""
    try:
        import torch  # noqa: F401  (only checks that it can be imported)
    except (ImportError, OSError) as error:  # OSError: an install whose native libraries do not load
        raise RunError(
            f"fix --verify imports the code it fixes and needs torch ({error}): pip install 'rope-lint[probe]'"
        ) from error


def check_text(path: str, text: str, options: Options | None = None) -> list[Diagnostic]:
    """The findings in one file's text, given rather than read: an editor's buffer, the lines flake8 hands a plugin.

    In: the path the findings name, the text, and `options`, of which `select` and `ignore` choose the rules (every rule
    but the informational ones when they are None). No configuration file is read, so no per-file ignores apply.
    Out: the findings in order of position, suppression comments applied, with RPL902 for a text that does not parse
    and RPL903 for a rule that failed. Raises `RunError` for an unknown rule code.
    """
    options = options or Options()
    select = ("ALL",) if options.select is None else tuple(options.select)
    key = (select, tuple(options.ignore or ()), options.verbose)
    settings = _TEXT_SETTINGS.get(key)
    if settings is None:
        try:
            rules = select_rules(*key[:2])
        except UnknownCodeError as error:
            raise RunError(str(error)) from error
        settings = _TEXT_SETTINGS[key] = Settings(rules, root=os.getcwd(), verbose=options.verbose)
    return check_source(path, text, settings)


# Settings cost more to build than a small file costs to check; flake8 asks for every file with the same options.
_TEXT_SETTINGS: dict[tuple[tuple[str, ...], tuple[str, ...], bool], Settings] = {}


def _resolved(paths: Sequence[str], options: Options) -> tuple[Config, Settings, list[str]]:
    """The configuration and the engine's settings (`_configured`, from the first path), and the files to read."""
    resolve_afresh()  # a folder may have become a link since a run before this one in the process
    config, settings = _configured(_first(paths), options)
    return config, settings, list(discover(paths or ["."], Excludes(config.exclude, config.root), settings.listings))


def _configured(start: str, options: Options) -> tuple[Config, Settings]:
    """The configuration of `options.config`, else the one found from `start`, with the options in place of what
    they give; and the engine's settings from it."""
    try:
        config = load(start) if options.config is None else load_file(options.config)
        for key in ("select", "ignore", "exclude"):
            if getattr(options, key) is not None:
                setattr(config, key, getattr(options, key))
        settings = Settings.from_config(config, select_rules(config.select, config.ignore), verbose=options.verbose)
        for pattern, codes in config.per_file_ignores.items():
            try:
                validate_selectors(codes)  # a misspelt code would silence nothing, silently
            except UnknownCodeError as error:
                raise ConfigError(f"{config.source}: per-file-ignores.{pattern}: {error}") from error
    except (ConfigError, UnknownCodeError) as error:
        raise RunError(str(error)) from error
    return config, settings


def _first(paths: Sequence[str]) -> str:
    return paths[0] if paths else "."


def _result_cache(config: Config, settings: Settings, files: list[str], cache: bool) -> ResultCache | None:
    """The result cache of a run of many files where `cache` allows one, unless `verbose` asks for the tracebacks of a
    fresh run; the caller saves it."""
    if not cache or len(files) < LARGE_RUN or settings.verbose:
        return None
    from rope_lint.cache import ResultCache

    return ResultCache.for_run(config.root, settings.codes, config.per_file_ignores)


def _findings(
    config: Config, settings: Settings, files: list[str], results: ResultCache | None, show_progress: bool
) -> list[Diagnostic]:
    """Every file's findings, less the findings about the run that the configuration ignores; through the result
    cache `results`, where given."""
    findings = progress.run(files, partial(check_paths, settings=settings, cache=results), quiet=not show_progress)
    return _without_ignored_errors(findings, config)


def _without_ignored_errors(findings: list[Diagnostic], config: Config) -> list[Diagnostic]:
    """`findings` less the findings about the run itself that `ignore` names: rules are ignored before they run,
    these only after."""
    return [d for d in findings if d.code not in ERROR_CODES or not matches(d.code, config.ignore)]


def _repository_folder(path: str) -> str:
    """The folder git runs in for `diff_base`: the path's own, or the folder of the file it names."""
    return path if os.path.isdir(path) else os.path.dirname(os.path.realpath(path))
