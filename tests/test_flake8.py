"""The flake8 plugin, through flake8 itself: the installed `flake8.extension` entry point gives the RPL codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import REPO, rope_lint

FIXTURE = REPO / "fixtures" / "hazards" / "rotary_cache.py"


def _flake8(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    # --isolated: no user or project flake8 configuration changes what the test sees.
    return subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_flake8_reports_what_rope_lint_check_reports() -> None:
    result = _flake8("--select", "RPL", "--format", "%(row)d %(col)d %(code)s", str(FIXTURE))
    assert result.returncode == 1, result.stderr
    expected = json.loads(rope_lint("check", "--output-format", "json", str(FIXTURE)).stdout)
    found = result.stdout.splitlines()
    assert found == [f"{f['start']['line']} {f['start']['column']} {f['code']}" for f in expected]
    assert len(found) >= 3


def test_rpl_codes_are_on_by_default_and_flake8_selects_and_suppresses(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "import torch\n"
        "t = torch.arange(4096, dtype=torch.float32)\n"
        "u = torch.arange(4096, dtype=torch.float32)  # noqa: RPL101\n"
        "v = torch.arange(4096, dtype=torch.float32)  # rope-lint: ignore[RPL101]\n"
        "inv = 1.0 / (10000 ** (torch.arange(0, 64, 2) / 64))\n"
    )
    default = _flake8("a.py", cwd=tmp_path).stdout.splitlines()
    assert [line.split(": ")[1].split()[0] for line in default] == ["RPL101", "RPL103"]
    assert default[0].startswith("a.py:2:5: RPL101 `torch.arange` enumerates positions")
    assert _flake8("--extend-ignore", "RPL1", "a.py", cwd=tmp_path).returncode == 0
    only = _flake8("--select", "RPL103", "a.py", cwd=tmp_path).stdout
    assert only.startswith("a.py:5:24: RPL103 ") and only.count("\n") == 1


def test_unparsable_file_is_flake8s_e999(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("import torch\nt = torch.arange(8, dtype=torch.float32\n")
    codes = [line.split(": ")[1].split()[0] for line in _flake8("bad.py", cwd=tmp_path).stdout.splitlines()]
    assert codes == ["E999"]
