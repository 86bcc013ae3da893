"""What several test modules share: running the CLI, and pinned releases from PyPI in a git-ignored cache."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "rope-lint-tests"


def rope_lint(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed command line the way a user does, in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "rope_lint", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def pypi_wheel(package: str, version: str) -> Path:
    """A release's wheel, downloaded once into the cache. A failed download fails the test: never a skip."""
    folder = CACHE / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    pattern = f"{package.replace('-', '_')}-{version}-*.whl"
    found = sorted(folder.glob(pattern))
    if not found:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--quiet",
                f"{package}=={version}",
                "-d",
                str(folder),
            ],
            capture_output=True,
            text=True,
        )
        found = sorted(folder.glob(pattern))
        if result.returncode != 0 or not found:
            pytest.fail(f"could not download {package}=={version} from PyPI: {result.stderr.strip()[-500:]}")
    return found[0]


def unpacked_wheel(package: str, version: str) -> Path:
    """The wheel's files, unpacked once; returns the folder that holds the top-level package."""
    target = CACHE / "unpacked" / f"{package}-{version}"
    marker = target / ".complete"
    if not marker.exists():
        with zipfile.ZipFile(pypi_wheel(package, version)) as wheel:
            wheel.extractall(target)
        marker.touch()
    return target
