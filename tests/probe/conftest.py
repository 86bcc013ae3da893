"""Shared by the probe's tests: running `rope-lint probe` in a fresh process, and pinned transformers releases
installed into their own folders of the git-ignored cache (never into the project's environment)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures" / "probe"
CACHE = REPO / ".cache" / "rope-lint-tests"


@dataclass(frozen=True)
class ProbeRun:
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        return json.loads(self.stdout)


def _environment(pythonpath: Sequence[Path]) -> dict[str, str]:
    environment = dict(os.environ)
    # The repository first, so that this checkout's rope_lint is the one that runs.
    paths = [str(REPO), *map(str, pythonpath)]
    environment["PYTHONPATH"] = os.pathsep.join([*paths, environment.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return environment


def run_python(code: str, *args: str, pythonpath: Sequence[Path] = (), stderr: Any = None) -> ProbeRun:
    """`python -c code args...` in a fresh process from the repository root."""
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        env=_environment(pythonpath),
        stdout=subprocess.PIPE,
        stderr=stderr if stderr is not None else subprocess.PIPE,
        text=True,
        timeout=600,
    )
    return ProbeRun(result.returncode, result.stdout, result.stderr or "")


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


def install_transformers(version: str) -> Path:
    """transformers==version and its dependencies, installed once into a folder of their own (never torch, which
    comes from the project's environment). A failed install fails the test: never a skip."""
    target = CACHE / f"site-transformers-{version}"
    marker = target / ".installed"
    if marker.exists():
        return target
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-input", "--disable-pip-version-check"]
    result = subprocess.run(
        [*pip, "--target", str(partial), f"transformers=={version}"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if result.returncode != 0:
        pytest.fail(f"could not install transformers=={version} from PyPI: {result.stderr.strip()[-1500:]}")
    if (partial / "torch").exists():
        pytest.fail(f"installing transformers=={version} pulled torch into {partial}; the tests use the project's")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    marker.touch()
    return target


@pytest.fixture(scope="session")
def probe_fixtures() -> Path:
    """fixtures/probe: our own rotary classes and the toymodels package."""
    return FIXTURES


@pytest.fixture(scope="session")
def python_code() -> Callable[..., ProbeRun]:
    """Runs `python -c CODE ARGS` in a fresh process (see run_python)."""
    return run_python


@pytest.fixture(scope="session")
def transformers_release() -> Callable[[str], Path]:
    """Installs a pinned transformers release into its own cache folder and returns that folder."""
    return install_transformers
