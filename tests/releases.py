"""The acceptance command run once per test session on a copy of each pinned transformers release: the tests of the
whole tree (test_transformers_tree.py), of --verify (test_verify.py) and of the model level (test_verify_models.py)
all judge the same run, since each run of the newest release takes several minutes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from helpers import REPO, install_transformers, pypi_sdist

OLD, NEW = "4.37.2", "5.24.0"
# transformers' line length (its pyproject.toml), which the wheels do not carry: for the tests' own small trees.
TRANSFORMERS_RUFF = "[tool.ruff]\nline-length = 119\n"
ACCEPTANCE = ("fix", "--unsafe-fixes", "--verify", "--statistics")
# The triggers of the whole-package probes before and after the fix: the two that the fix answers; and what they
# measure besides: the run-time cost of each class (issue 19).
PROBE_TRIGGERS = "zero-init-bf16,to-bf16"
TREE_PROBE_OPTIONS = ("--runtime-cost",)
# The newest release's run verifies about 400 classes and 120 tiny models: well past helpers' 10 minutes.
ACCEPTANCE_TIMEOUT_S = 3600


@dataclass(frozen=True)
class AcceptanceRun:
    """`rope-lint fix --unsafe-fixes --verify --statistics <copy>/transformers` on a copy of a release."""

    version: str
    site: Path  # the release and its dependencies, installed
    original: Path  # the release's `transformers` package
    fixed: Path  # the copy, after the run
    returncode: int
    stdout: str
    stderr: str
    originals: dict[Path, str]  # each file the run changed (a path in `fixed`) and its original text

    @property
    def changed(self) -> tuple[str, ...]:
        """The changed files, relative to the package."""
        return tuple(path.relative_to(self.fixed).as_posix() for path in self.originals)


def run_cli(*args: str, pythonpath: list[Path], timeout: int = ACCEPTANCE_TIMEOUT_S) -> subprocess.CompletedProcess:
    """The command line in a fresh process, with this checkout first on the path and then `pythonpath` (never the
    project's environment's transformers)."""
    environment = dict(os.environ)
    paths = [str(REPO), *map(str, pythonpath), environment.get("PYTHONPATH", "")]
    environment["PYTHONPATH"] = os.pathsep.join(paths).rstrip(os.pathsep)
    return subprocess.run(
        [sys.executable, "-m", "rope_lint", *args],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def release_settings(version: str) -> str:
    """The pyproject.toml beside a release's package in its acceptance run: the newest release's own, from its source
    distribution (its ruff settings: line length, isort's sections, the rules its CI runs), so that the fix formats
    and sorts as transformers does; for the older release, its line length."""
    if version != NEW:
        return TRANSFORMERS_RUFF
    with tarfile.open(pypi_sdist("transformers", version)) as archive:
        [member] = [m for m in archive.getmembers() if m.name.count("/") == 1 and m.name.endswith("/pyproject.toml")]
        return archive.extractfile(member).read().decode()


def acceptance_run(version: str, destination: Path) -> AcceptanceRun:
    """Copy the release's package into `destination` with its ruff settings beside it (`release_settings`), and run
    the acceptance command on the copy with the release's dependencies importable."""
    site = install_transformers(version)
    original = site / "transformers"
    fixed = destination / "transformers"
    shutil.copytree(original, fixed, ignore=shutil.ignore_patterns("__pycache__"))
    (destination / "pyproject.toml").write_text(release_settings(version))
    result = run_cli(*ACCEPTANCE, str(fixed), pythonpath=[site])
    originals = {
        path: (original / path.relative_to(fixed)).read_text(encoding="utf-8")
        for path in sorted(fixed.rglob("*.py"))
        if path.read_bytes() != (original / path.relative_to(fixed)).read_bytes()
    }
    return AcceptanceRun(version, site, original, fixed, result.returncode, result.stdout, result.stderr, originals)
