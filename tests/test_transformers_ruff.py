"""transformers' own ruff, at the version its 5.24.0 release pins and with the settings of its source distribution's
pyproject.toml (the acceptance run's, `releases.release_settings`), passes `format --check` and `check` on every file
the acceptance run changed (issue 18). The pinned ruff comes from PyPI into the git-ignored cache; a failed download
fails the test."""

from __future__ import annotations

import subprocess

import pytest
from helpers import install_release
from releases import NEW, AcceptanceRun
from test_transformers_tree import FIGURES

# transformers 5.24.0's `setup.py` pins `ruff==0.14.10` for its own style checks.
PINNED_RUFF = "0.14.10"


@pytest.mark.slow
@pytest.mark.parametrize("command", [("format", "--check"), ("check",)])
def test_transformers_pinned_ruff_passes_every_file_the_fix_changed(
    new_acceptance: AcceptanceRun, command: tuple[str, ...]
) -> None:
    ruff = install_release("ruff", PINNED_RUFF) / "bin" / "ruff"
    settings = new_acceptance.fixed.parent / "pyproject.toml"
    files = [str(new_acceptance.fixed / name) for name in new_acceptance.changed]
    assert len(files) == FIGURES[NEW]["files changed"]
    result = subprocess.run(
        [str(ruff), *command, "--config", str(settings), *files], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
