"""`FileContext.qualified_name` resolves a name through the file's imports as Python scopes it: a parameter of the
function or lambda that reads it shadows the import (unsloth's tiled upscaler takes `torch` as an argument, and
`check` offered a fix for its `torch.arange` that `fix` could not write)."""

from __future__ import annotations

import ast

import pytest

from rope_lint.rules.analysis.context import FileContext

SOURCE = """import torch


def takes_torch(n, torch):
    return torch.arange(n)  # 1


def defaults_to_it(n, dtype=torch.float32):  # 2: a default is read outside the function
    return torch.arange(n, dtype=dtype)  # 3


def outer(torch):
    def inner(n):
        return torch.arange(n)  # 4: the closure reads outer's parameter

    return inner


scaled = lambda torch, n: torch.arange(n)  # 5
plain = lambda n: torch.arange(n)  # 6


def own_import(n):
    import torch

    return torch.arange(n)  # 7
"""


def _resolved_torch_names(source: str) -> list[str | None]:
    """What each `torch.<attribute>` of the source resolves to, in the order of the numbered comments."""
    ctx = FileContext("names.py", source, ast.parse(source), ("arange", "torch"))
    attributes = sorted(
        (node for node in ast.walk(ctx.tree) if isinstance(node, ast.Attribute) and ast.unparse(node.value) == "torch"),
        key=lambda node: (node.lineno, node.col_offset),
    )
    return [ctx.qualified_name(node) for node in attributes]


def test_a_parameter_shadows_the_import_and_a_default_does_not() -> None:
    assert _resolved_torch_names(SOURCE) == [
        None,  # 1
        "torch.float32",  # 2
        "torch.arange",  # 3
        None,  # 4
        None,  # 5
        "torch.arange",  # 6
        "torch.arange",  # 7
    ]


@pytest.mark.parametrize("parameter", ["torch", "*torch", "**torch", "*, torch", "torch, /"])
def test_every_kind_of_parameter_shadows(parameter: str) -> None:
    source = f"import torch\n\n\ndef f({parameter}):\n    return torch.arange(4)\n"
    assert _resolved_torch_names(source) == [None]
