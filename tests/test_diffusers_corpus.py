"""diffusers 0.42.1 as a development corpus outside transformers (issue 15).

The slow test runs `rope-lint fix --unsafe-fixes --verify` over a copy of diffusers' `models/`, as a user would on
their own checkout, and holds the run to its figures; the triage of every hunk the fix writes is kept in
tests/data/diffusers-0.42.1-fix-triage.tsv. The fast tests hold the shapes found there, in fixtures of our own: the
fixed code computes what the original computes in fp32, or rope-lint offers no fix.
"""

from __future__ import annotations

import csv
import difflib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path
from types import ModuleType

import pytest
import torch
from helpers import REPO, install_release

from rope_lint.engine import Settings, check_file
from rope_lint.output import fix_report
from rope_lint.rules import select_rules
from rope_lint.verify.changes import verify_changes
from rope_lint.verify.loading import load_sibling

# docs/measurements.md quotes these: `rope-lint fix --unsafe-fixes --verify diffusers/models` on diffusers 0.42.1.
VERIFIED = 17
COULD_NOT_BE_CHECKED = 15
FIXED = 58
REMAINING = 27
CHANGED_FILES = 17

TRIAGE = REPO / "tests" / "data" / "diffusers-0.42.1-fix-triage.tsv"
TRIAGE_COLUMNS = ["path", "line", "code_or_class", "what_the_fix_does", "verdict"]
VERDICTS = ("keeps behaviour", "changes behaviour", "unverifiable")


def _rope_lint(arguments: list[str], site: Path) -> subprocess.CompletedProcess[str]:
    """The command line in a fresh process from the repository root, with diffusers' dependencies importable from
    the site folder, which also holds a pristine diffusers: the copy being fixed must be what is verified."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO), str(site)])
    return subprocess.run(
        [sys.executable, "-m", "rope_lint", *arguments],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*.py"))}


@pytest.fixture(scope="module")
def fixed_copy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes], str, Path]:
    """A copy of diffusers fixed by `fix --unsafe-fixes --verify`: its folder, the original bytes of models/, the
    command's output, and the site folder."""
    site = install_release("diffusers", "0.42.1")
    copy = tmp_path_factory.mktemp("diffusers-0.42.1")
    shutil.copytree(site / "diffusers", copy / "diffusers", ignore=shutil.ignore_patterns("__pycache__"))
    models = copy / "diffusers" / "models"
    original = _tree(models)
    run = _rope_lint(["fix", "--unsafe-fixes", "--verify", str(models)], site)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return copy, original, run.stdout + run.stderr, site


@pytest.mark.slow
def test_fix_verify_on_diffusers_models_holds_to_its_figures(fixed_copy: tuple[Path, dict[str, bytes], str, Path]):
    copy, original, output, site = fixed_copy
    models = copy / "diffusers" / "models"
    summary = re.search(r"Verified (\d+), (\d+) failed, (\d+) could not be checked\.", output)
    assert summary is not None, output[-3000:]
    assert (int(summary[1]), int(summary[2]), int(summary[3])) == (VERIFIED, 0, COULD_NOT_BE_CHECKED)
    readme = (REPO / "README.md").read_text()
    assert f"| {VERIFIED} verified, 0 failed, {COULD_NOT_BE_CHECKED} could not be checked |" in readme
    # One line per class or function; each verified one was imported from the copy (its path is the copy's).
    assert len(re.findall(r"^\S+:\d+: .+ verified \(", output, re.MULTILINE)) == VERIFIED
    assert f"Fixed {FIXED} findings, {REMAINING} remaining." in output

    fixed = _tree(models)
    changed = sorted(name for name in original if fixed[name] != original[name])
    assert len(changed) == CHANGED_FILES
    for name in changed:
        compile(fixed[name], name, "exec", dont_inherit=True)

    # A second fix finds nothing to change.
    again = _rope_lint(["fix", "--unsafe-fixes", str(models)], site)
    assert f"Fixed 0 findings, {REMAINING} remaining." in again.stdout + again.stderr
    assert _tree(models) == fixed

    # The triage covers exactly the files the fix changes, every hunk of them.
    rows = _triage_rows()
    assert sorted({row["path"] for row in rows}) == sorted(f"diffusers/models/{name}" for name in changed)
    for name in changed:
        hunks = _hunk_starts(original[name], fixed[name])
        listed = sorted(int(row["line"]) for row in rows if row["path"] == f"diffusers/models/{name}")
        assert set(hunks) <= set(listed), f"{name}: hunks at {hunks}, triaged {listed}"


def _hunk_starts(before: bytes, after: bytes) -> list[int]:
    """The first original line (1-based) of each changed region."""
    matcher = difflib.SequenceMatcher(None, before.decode().splitlines(), after.decode().splitlines(), autojunk=False)
    return [first + 1 for tag, first, _, _, _ in matcher.get_opcodes() if tag != "equal"]


def _triage_rows() -> list[dict[str, str]]:
    with TRIAGE.open(newline="") as table:
        return list(csv.DictReader(table, delimiter="\t"))


def test_triage_rows_are_complete() -> None:
    rows = _triage_rows()
    assert rows
    for row in rows:
        assert list(row) == TRIAGE_COLUMNS
        assert all(row[column].strip() for column in TRIAGE_COLUMNS), row
        assert row["verdict"].startswith(VERDICTS), row
        assert row["line"].isdigit(), row
    # Every shape found to change behaviour is held by a fixture pair and a test of this module.
    unheld = [row for row in rows if row["verdict"].startswith("changes behaviour") and "fixture" not in row["verdict"]]
    assert not unheld


# The shapes found in diffusers, each in fixtures of our own.


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{path.parent.name}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pair(name: str) -> tuple[ModuleType, ModuleType]:
    return _load(REPO / "fixtures" / "hazards" / f"{name}.py"), _load(REPO / "fixtures" / "fixed" / f"{name}.py")


def _assert_same(got: torch.Tensor, expected: torch.Tensor) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape and got.device == expected.device
    assert torch.equal(got, expected)


def test_enumeration_whose_dtype_may_be_none_gets_no_fix() -> None:
    """A position helper whose `dtype` parameter defaults to None (diffusers 0.42.1, transformer_mochi.py:276,
    MochiRoPE._get_positions). `arange(dtype=None)` is int64 for integral bounds: the rewrite raised in
    `promote_types(None, ...)`, and no cast keeps both int64 and a floating dtype. Flagged with no fix."""
    hazard = REPO / "fixtures" / "hazards" / "enumeration_optional_dtype.py"
    lines = hazard.read_text().splitlines()
    settings = Settings(select_rules(["RPL101"], []), REPO)
    fixes = {_function_of(lines, d.start.line): d.fix for d in check_file(hazard, settings)}
    functions = ["def angle_steps", "def fixed_dtype_timeline", "def frame_grid", "def scaled_timeline", "def timeline"]
    assert sorted(fixes) == functions
    # A float32 default is no proof when a caller hands on a `dtype` of its own that may be None (timm 1.0.31,
    # pos_embed_sincos.py:966: `RotaryEmbeddingMixed` hands `dtype=None` on, and the rewrite raised in its constructor).
    assert [name for name, fix in fixes.items() if fix is not None] == ["def fixed_dtype_timeline"]
    original, fixed = _pair("enumeration_optional_dtype")
    for dtype in (None, torch.int64):
        _assert_same(fixed.timeline(300, dtype), original.timeline(300, dtype))
        _assert_same(fixed.scaled_timeline(300, 0.5, dtype), original.scaled_timeline(300, 0.5, dtype))
    _assert_same(fixed.frame_grid(300, 4, dtype=torch.float32), original.frame_grid(300, 4, dtype=torch.float32))
    _assert_same(fixed.LearnedAngles(64).steps.data, original.LearnedAngles(64).steps.data)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_enumeration_with_a_dtype_default_keeps_its_values(dtype: torch.dtype) -> None:
    original, fixed = _pair("enumeration_optional_dtype")
    _assert_same(fixed.fixed_dtype_timeline(4096, dtype), original.fixed_dtype_timeline(4096, dtype))
    _assert_same(fixed.fixed_dtype_timeline(4096), original.fixed_dtype_timeline(4096))


def _function_of(lines: list[str], number: int) -> str:
    """The name of the function whose body holds line `number` (1-based)."""
    return next(line for line in reversed(lines[:number]) if line.startswith("def ")).partition("(")[0]


def _helper_tables(module: ModuleType) -> list[torch.Tensor]:
    """Both classes of rotary_helper_tables, built where the caller is, called on CPU positions."""
    table = module.RopeAngleTable(64, 4096)
    axial = module.AxialRope((32, 32))
    rows, cols = torch.meshgrid(torch.arange(64.0), torch.arange(64.0), indexing="ij")
    with torch.no_grad():
        return [table(torch.arange(4096)), *axial(torch.stack([rows, cols]))]


def test_tables_from_helpers_keep_their_values_in_fp32() -> None:
    """Tables a module-level function or a method computes, registered as buffers (diffusers 0.42.1,
    transformer_kandinsky.py Kandinsky5RoPE1D/3D, transformer_kandinsky6*.py, transformer_helios.py
    HeliosRotaryPosEmbed): the same values in fp32."""
    original, fixed = _pair("rotary_helper_tables")
    for got, expected in zip(_helper_tables(fixed), _helper_tables(original), strict=True):
        _assert_same(got, expected)


def test_tables_from_helpers_land_where_the_originals_do_under_a_meta_context() -> None:
    """Built under `with torch.device("meta")`, as frameworks build models before loading weights: the original's
    buffers are on meta, and so must the fixed class's be, or a meta (accelerator) input meets a CPU table."""
    original, fixed = _pair("rotary_helper_tables")
    with torch.device("meta"):
        built = [(module.RopeAngleTable(64, 4096), module.AxialRope((32, 32))) for module in (original, fixed)]
    devices = [[buffer.device.type for part in pair for buffer in part.buffers()] for pair in built]
    assert devices[0] == ["meta"] * 3
    assert devices[1] == devices[0]


def test_verification_imports_the_tree_being_fixed_not_an_installed_copy(tmp_path: Path) -> None:
    """With an installed package of the same name importable (a site folder on PYTHONPATH), the sibling modules
    that `fix --verify` compares come from the tree being fixed; a package imported from elsewhere already is an
    error, never a silent comparison of another tree's code."""
    name = "rope_lint_corpus_probe"
    for folder, value in ((tmp_path / "site", "installed"), (tmp_path / "tree", "fixed tree")):
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text("")
        (folder / name / "helpers.py").write_text(f"WHERE = {value!r}\n")
    target = tmp_path / "tree" / name / "module.py"
    target.write_text("from .helpers import WHERE\n")
    saved_path = list(sys.path)
    # The tree is importable already, but after the installed copy.
    sys.path[:0] = [str(tmp_path / "site"), str(tmp_path / "tree")]
    try:
        module = load_sibling(target, target.read_text(), "__probe")
        assert module.WHERE == "fixed tree"
        for loaded in [key for key in sys.modules if key.startswith(name)]:
            del sys.modules[loaded]
        sys.modules[name] = types.ModuleType(name)
        sys.modules[name].__file__ = str(tmp_path / "site" / name / "__init__.py")
        with pytest.raises(ImportError, match="imported from"):
            load_sibling(target, target.read_text(), "__probe")
    finally:
        sys.path[:] = saved_path
        for loaded in [key for key in sys.modules if key.startswith(name)]:
            del sys.modules[loaded]


_GRID_HELPERS = '''import torch


class PatchGrid:
    """Not a rotary class: its methods are checked one by one."""

    def __init__(self, patch):
        self.patch = patch

    def coordinates(self, height: int, width: int, device_str):
        # Reads nothing of its instance: called as a function, with None for it.
        rows = torch.arange(height, dtype=torch.float32, device=torch.device(device_str))
        cols = torch.arange(width, dtype=torch.float32, device=torch.device(device_str))
        return torch.stack(torch.meshgrid(rows, cols, indexing="ij"))

    def strided(self, height: int):
        # Reads the instance: it cannot be called without one.
        return torch.arange(0, height, self.patch, dtype=torch.float32)
'''


def test_methods_that_read_nothing_of_their_instance_are_verified(tmp_path: Path) -> None:
    """diffusers keeps rotary helpers as methods of other classes (QwenEmbedRope.rope_params, HeliosRotaryPosEmbed.
    _get_spatial_meshgrid): those that never read `self` are called with None for it and compared."""
    path = tmp_path / "grid_helpers.py"
    path.write_text(_GRID_HELPERS)
    fixed = _GRID_HELPERS.replace(
        "torch.arange(height, dtype=torch.float32, device=torch.device(device_str))",
        "torch.arange(height, dtype=torch.int64, device=torch.device(device_str)).float()",
    )
    broken = fixed.replace(".float()\n", ".float() + 1\n", 1)
    saved_path = list(sys.path)
    try:
        found = {v.name: v for v in verify_changes([(path, _GRID_HELPERS, fixed)])}
        assert found["PatchGrid.coordinates"].status == fix_report.VERIFIED
        assert "device_str=device(type='cpu')" in found["PatchGrid.coordinates"].detail
        strided = fixed.replace("self.patch, dtype=torch.float32)", "self.patch, dtype=torch.float64).float()")
        found = {v.name: v for v in verify_changes([(path, _GRID_HELPERS, strided)])}
        assert found["PatchGrid.strided"].status == fix_report.NOT_CALLED
        assert "needs an instance" in found["PatchGrid.strided"].detail
        failed = {v.name: v for v in verify_changes([(path, _GRID_HELPERS, broken)])}
        assert failed["PatchGrid.coordinates"].status == fix_report.FAILED
    finally:
        sys.path[:] = saved_path
