"""`rope-lint probe`: arguments and entry point. Imports nothing heavy until `run()`, so that torch stays optional."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rope_lint.display import printable
from rope_lint.probe import TRIGGER_NAMES
from rope_lint.probe.sizes import DEFAULT_BUDGET, format_size, parse_size

INSTALL_HINT = "rope-lint probe needs torch: pip install 'rope-lint[probe]' (tested with the torch==2.13.0 CPU build)"
EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def _trigger_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in TRIGGER_NAMES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown trigger {', '.join(map(repr, unknown)) or repr(text)}; choose from {', '.join(TRIGGER_NAMES)}"
        )
    return names


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return value


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the probe's arguments to `parser` (the `probe` subcommand's parser)."""
    parser.description = (
        "Import the named code, build every rotary-embedding class under each precision trigger, and compare "
        "its cos/sin tables with a float64 CPU reference. Runs model code: name only code you trust."
    )
    parser.epilog = (
        "Each class gets a status. clean: measured under every trigger that can run here, within the threshold "
        "under each. exceeds: measured, and over the threshold under at least one trigger. unbuilt: nothing "
        "measured: it could not be constructed, its forward could not be called or returned nothing readable as "
        "positions x frequencies in plain float32, it has no float64 reference, or it would need more than "
        "--max-memory. failed: built in float32, but it raised or returned no readable table under some trigger. "
        "Unbuilt and failed classes are unmeasured. Exit status: 0 when every class is clean; 1 when a class "
        "exceeds, a class is unmeasured (unless --allow-unmeasured), or no class is measured at all; 2 for a "
        "usage error, or when the --compare side cannot be probed. With --compare, the status is the after side's."
    )
    parser.add_argument(
        "targets",
        nargs="+",
        metavar="TARGET",
        help="package or module (transformers, transformers.models.llama.modeling_llama), file path, "
        "or path.py:ClassName",
    )
    parser.add_argument(
        "--trigger",
        dest="triggers",
        action="append",
        type=_trigger_list,
        metavar="NAME[,NAME...]",
        help=f"trigger to run, repeatable or comma-separated (default: all): {', '.join(TRIGGER_NAMES)}",
    )
    parser.add_argument(
        "--positions",
        type=_positive_int,
        default=4096,
        help="positions 0..N-1 to compare; also the max_position_embeddings the classes are built with "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--threshold",
        type=_positive_float,
        default=4e-3,
        help="error above which a cos/sin element is wrong (default: %(default)s, about one bf16 rounding of values "
        "up to 1; scaled by |value| for values above 1)",
    )
    parser.add_argument(
        "--max-memory",
        type=_size,
        default=DEFAULT_BUDGET,
        metavar="SIZE",
        help="the most the tensors of one class's build and forward may take, such as 2GB, 512MB or bytes "
        f"(default: {format_size(DEFAULT_BUDGET)}); estimated from runs at 128 and 256 positions before the full "
        "size runs, and a class over it is unbuilt. A run of many classes probes up to four at once, one per core, "
        "each within it",
    )
    parser.add_argument(
        "--allow-unmeasured",
        action="store_true",
        help="unbuilt and failed classes are reported and counted but do not make the exit status 1",
    )
    parser.add_argument(
        "--runtime-cost",
        action="store_true",
        help="also measure what each measured class costs at run time: the cross-device copies of a steady-state "
        "forward after .to('meta') (standing in for an accelerator), and whether torch.compile(fullgraph=True) "
        "traces its forward, with the graph breaks (about 0.5 s a class)",
    )
    parser.add_argument(
        "--output-format",
        choices=("table", "json", "markdown"),
        default="table",
        help="table: for a terminal; json: for programs; markdown: a GitHub table per class (rows: conditions; "
        "columns: max error, first wrong position, share wrong, result), then the summary, for a pull request "
        "(default: table)",
    )
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="BEFORE_DIR",
        help="also probe the TARGETs as they were, in BEFORE_DIR: a copy of the tree they live in from before the "
        "change (a checkout of the base branch, an unpacked release), and show before and after side by side. "
        "A TARGET that is a path is taken relative to the current folder and read at the same relative path under "
        "BEFORE_DIR (a path outside the current folder is an error); a module or package TARGET is imported with "
        "BEFORE_DIR first on the import path. The before side runs in a process of its own. Classes are matched by "
        "module and class name; one found on one side only is shown absent on the other. Every output format shows "
        "both sides; the exit status is the after side's. A BEFORE_DIR that is not a folder, or a TARGET that names "
        "nothing in it, is a usage error",
    )
    parser.add_argument(
        "--plot",
        type=Path,
        metavar="DIR",
        help="also write figures into DIR (made if missing): per class, <module.Class>.png, its largest cos error "
        "at each position under each trigger, on a log scale; and summary.png, a classes x triggers heat map of the "
        "max error (cos or sin). With --compare, each figure has a panel for before and one for after. Needs "
        "matplotlib: pip install 'rope-lint[plot]'",
    )


def _terminal_progress(index: int, total: int | None, name: str) -> None:
    # Overwrites one line; the final newline is written once the run is done. No total while classes are being found.
    sys.stderr.write(f"\r\x1b[Kprobing {index}/{'?' if total is None else total} {name}")
    sys.stderr.flush()


def _folder_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with --compare's or --plot's folder, checked before any probing; None when nothing is."""
    if args.compare is not None and not args.compare.is_dir():
        return f"--compare {args.compare}: {'not a folder' if args.compare.exists() else 'no such folder'}"
    if args.plot is not None and args.plot.exists() and not args.plot.is_dir():
        return f"--plot {args.plot}: not a folder"
    return None


def run(args: argparse.Namespace) -> int:
    """Run the probe; exit code 0 clean, 1 for a finding, an unmeasured class or nothing measured (see the epilog),
    2 on usage errors."""
    problem = _folder_problem(args)
    if problem is not None:
        print(f"rope-lint probe: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if args.plot is not None:
        from rope_lint.probe.plot import missing_matplotlib

        if hint := missing_matplotlib():
            print(hint, file=sys.stderr)
            return EXIT_USAGE
    try:
        import torch  # noqa: F401  (only checks that the optional extra is installed)
    except ImportError:
        print(INSTALL_HINT, file=sys.stderr)
        return EXIT_USAGE
    from rope_lint.probe.compare import BeforeSideError, probe_compared
    from rope_lint.probe.discover import TargetError
    from rope_lint.probe.runner import probe

    trigger_names = list(dict.fromkeys(name for names in args.triggers or [list(TRIGGER_NAMES)] for name in names))
    show_progress = sys.stderr.isatty()
    options = {
        "trigger_names": trigger_names,
        "positions": args.positions,
        "threshold": args.threshold,
        "progress": _terminal_progress if show_progress else None,
        "budget": args.max_memory,
        "runtime": args.runtime_cost,
        "curves": args.plot is not None,
    }
    try:
        if args.compare is not None:
            comparison = probe_compared(args.compare, args.targets, **options)
            report, sides = comparison.after, [("before", comparison.before), ("after", comparison.after)]
        else:
            report = probe(args.targets, **options)
            comparison, sides = None, [("", report)]
    except (TargetError, BeforeSideError) as error:
        print(f"rope-lint probe: error: {printable(str(error))}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if show_progress:
            sys.stderr.write("\r\x1b[K")
    if not report.classes:
        for failure in report.import_failures:
            # The reason is the imported code's exception: one line, whatever it says.
            print(f"rope-lint probe: {printable(failure.module)}: {printable(failure.reason)}", file=sys.stderr)
        print("rope-lint probe: error: no rotary-embedding classes found in the targets", file=sys.stderr)
        return EXIT_FINDINGS
    shown = comparison or report
    if args.output_format == "json":
        print(json.dumps(shown.to_json(), indent=2))
    elif args.output_format == "markdown":
        from rope_lint.probe.markdown import render_markdown

        print(render_markdown(sides))
    else:
        print(shown.render_table())
    if args.plot is not None:
        from rope_lint.probe.plot import write_figures

        try:
            written = write_figures(args.plot, sides)
        except OSError as error:
            print(f"rope-lint probe: error: --plot {args.plot}: {printable(str(error))}", file=sys.stderr)
            return EXIT_USAGE
        print(f"rope-lint probe: wrote {len(written)} figures to {args.plot}", file=sys.stderr)
    unmeasured = sum(not result.measured for result in report.classes)
    if unmeasured == len(report.classes):
        print(
            f"rope-lint probe: error: none of the {len(report.classes)} rotary-embedding classes was measured",
            file=sys.stderr,
        )
        return EXIT_FINDINGS
    if unmeasured and not args.allow_unmeasured:
        print(
            f"rope-lint probe: {unmeasured} of {len(report.classes)} classes unmeasured (unbuilt or failed); "
            "--allow-unmeasured makes that a warning",
            file=sys.stderr,
        )
        return EXIT_FINDINGS
    return EXIT_FINDINGS if report.exceeds else EXIT_CLEAN
