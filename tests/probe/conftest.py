"""Shared by the probe's tests: running `rope-lint probe` in a fresh process, pinned transformers releases
installed into their own folders of the git-ignored cache (never into the project's environment), and small trees
of the fixture classes for --compare."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, ProbeRun, install_transformers, run_python

FIXTURES = REPO / "fixtures" / "probe"


ProbeRunner = Callable[..., ProbeRun]


@pytest.fixture(scope="session")
def probe_cli() -> ProbeRunner:
    """Runs `python -m rope_lint probe ARGS`; `blocked` names modules to make unimportable first."""

    def run(*args: str, pythonpath: Sequence[Path] = (), blocked: Sequence[str] = (), stderr: Any = None) -> ProbeRun:
        code = (
            "import sys\n"
            f"for name in {list(blocked)!r}:\n"
            "    sys.modules[name] = None  # makes `import name` raise ImportError\n"
            "from rope_lint.cli import main\n"
            "sys.exit(main(['probe', *sys.argv[1:]]))\n"
        )
        return run_python(code, *args, pythonpath=pythonpath, stderr=stderr)

    return run


@pytest.fixture(scope="session")
def probe_fixtures() -> Path:
    """fixtures/probe: our own rotary classes and the toymodels package."""
    return FIXTURES


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch, probe_fixtures: Path) -> None:
    """Runs the test from the repository root, where TARGETs such as fixtures/probe/rotary_classes.py resolve."""
    monkeypatch.chdir(probe_fixtures.parents[1])


@pytest.fixture(scope="session")
def python_code() -> Callable[..., ProbeRun]:
    """Runs `python -c CODE ARGS` in a fresh process (see run_python)."""
    return run_python


@pytest.fixture(scope="session")
def transformers_release() -> Callable[[str], Path]:
    """Installs a pinned transformers release into its own cache folder and returns that folder."""
    return install_transformers


def _class_source(name: str, new_name: str) -> str:
    text = (FIXTURES / "rotary_classes.py").read_text()
    [node] = [node for node in ast.parse(text).body if isinstance(node, ast.ClassDef) and node.name == name]
    return ast.get_source_segment(text, node).replace(f"class {name}(", f"class {new_name}(", 1)


def _write_module(path: Path, classes: dict[str, str]) -> None:
    """A module of fixture classes under new names (new name -> fixture class)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    parts = ["import torch", "from torch import nn"]
    parts += [_class_source(name, new_name) for new_name, name in classes.items()]
    path.write_text("\n\n\n".join(parts) + "\n")


@pytest.fixture(scope="session")
def fixture_module() -> Callable[[Path, dict[str, str]], None]:
    """Writes a module of fixture classes (rotary_classes.py's) under new names: (path, {new name: fixture class})."""
    return _write_module


@pytest.fixture
def compare_trees(tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """tmp/before and tmp/after, each with <module>.py, the test standing in tmp/after; returns the module's name.

    Before, `RotaryEmbedding` is the legacy fixture class (wrong from position 257 under zero.Init) and
    `OldRotaryEmbedding` exists only there; after, `RotaryEmbedding` is the safe class and `NewRotaryEmbedding`
    exists only there. The after side runs in the test's process, so the module is named after the test: a module
    name is imported once per process."""
    module = re.sub(r"\W", "_", request.node.name)
    _write_module(
        tmp_path / "before" / f"{module}.py",
        {"RotaryEmbedding": "LegacyRotaryEmbedding", "OldRotaryEmbedding": "BufferedRotaryEmbedding"},
    )
    _write_module(
        tmp_path / "after" / f"{module}.py",
        {"RotaryEmbedding": "SafeRotaryEmbedding", "NewRotaryEmbedding": "SafeRotaryEmbedding"},
    )
    monkeypatch.chdir(tmp_path / "after")
    return module
