"""The `rope-lint` command's process (`python -m rope_lint` too): `cli.main` in a process set up for it, which an API
user's process never is. It is the entry point, so that its setup comes before the rest of rope-lint is imported."""

from __future__ import annotations

import contextlib
import gc
import os
import sys

# The cycle collector's thresholds for the command (`gc.set_threshold`; Python's defaults are 700, 10, 10).
COLLECTOR_THRESHOLDS = (100_000, 50, 1000)


def run() -> None:
    """The `rope-lint` command itself: `main`, then an exit that skips the interpreter's teardown. Freeing every
    module and object at exit takes about 15 ms, longer than ruff's whole check of a file; mypy exits the same
    way. Output is flushed first, and everything rope-lint writes to a file is closed before `main` returns."""
    # rope-lint makes millions of small objects (syntax trees, LibCST's nodes) that reference counting frees and that
    # form few cycles: at the default thresholds the cycle collector scanned them again and again, a quarter of the fix
    # of a whole tree. It still runs, a hundred times less often. Set before rope-lint's own imports, which it made
    # about 1 ms longer, a sixtieth of a warm check.
    gc.set_threshold(*COLLECTOR_THRESHOLDS)
    from rope_lint.cli import EXIT_ERROR, main, report_os_error

    try:
        code = main()
    except SystemExit as error:  # argparse's --help, --version and usage errors, after printing
        if not isinstance(error.code, int | None):
            raise
        code = error.code or 0
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):  # a reader that left (`rope-lint check | head`), a stream `main` closed
        pass
    except OSError as error:
        report_os_error(error)
        code = EXIT_ERROR
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(code)
