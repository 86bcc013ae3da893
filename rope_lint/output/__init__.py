"""Output formats: one module each, with a `render(diagnostics) -> str`. Imported on use, so that the
formats a run does not ask for cost it nothing."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from rope_lint.diagnostics import Diagnostic

FORMATS = ("text", "concise", "json", "sarif", "github")


def renderer(output_format: str) -> Callable[[list[Diagnostic]], str]:
    return importlib.import_module(f"rope_lint.output.{output_format}").render
