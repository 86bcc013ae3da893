"""`fix` counts as fixed only the findings that the fixed text no longer has (issue 15, shape 6: it printed "Fixed 3
findings, 1 remaining" where 2 were fixed)."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest

from rope_lint import api, codemods
from rope_lint.output import fix_report
from rope_lint.rules.analysis.callers import PackageCallers

# Two rotary classes, each with a floating table buffer (RPL202, fixed by the rope codemod over the whole class).
TWO_ROTARY_CLASSES = """import torch
from torch import nn


class FirstRotary(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, x):
        return self.inv_freq.to(x.dtype)


class SecondRotary(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, x):
        return self.inv_freq.to(x.dtype)
"""


class _OnlyFirstClass(cst.CSTTransformer):
    """A codemod that reaches one class of two: the second class's findings stay."""

    def __init__(self, rewrite: cst.Module) -> None:
        self.rewritten = {node.name.value: node for node in rewrite.body if isinstance(node, cst.ClassDef)}

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        return self.rewritten[original_node.name.value] if original_node.name.value == "FirstRotary" else updated_node


@pytest.fixture
def partial_codemod(monkeypatch: pytest.MonkeyPatch):
    real = codemods.apply_codemods

    def first_class_only(
        module: cst.Module,
        names: list[str],
        filename: str | None = None,
        text: str | None = None,
        tree: ast.Module | None = None,
        package: PackageCallers | None = None,
    ) -> cst.Module:
        return module.visit(_OnlyFirstClass(real(module, names, filename, text, tree, package)))

    monkeypatch.setattr(codemods, "apply_codemods", first_class_only)


def test_a_finding_the_fix_leaves_is_not_counted_fixed(partial_codemod, tmp_path: Path) -> None:
    path = tmp_path / "rotary.py"
    path.write_text(TWO_ROTARY_CLASSES)
    before = api.check([str(path)], api.Options(select=["RPL202"])).findings
    assert len(before) == 2

    report = api.fix([str(path)], api.Options(select=["RPL202"]), unsafe=True)

    # The second class's registration, wherever the fix moved it (it adds the table function above the first class).
    [left] = report.remaining
    lines = path.read_text().splitlines()
    assert lines[left.start.line - 1].lstrip().startswith('self.register_buffer("inv_freq"')
    assert left.start.line > lines.index("class SecondRotary(nn.Module):")
    assert [d.code for d in report.fixed] == ["RPL202"]
    rendered = fix_report.render(report, statistics=True)
    assert rendered.splitlines()[-1] == "Fixed 1 finding, 1 remaining."
    assert "1  RPL202" in rendered


def test_every_finding_fixed_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "rotary.py"
    path.write_text(TWO_ROTARY_CLASSES)
    report = api.fix([str(path)], api.Options(select=["RPL202"]), unsafe=True)
    assert (len(report.fixed), len(report.remaining)) == (2, 0)
