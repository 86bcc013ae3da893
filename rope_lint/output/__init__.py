"""Output formats. Each module renders a list of findings; `FORMATS` maps `--output-format` to them."""

from __future__ import annotations

from collections.abc import Callable

from rope_lint.diagnostics import Diagnostic
from rope_lint.output import json, text

FORMATS: dict[str, Callable[[list[Diagnostic]], str]] = {"text": text.render, "json": json.render}
