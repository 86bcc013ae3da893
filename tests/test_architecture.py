"""The package's shape: imports run one way, from the command line down through the stages, and an install adds no
top-level name but `rope_lint`."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import REPO

# Top to bottom. A module may import from its own layer or a lower one, never from a higher one.
LAYERS: tuple[tuple[str, ...], ...] = (
    # entry points: arguments in, text out
    ("rope_lint.command", "rope_lint.cli", "rope_lint.__main__", "rope_lint.flake8_plugin"),
    ("rope_lint.api",),  # the run layer: paths and settings in, reports out
    ("rope_lint.verify",),  # fix --verify: the original and the fixed code side by side
    ("rope_lint.output", "rope_lint.probe"),  # rendering; running model code
    ("rope_lint.fix", "rope_lint.codemods"),  # LibCST edits, formatting, the atomic write
    ("rope_lint.transformers",),  # copy groups and generated files of a transformers tree
    ("rope_lint.engine", "rope_lint.cache", "rope_lint.baseline", "rope_lint.gitdiff", "rope_lint.progress"),
    ("rope_lint.rules",),  # the rules and their shared analyses
    ("rope_lint.prefilter",),  # bytes in, the parts worth parsing out
    (
        "rope_lint",
        "rope_lint.config",
        "rope_lint.files",
        "rope_lint.diagnostics",
        "rope_lint.suppressions",
        "rope_lint.ruff",
    ),
)
# Where each package's source lies in the repository (the codemods install as `rope_lint.codemods`).
SOURCES = {"rope_lint": REPO / "rope_lint", "rope_lint.codemods": REPO / "codemods"}


def module_files() -> dict[str, Path]:
    found = {}
    for package, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            if package == "rope_lint" and name.startswith("rope_lint.codemods"):
                continue
            found[name] = path
    return found


def layer_of(module: str) -> int:
    """The index of the most specific layer entry that names the module or a package above it."""
    best, depth = None, -1
    for index, entries in enumerate(LAYERS):
        for entry in entries:
            if (module == entry or module.startswith(entry + ".")) and entry.count(".") > depth:
                best, depth = index, entry.count(".")
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best


def imported_modules(module: str, path: Path) -> set[str]:
    """The rope_lint modules that `module` imports, at its top, inside functions or under TYPE_CHECKING."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join([*base, node.module] if node.module else base)
            else:
                origin = node.module or ""
            imported.add(origin)
            imported.update(f"{origin}.{alias.name}" for alias in node.names)
    modules = module_files()
    return {name for name in imported if name in modules and name != module}


def test_every_module_is_in_a_layer() -> None:
    for module in module_files():
        layer_of(module)


def test_no_module_imports_from_a_layer_above_it() -> None:
    upward = []
    for module, path in sorted(module_files().items()):
        for target in sorted(imported_modules(module, path)):
            if layer_of(target) < layer_of(module):
                upward.append(f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})")
    assert not upward, "\n".join(upward)


def test_the_layer_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The walk finds imports in every form the package uses, so the test above can fail."""
    path = tmp_path / "x.py"
    path.write_text(
        "from rope_lint import engine\n"
        "def f():\n"
        "    from rope_lint.fix.apply import apply_fixes\n"
        "    import rope_lint.cli\n"
        "    from ..output import text\n"
    )
    found = imported_modules("rope_lint.rules.x", path)
    assert {"rope_lint.engine", "rope_lint.fix.apply", "rope_lint.cli"} <= found
    assert "rope_lint.output.text" not in found or layer_of("rope_lint.output.text") < layer_of("rope_lint.rules.x")


@pytest.fixture(scope="module")
def wheel_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """rope-lint's wheel, as `pip install .` builds it, and pip's verbose output: the build backend's warnings."""
    folder = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", folder, REPO]
    result = subprocess.run(command, capture_output=True, text=True, cwd=folder)
    assert result.returncode == 0, result.stderr[-2000:]
    return next(folder.glob("rope_lint-*.whl")), result.stdout + result.stderr


@pytest.fixture(scope="module")
def wheel(wheel_build: tuple[Path, str]) -> Path:
    return wheel_build[0]


def test_the_build_uses_no_deprecated_metadata(wheel_build: tuple[Path, str]) -> None:
    """setuptools warns of metadata that it will stop building (a license as a table, from 2027-02-18): the license
    is an SPDX expression, written to the wheel's metadata as one."""
    wheel, log = wheel_build
    warnings = [line for line in log.splitlines() if "Warning" in line and "deprecated" in line.lower()]
    assert warnings == []
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA")))
    assert "License-Expression: Apache-2.0" in metadata.decode().splitlines()


def test_an_install_adds_only_rope_lint(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"rope_lint"}
    # Every package of the source is in it, the codemods among them.
    packages = {name.rsplit("/", 1)[0].replace("/", ".") for name in names if name.endswith("/__init__.py")}
    expected = {module for module, path in module_files().items() if path.name == "__init__.py"}
    assert packages == expected
    assert "rope_lint/codemods/rope_tables.py" in names
