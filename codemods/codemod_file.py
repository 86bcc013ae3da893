"""The file that a codemod rewrites, whole or a run of its statements."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

from rope_lint.rules.analysis.callers import PackageCallers
from rope_lint.transformers import generated


@dataclass(frozen=True)
class CodemodFile:
    """The file of which a codemod rewrites the module, or a run of its statements: its path, and its whole text and
    that text's syntax tree, where rope-lint has them (`apply_codemods`), else its text is read from its path; and
    what the rest of its package does with its names, the run's where rope-lint has it."""

    path: str | None = None
    given_text: str | None = None
    given_tree: ast.Module | None = None
    given_package: PackageCallers | None = None

    @functools.cached_property
    def package(self) -> PackageCallers:
        return self.given_package or PackageCallers()

    @functools.cached_property
    def text(self) -> str | None:
        if self.given_text is not None:
            return self.given_text
        if not self.path:
            return None
        try:
            return Path(self.path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    @functools.cached_property
    def tree(self) -> ast.Module | None:
        """The syntax tree of `text`: the one given with it, else parsed; None where there is no text, or it does not
        parse."""
        if self.given_tree is not None and self.given_text is not None:
            return self.given_tree
        return generated.parsed_text(self.text) if self.text is not None else None
