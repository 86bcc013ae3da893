"""The pre-commit hooks for real: pre-commit from PyPI installs this project into its own environment and runs
`rope-lint` and `rope-lint-fix` on a temporary repository.

Each temporary repository's `.pre-commit-config.yaml` names a snapshot of this checkout as it is (untracked files
included) at its commit, as a user's configuration names a release: the test covers the working tree whether or not
the changes are committed yet, and pre-commit builds the hooks' environment once for the module's runs (`try-repo`
built it again for each run, in a store it deletes).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

HAZARD = "import torch\nt = torch.arange(4096, dtype=torch.float32)\n"


def _git(cwd: Path, *args: str) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", *args]
    return subprocess.run(command, cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def hooks_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    snapshot = tmp_path_factory.mktemp("rope-lint-snapshot")
    for name in _git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0"):
        source = REPO / name
        if name and source.is_file():  # tracked files deleted in the working tree are left out
            (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, snapshot / name)
    _git(snapshot, "init", "-q")
    _git(snapshot, "add", ".")
    _git(snapshot, "commit", "-q", "-m", "snapshot")
    return snapshot


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One hook environment for the module's runs: pre-commit builds it once per repository and commit."""
    return tmp_path_factory.mktemp("pre-commit-home")


def _run_hook(hooks_repo: Path, home: Path, target: Path, hook: str) -> subprocess.CompletedProcess[str]:
    """`pre-commit run HOOK --all-files` in the repository `target`, configured with the snapshot's hook."""
    revision = _git(hooks_repo, "rev-parse", "HEAD").strip()
    config = f"repos:\n- repo: {hooks_repo}\n  rev: {revision}\n  hooks:\n  - id: {hook}\n"
    (target / ".pre-commit-config.yaml").write_text(config)
    _git(target, "add", ".pre-commit-config.yaml")  # pre-commit refuses a configuration that is not staged
    environment = {**os.environ, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never"}
    environment.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", hook, "--all-files"],
        cwd=target,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_check_hook_fails_and_passes_after_the_fix_hook(
    hooks_repo: Path, pre_commit_home: Path, tmp_path: Path
) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / "model.py").write_text(HAZARD)
    _git(tmp_path, "add", ".")

    check = _run_hook(hooks_repo, pre_commit_home, tmp_path, "rope-lint")
    assert check.returncode == 1, check.stdout + check.stderr
    assert "model.py:2:5: RPL101 [*]" in check.stdout

    fix = _run_hook(hooks_repo, pre_commit_home, tmp_path, "rope-lint-fix")
    assert fix.returncode == 1, fix.stdout + fix.stderr  # pre-commit fails a hook that changed files
    assert "files were modified by this hook" in fix.stdout
    assert (tmp_path / "model.py").read_text() == HAZARD.replace("torch.float32)", "torch.int64).float()")

    _git(tmp_path, "add", ".")
    again = _run_hook(hooks_repo, pre_commit_home, tmp_path, "rope-lint")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Passed" in again.stdout


def test_hook_environment_never_pulls_torch(hooks_repo: Path) -> None:
    """What pip installs into a hook environment: the package and libcst, never torch (a CUDA build is gigabytes).

    Asked of pip, what it would install: the hook environment the other tests build is theirs, in whatever order.
    """
    report = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-", "."],
        cwd=hooks_repo,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert report.returncode == 0, report.stderr
    names = {item["metadata"]["name"].lower() for item in json.loads(report.stdout)["install"]}
    assert {"rope-lint", "libcst"} <= names
    assert not {name for name in names if name == "torch" or name.startswith("nvidia")}


@pytest.mark.parametrize("hook", ["rope-lint", "rope-lint-fix"])
def test_hooks_pass_with_no_python_file(hooks_repo: Path, pre_commit_home: Path, tmp_path: Path, hook: str) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / "README.md").write_text("no Python here\n")
    _git(tmp_path, "add", ".")
    result = _run_hook(hooks_repo, pre_commit_home, tmp_path, hook)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(no files to check)Skipped" in result.stdout
