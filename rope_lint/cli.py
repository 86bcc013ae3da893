"""The `rope-lint` command: check, fix, baseline, rules, rule, probe. It parses the arguments, asks the run layer
(`rope_lint.api`) for a report, writes what `rope_lint.output` renders of it, and turns it into an exit code
(`main`); `command.run` runs it as a process of its own."""

from __future__ import annotations

import argparse
import codecs
import contextlib
import os
import sys
from collections.abc import Callable, Iterator

from rope_lint import TYPE_CHECKING, __version__, api, rules
from rope_lint.diagnostics import ERROR_CODES, Diagnostic
from rope_lint.display import printable
from rope_lint.output import FORMATS, WITH_EDITS, renderer

if TYPE_CHECKING:
    from typing import Any, TextIO

# What `main`, and each command's handler (`_check`, `_fix`, ...), returns.
EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    """Run the command line `argv` (the process's own when None) and return its exit code: 0 clean, 1 findings, 2 an
    error of any kind, in one line on stderr (argparse's usage errors exit 2 through SystemExit)."""
    argv = sys.argv[1:] if argv is None else argv
    args = None
    try:
        _print_what_cannot_be_encoded(sys.stdout)
        if argv and argv[0] in _COMMANDS:
            args = _command_parser(argv[0]).parse_args(argv[1:])
        else:  # `rope-lint --help`, `--version`, or no command
            args = _parser().parse_args(argv)
        return args.handler(args)
    except api.RunError as error:
        print(f"rope-lint: error: {printable(str(error))}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `rope-lint check | head`: the reader has what it wanted
        sys.stderr.close()
        return EXIT_CLEAN
    except OSError as error:  # what reads the code reports its own errors: this is writing, to a full disk say
        report_os_error(error)
        return EXIT_ERROR
    except Exception as error:  # a bug: one line that says so, the traceback only when asked for
        if getattr(args, "verbose", False):
            import traceback

            traceback.print_exc()
        message = printable(f"{type(error).__name__}: {error}")
        hint = " (--verbose shows where)" if getattr(args, "verbose", True) is False else ""
        with contextlib.suppress(OSError, ValueError):
            print(f"rope-lint: internal error, please report: {message}{hint}", file=sys.stderr)
        return EXIT_ERROR


def _print_what_cannot_be_encoded(stream: object) -> None:
    """Have `stream` write what its encoding cannot hold as escapes (`\\u2248` for `≈` on an ASCII terminal) rather
    than fail, and a file name's bytes that are not UTF-8 as those bytes."""
    if getattr(stream, "errors", None) in ("strict", "surrogateescape") and hasattr(stream, "reconfigure"):
        stream.reconfigure(errors=_UNENCODABLE)


def _escape_or_restore(error: UnicodeError) -> tuple[bytes, int]:
    """The error handler `_print_what_cannot_be_encoded` installs: surrogateescape's bytes, else backslashreplace's."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    restored = [
        bytes([ord(char) - 0xDC00]) if 0xDC80 <= ord(char) <= 0xDCFF else char.encode("ascii", "backslashreplace")
        for char in error.object[error.start : error.end]
    ]
    return b"".join(restored), error.end


_UNENCODABLE = "rope-lint-escape"
codecs.register_error(_UNENCODABLE, _escape_or_restore)


def report_os_error(error: OSError) -> None:
    """An error of writing the output, in one line on stderr."""
    where = f"{printable(str(error.filename))}: " if error.filename else ""
    with contextlib.suppress(OSError, ValueError):  # stderr may be as full as stdout
        print(f"rope-lint: error: {where}{error.strerror or error}", file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    """The parser of the whole command line, every command's subparser in it."""
    parser = argparse.ArgumentParser(
        prog="rope-lint",
        description="Find and fix numerical-precision hazards in PyTorch model code.",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"rope-lint {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, build) in _COMMANDS.items():
        build(commands.add_parser(name, help=help_text, formatter_class=_HelpFormatter))
    return parser


def _command_parser(name: str) -> argparse.ArgumentParser:
    """One command's parser on its own, as `_parser` builds it for that command: building them all, or the
    top-level one, costs more than checking a file does."""
    parser = argparse.ArgumentParser(prog=f"rope-lint {name}", formatter_class=_HelpFormatter)
    _COMMANDS[name][1](parser)
    return parser


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's own, but for the terminal width, which it asks of `shutil`: importing that costs a one-file check
    5 ms, on every run, as argparse builds a formatter for each argument it adds."""

    def __init__(self, prog: str, **options: Any) -> None:
        if options.get("width") is None:
            try:
                options["width"] = int(os.environ.get("COLUMNS", "")) - 2
            except ValueError:
                try:
                    options["width"] = os.get_terminal_size(sys.__stdout__.fileno()).columns - 2
                except (AttributeError, ValueError, OSError):  # not a terminal
                    options["width"] = 78
        super().__init__(prog, **options)


def _check_arguments(check: argparse.ArgumentParser) -> None:
    _add_selection_arguments(check)
    check.add_argument(
        "--output-format", choices=FORMATS, help="default: full on a terminal, else (and in an --output-file) text"
    )
    check.add_argument("--statistics", action="store_true", help="print the number of findings per code instead")
    check.add_argument("--baseline", metavar="FILE", help="leave out the findings this baseline holds")
    check.add_argument("--diff-base", metavar="REF", help="report only findings on lines changed since a git ref")
    check.add_argument(
        "--stdin-filename",
        metavar="PATH",
        help="check the text on standard input as the file PATH (its configuration, its per-file ignores); "
        "PATH `-` alone reads it too",
    )
    check.add_argument(
        "--fix", action="store_true", help="apply the fixes: the same as `rope-lint fix`, with the flags they share"
    )
    check.add_argument(
        "--diff", action="store_true", help="print the fixes as a unified diff, write nothing: `fix --diff`"
    )
    check.add_argument(
        "--unsafe-fixes",
        action="store_true",
        help="with --fix or --diff, also apply fixes that may change a dtype; with --show-fixes, list them too",
    )
    check.add_argument(
        "--show-fixes",
        action="store_true",
        help="after the findings, list per file and code those that `rope-lint fix` would fix (with --fix: fixed)",
    )
    _add_report_arguments(check)
    _add_run_arguments(check)
    check.set_defaults(handler=_check, verify=False)


def _baseline_arguments(baseline: argparse.ArgumentParser) -> None:
    _add_selection_arguments(baseline)
    baseline.add_argument("-o", "--output", required=True, metavar="FILE")
    _add_run_arguments(baseline)
    baseline.set_defaults(handler=_baseline)


def _fix_arguments(fix: argparse.ArgumentParser) -> None:
    _add_selection_arguments(fix)
    fix.add_argument("--unsafe-fixes", action="store_true", help="also apply fixes that may change a dtype")
    fix.add_argument("--diff", action="store_true", help="print a unified diff instead of writing")
    fix.add_argument(
        "--verify",
        action="store_true",
        help="import the original and the fixed code side by side (needs torch; runs the code) and write no file "
        "whose rotary classes or changed functions compute otherwise in fp32 (one it cannot build or call is "
        "reported, and its file written); in a transformers tree, also a tiny model of each changed architecture; "
        "exits 1 only when a rewrite fails its proof",
    )
    fix.add_argument(
        "--statistics", action="store_true", help="also print the findings fixed per code, files changed, copy groups"
    )
    fix.add_argument("--show-fixes", action="store_true", help="also list per file and code the findings fixed")
    _add_report_arguments(fix)
    _add_quiet_argument(fix)
    fix.set_defaults(handler=_fix)


def _rule_arguments(rule: argparse.ArgumentParser) -> None:
    which = rule.add_mutually_exclusive_group(required=True)
    which.add_argument("code", metavar="CODE", nargs="?", help="the rule to explain")
    which.add_argument("--all", action="store_true", help="every rule, as docs/rules.md holds them")
    rule.set_defaults(handler=_rule)


def _probe_arguments(probe: argparse.ArgumentParser) -> None:
    from rope_lint.probe.cli import add_arguments, run

    add_arguments(probe)
    probe.set_defaults(handler=run)


def _add_selection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["."], metavar="PATH")
    parser.add_argument(
        "--select", type=_selected_codes, help="codes or prefixes to enable (comma-separated); default ALL"
    )
    parser.add_argument("--ignore", type=_comma_separated, help="codes or prefixes to disable (comma-separated)")
    parser.add_argument("--exclude", type=_comma_separated, help="glob patterns of paths to skip (comma-separated)")
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="read [tool.rope-lint] from this pyproject.toml-style file, not from the nearest pyproject.toml; "
        "its patterns are relative to the file's folder",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="print the traceback of a rule that fails, or of an internal error"
    )


def _add_report_arguments(parser: argparse.ArgumentParser) -> None:
    # The short forms are ruff's.
    parser.add_argument(
        "-e", "--exit-zero", action="store_true", help="exit 0 even when findings remain (errors still exit 2)"
    )
    parser.add_argument("-o", "--output-file", metavar="FILE", help="write the report to FILE instead of stdout")


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    _add_quiet_argument(parser)
    parser.add_argument("-n", "--no-cache", action="store_true", help="neither read nor write .rope_lint_cache/")


def _add_quiet_argument(parser: argparse.ArgumentParser) -> None:
    # ruff's: "Print diagnostics, but nothing else".
    parser.add_argument("-q", "--quiet", action="store_true", help="print the findings, no progress bar or summary")


def _comma_separated(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _selected_codes(value: str) -> list[str]:
    codes = _comma_separated(value)
    if not codes:  # `--select ""` would check nothing and report "All checks passed!"
        raise argparse.ArgumentTypeError("no code given: name codes or prefixes, or ALL")
    return codes


def _options(args: argparse.Namespace) -> api.Options:
    return api.Options(
        select=args.select, ignore=args.ignore, exclude=args.exclude, verbose=args.verbose, config=args.config
    )


def _exit_code(diagnostics: list[Diagnostic]) -> int:
    if any(d.code in ERROR_CODES for d in diagnostics):
        return EXIT_ERROR
    return EXIT_FINDINGS if diagnostics else EXIT_CLEAN


def _unless_exit_zero(code: int, args: argparse.Namespace) -> int:
    """`code`, but 0 for findings (1) with `--exit-zero`: an error stays 2."""
    return EXIT_CLEAN if args.exit_zero and code == EXIT_FINDINGS else code


@contextlib.contextmanager
def _report_stream(args: argparse.Namespace) -> Iterator[TextIO]:
    """Where the report goes: the file `--output-file` names, opened before the run, so that a path that cannot be
    written stops `fix` before it writes anything; else stdout. A run that fails leaves no report file it made."""
    if args.output_file is None:
        yield sys.stdout
        return
    made = not os.path.lexists(args.output_file)
    try:
        with open(args.output_file, "w", encoding="utf-8", errors=_UNENCODABLE) as stream:
            yield stream
    except BaseException:
        if made:
            with contextlib.suppress(OSError):
                os.unlink(args.output_file)
        raise


def _check(args: argparse.Namespace) -> int:
    standard_input = _reads_standard_input(args)
    if args.fix or args.diff:  # as in ruff: `check --fix` is `fix`, and `check --diff` is `fix --diff`
        if standard_input:
            raise api.RunError("--fix and --diff write files: they do not go with standard input")
        flag = _first_given(args, ("output_format", "baseline", "diff_base"))
        if flag is not None:
            raise api.RunError(f"{flag} does not go with --fix or --diff, which print the report of `rope-lint fix`")
        return _fix(args)
    if args.unsafe_fixes and not args.show_fixes:
        raise api.RunError("--unsafe-fixes goes with --fix, --diff or --show-fixes")
    if args.show_fixes and args.output_format not in (None, "full", "text"):  # the others are read by programs
        raise api.RunError(f"--show-fixes does not go with --output-format {args.output_format}, only full or text")
    # A person reads a terminal: code frames, in colour unless NO_COLOR is set (no-color.org). Programs read the rest.
    terminal = args.output_file is None and sys.stdout.isatty()
    output_format = "statistics" if args.statistics else args.output_format or ("full" if terminal else "text")
    edits = {"edits": output_format in WITH_EDITS, "edit_limit": WITH_EDITS.get(output_format)}
    with _report_stream(args) as stream:
        if standard_input:
            report = api.check_input(_standard_input(), args.stdin_filename, _options(args), **edits)
        else:
            report = api.check(
                args.paths,
                _options(args),
                baseline=args.baseline,
                diff_base=args.diff_base,
                cache=not args.no_cache,
                show_progress=not args.quiet,
                **edits,
            )
        colour = terminal and not os.environ.get("NO_COLOR")
        stream.write(renderer(output_format, colour=colour, quiet=args.quiet)(report))
        if args.show_fixes:
            from rope_lint.output.statistics import would_fix

            stream.write(would_fix(report.findings, unsafe=args.unsafe_fixes))
    return _unless_exit_zero(_exit_code(report.findings), args)


def _reads_standard_input(args: argparse.Namespace) -> bool:
    """Whether `check` reads the file from standard input, as ruff does: with `--stdin-filename`, or a PATH of `-`
    alone. A RunError where that goes with other paths, or with a flag that reads the file on disk."""
    named = getattr(args, "stdin_filename", None) is not None
    if "-" not in args.paths and not named:
        return False
    # `.` is the paths' default, when none is given.
    if not (args.paths == ["-"] or (named and args.paths == ["."])):
        raise api.RunError("standard input (`-`, --stdin-filename) goes without other paths; a file named `-` is `./-`")
    if args.handler is not _check:
        raise api.RunError("only `check` reads standard input (`-`); a file named `-` is `./-`")
    if args.stdin_filename == "":
        raise api.RunError("--stdin-filename names the file that standard input holds: it cannot be empty")
    flag = _first_given(args, ("baseline", "diff_base"))
    if flag is not None:
        raise api.RunError(f"{flag} reads the file on disk: it does not go with standard input")
    return True


def _first_given(args: argparse.Namespace, options: tuple[str, ...]) -> str | None:
    """The first of `options` (argparse's names for them) that the command line gives, spelled as typed
    (`--diff-base`); None where it gives none."""
    given = next((option for option in options if getattr(args, option) is not None), None)
    return None if given is None else "--" + given.replace("_", "-")


def _standard_input() -> bytes:
    """The bytes on standard input, up to the size a run reads of a file."""
    from rope_lint.files import SOURCE_LIMIT

    if sys.stdin is None:  # a process started without one
        raise api.RunError("there is no standard input to read")
    data = sys.stdin.buffer.read(SOURCE_LIMIT + 1)
    if len(data) > SOURCE_LIMIT:
        raise api.RunError(f"standard input is larger than the {SOURCE_LIMIT >> 20} MB a run reads of a file")
    return data


def _baseline(args: argparse.Namespace) -> int:
    from rope_lint.output import baseline_report

    _reads_standard_input(args)  # an error for `-`, which only `check` reads

    report = api.write_baseline(
        args.paths, args.output, _options(args), cache=not args.no_cache, show_progress=not args.quiet
    )
    if not args.quiet:
        sys.stderr.write(baseline_report.written(report))
    sys.stdout.write(baseline_report.render(report))
    # Findings about the run itself are never baselined: say so through the exit code too.
    return EXIT_ERROR if report.errors else EXIT_CLEAN


def _fix(args: argparse.Namespace) -> int:
    from rope_lint.output import fix_report

    _reads_standard_input(args)  # an error for `-`, which only `check` reads

    with _report_stream(args) as stream:
        report = api.fix(args.paths, _options(args), unsafe=args.unsafe_fixes, diff=args.diff, verify=args.verify)
        sys.stderr.write(fix_report.failures(report))
        stream.write(
            fix_report.render(report, statistics=args.statistics, show_fixes=args.show_fixes, quiet=args.quiet)
        )
    if not args.verify:
        code = _exit_code(report.remaining)
        # As ruff's `--diff`: changes shown exit 1, so that a CI step that prints them fails.
        if code == EXIT_CLEAN and report.diff:
            code = EXIT_FINDINGS
        return _unless_exit_zero(code, args)
    # With --verify the exit code is the proof's: 1 when a rewrite failed and was not written, never for the findings
    # that have no fix (they are printed all the same); 2, as always, for a run error or a diverged copy.
    if any(d.code in ERROR_CODES for d in report.remaining):
        return EXIT_ERROR
    return _unless_exit_zero(EXIT_FINDINGS if report.verification_failed else EXIT_CLEAN, args)


def _rules(args: argparse.Namespace) -> int:
    rows = [(rule.code, rule.name, rule.fix_summary(), rule.summary()) for rule in rules.ALL_RULES]
    widths = [max(len(row[i]) for row in [("CODE", "NAME", "FIX", ""), *rows]) for i in range(3)]
    for code, name, fix, summary in [("CODE", "NAME", "FIX", "SUMMARY"), *rows]:
        print(f"{code:<{widths[0]}}  {name:<{widths[1]}}  {fix:<{widths[2]}}  {summary}")
    return EXIT_CLEAN


def _rule(args: argparse.Namespace) -> int:
    if args.all:
        sys.stdout.write(rules.documentation_page())
        return EXIT_CLEAN
    rule = rules.RULES_BY_CODE.get(args.code.upper())  # every rule imported: only `rule` and `rules` ask
    if rule is None:
        print(f"rope-lint: error: unknown rule code {args.code!r}; `rope-lint rules` lists them", file=sys.stderr)
        return EXIT_ERROR
    print(rule.documentation())
    return EXIT_CLEAN


_COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "check": ("report findings", _check_arguments),
    "baseline": ("write the current findings to a baseline file", _baseline_arguments),
    "fix": ("apply fixes in place", _fix_arguments),
    "rules": ("list the rules", lambda parser: parser.set_defaults(handler=_rules)),
    "rule": ("explain a rule", _rule_arguments),
    "probe": ("measure rotary embeddings at runtime (needs torch)", _probe_arguments),
}
