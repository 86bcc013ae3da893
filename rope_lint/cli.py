"""The `rope-lint` command: check, fix, rules, rule, probe."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

from rope_lint import __version__
from rope_lint.config import Config, ConfigError, load
from rope_lint.diagnostics import ERROR_CODES, Diagnostic
from rope_lint.engine import Settings, check_paths, map_files
from rope_lint.files import Excludes, discover
from rope_lint.output import FORMATS, renderer, text
from rope_lint.rules import ALL_RULES, RULES_BY_CODE, UnknownCodeError, matches, select_rules

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except (ConfigError, UnknownCodeError) as error:
        print(f"rope-lint: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `rope-lint check | head`: the reader has what it wanted
        sys.stderr.close()
        return EXIT_CLEAN


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rope-lint", description="Find and fix numerical-precision hazards in PyTorch model code."
    )
    parser.add_argument("--version", action="version", version=f"rope-lint {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = commands.add_parser("check", help="report findings")
    _add_selection_arguments(check)
    check.add_argument("--output-format", choices=FORMATS, default="text")
    check.set_defaults(handler=_check)

    fix = commands.add_parser("fix", help="apply fixes in place")
    _add_selection_arguments(fix)
    fix.add_argument("--unsafe-fixes", action="store_true", help="also apply fixes that may change a dtype")
    fix.add_argument("--diff", action="store_true", help="print a unified diff instead of writing")
    fix.set_defaults(handler=_fix)

    rules = commands.add_parser("rules", help="list the rules")
    rules.set_defaults(handler=_rules)

    rule = commands.add_parser("rule", help="explain a rule")
    rule.add_argument("code", metavar="CODE")
    rule.set_defaults(handler=_rule)

    probe = commands.add_parser("probe", help="measure rotary embeddings at runtime (needs torch)")
    from rope_lint.probe.cli import add_arguments, run

    add_arguments(probe)
    probe.set_defaults(handler=run)
    return parser


def _add_selection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["."], metavar="PATH")
    parser.add_argument("--select", type=_codes, help="codes or prefixes to enable (comma-separated); default ALL")
    parser.add_argument("--ignore", type=_codes, help="codes or prefixes to disable (comma-separated)")
    parser.add_argument("--exclude", type=_codes, help="glob patterns of paths to skip (comma-separated)")


def _codes(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _resolve(args: argparse.Namespace) -> tuple[Config, Settings, list[Path]]:
    """Config from the nearest pyproject.toml, overridden by flags; and the files to look at."""
    config = load(Path(args.paths[0]))
    for key in ("select", "ignore", "exclude"):
        if getattr(args, key) is not None:
            setattr(config, key, getattr(args, key))
    settings = Settings.from_config(config, select_rules(config.select, config.ignore))
    files = list(discover(args.paths, Excludes(config.exclude, config.root)))
    return config, settings, files


def _reported(diagnostics: list[Diagnostic], config: Config) -> list[Diagnostic]:
    """Findings about the run itself can be ignored like any code."""
    return [d for d in diagnostics if d.code not in ERROR_CODES or not matches(d.code, config.ignore)]


def _exit_code(diagnostics: list[Diagnostic]) -> int:
    if any(d.code in ERROR_CODES for d in diagnostics):
        return EXIT_ERROR
    return EXIT_FINDINGS if diagnostics else EXIT_CLEAN


def _check(args: argparse.Namespace) -> int:
    config, settings, files = _resolve(args)
    diagnostics = _reported(check_paths(files, settings), config)
    sys.stdout.write(renderer(args.output_format)(diagnostics))
    if args.output_format == "text":
        print(text.summary(diagnostics))
    return _exit_code(diagnostics)


def _fix(args: argparse.Namespace) -> int:
    from rope_lint.fixes import fix_file

    config, settings, files = _resolve(args)
    outcomes = map_files(partial(fix_file, settings=settings, unsafe=args.unsafe_fixes, diff_only=args.diff), files)
    remaining: list[Diagnostic] = []
    for outcome in outcomes:
        sys.stdout.write(outcome.diff)
        if outcome.error:
            print(f"rope-lint: {outcome.path}: {outcome.error}", file=sys.stderr)
        remaining.extend(outcome.remaining)
    fixed_count = sum(len(outcome.fixed) for outcome in outcomes)
    remaining = _reported(sorted(remaining, key=lambda d: d.sort_key), config)
    sys.stdout.write(text.render(remaining))
    verb = "Would fix" if args.diff else "Fixed"
    print(f"{verb} {fixed_count} finding{'s' * (fixed_count != 1)}, {len(remaining)} remaining.")
    return _exit_code(remaining)


def _rules(args: argparse.Namespace) -> int:
    rows = [(rule.code, rule.name, rule.fixability, rule.summary()) for rule in ALL_RULES]
    widths = [max(len(row[i]) for row in [("CODE", "NAME", "FIX", ""), *rows]) for i in range(3)]
    for code, name, fix, summary in [("CODE", "NAME", "FIX", "SUMMARY"), *rows]:
        print(f"{code:<{widths[0]}}  {name:<{widths[1]}}  {fix:<{widths[2]}}  {summary}")
    return EXIT_CLEAN


def _rule(args: argparse.Namespace) -> int:
    rule = RULES_BY_CODE.get(args.code.upper())
    if rule is None:
        print(f"rope-lint: error: unknown rule code {args.code!r}; `rope-lint rules` lists them", file=sys.stderr)
        return EXIT_ERROR
    print(rule.documentation())
    return EXIT_CLEAN
