"""Shared by the probe's tests: running `rope-lint probe` in a fresh process, and pinned transformers releases
installed into their own folders of the git-ignored cache (never into the project's environment)."""

from __future__ import annotations

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
