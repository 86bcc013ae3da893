"""`bench/warm_floor.py`, the floor under the warm check's target: it must do the work a warm check cannot avoid, on
the same files, or its figure says nothing."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from rope_lint import api
from rope_lint.cache import FOLDER
from rope_lint.engine import LARGE_RUN
from rope_lint.files import Excludes, discover

REPO = Path(__file__).resolve().parents[1]


def warm_floor() -> ModuleType:
    """The bench script, loaded as a module."""
    spec = importlib.util.spec_from_file_location("warm_floor", REPO / "bench" / "warm_floor.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def package(root: Path) -> Path:
    """A package whose `models/` subpackage is the tree checked, with files around it, a hidden folder and bytecode."""
    top = root / "lib"
    for folder in ("", "models", "models/a", "models/b/c", "utils", "models/.hidden", "models/a/__pycache__"):
        (top / folder).mkdir(parents=True, exist_ok=True)
        (top / folder / "__init__.py").write_text("")
    for index in range(LARGE_RUN):
        (top / "models" / ("a" if index % 2 else "b/c") / f"m_{index:02}.py").write_text(f"X = {index}\n")
    (top / "models" / "a" / "stub.pyi").write_text("X: int\n")
    (top / "models" / "notes.txt").write_text("not Python\n")
    (top / "utils" / "helpers.py").write_text("def helper():\n    return 1\n")
    (root / "pyproject.toml").write_text("[tool.rope-lint]\n")
    return top


def test_the_floor_walks_the_files_the_check_walks_and_the_rest_of_the_package(tmp_path: Path) -> None:
    floor, top = warm_floor(), package(tmp_path)
    models = str(top / "models")
    assert floor.python_files(models) == list(discover([models], Excludes([], models)))
    assert floor.package_top(models) == str(top)
    rest = floor.python_files(str(top), skipped=models)
    assert sorted(rest) == sorted(
        set(discover([str(top)], Excludes([], str(top)))) - set(discover([models], Excludes([], models)))
    )
    assert len(rest) == 3  # lib/, lib/utils/: two __init__.py and helpers.py


def test_the_floor_finds_every_file_unchanged_in_the_cache_of_a_warm_check(
    tmp_path: Path, settled_files: None, capsys: pytest.CaptureFixture[str]
) -> None:
    models = package(tmp_path) / "models"
    api.check([str(models)])
    (cache_file,) = (tmp_path / FOLDER).glob("check-*.json")
    warm_floor().main(str(models), str(cache_file))
    count = len(list(discover([str(models)], Excludes([], str(models)))))
    assert count > LARGE_RUN
    assert capsys.readouterr().out == f"{count} files, {count} unchanged in the cache; 3 other files in the package\n"
