"""A flake8 plugin, so that flake8 users get the RPL codes (registered as `RPL` under `flake8.extension`).

Every rule runs; flake8's own `--select`, `--extend-ignore`, `per-file-ignores` and `# noqa` choose among the
codes, and our `# rope-lint: ignore[...]` comments apply as in `rope-lint check`. Findings about the run itself
(RPL9xx) are left to flake8, which reports a file it cannot parse as E999. A failure of rope-lint itself is one
RPL903 finding on the file's first line, never an exception: flake8 would abort the whole run over it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from rope_lint import __version__, api
from rope_lint.diagnostics import ERROR_CODES, INTERNAL_ERROR
from rope_lint.display import printable


class Plugin:
    name = "rope-lint"
    version = __version__

    # flake8 passes the parameters a plugin names: `tree` marks this as a tree plugin, `lines` gives the text.
    def __init__(self, tree: ast.AST, filename: str, lines: list[str]) -> None:
        self.filename = filename
        self.source = "".join(lines)

    def run(self) -> Iterator[tuple[int, int, str, type[Plugin]]]:
        try:
            diagnostics = api.check_text(self.filename, self.source)
        except Exception as error:  # a bug of ours, or a RunError: flake8 reports it as one line, and goes on
            message = printable(f"{type(error).__name__}: {error}")
            yield 1, 0, f"{INTERNAL_ERROR} rope-lint internal error, please report: {message}", Plugin
            return
        for diagnostic in diagnostics:
            if diagnostic.code not in ERROR_CODES:
                message = printable(diagnostic.message)
                yield diagnostic.start.line, diagnostic.start.column, f"{diagnostic.code} {message}", Plugin
