"""Gating on new code only: a baseline that survives line shifts and counts duplicates, and `--diff-base`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from helpers import rope_lint

FLOAT_ARANGE = "t = torch.arange(4096, dtype=torch.float32)\n"
DIVISION = "inv = 1.0 / (10000 ** (torch.arange(0, 64, 2) / 64))\n"


def _codes_and_lines(stdout: str) -> list[tuple[str, int]]:
    return [(f["code"], f["start"]["line"]) for f in json.loads(stdout)]


def test_baseline_survives_lines_shifted_above_a_finding(tmp_path: Path) -> None:
    model = tmp_path / "pkg" / "model.py"
    model.parent.mkdir()
    model.write_text("import torch\n" + FLOAT_ARANGE)
    written = rope_lint("baseline", ".", "-o", "rope-lint-baseline.json", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert "Wrote 1 finding to rope-lint-baseline.json." in written.stderr
    [entry] = json.loads((tmp_path / "rope-lint-baseline.json").read_text())["findings"]
    assert entry == {"path": "pkg/model.py", "code": "RPL101", "snippet": entry["snippet"], "count": 1}

    # Lines added above the known finding, its whitespace changed, and a new finding below it.
    model.write_text("import torch\n\n\n# a comment\nx = 1\n" + FLOAT_ARANGE.replace(", ", ",  ") + DIVISION)
    result = rope_lint("check", "--baseline", "rope-lint-baseline.json", "--output-format", "json", ".", cwd=tmp_path)
    assert result.returncode == 1
    assert _codes_and_lines(result.stdout) == [("RPL103", 7)]

    # The same baseline from another working directory, with the file named absolutely.
    result = rope_lint("check", "--baseline", str(tmp_path / "rope-lint-baseline.json"), str(model), "--select", "RPL1")
    assert ":7:24: RPL103" in result.stdout
    assert "RPL101" not in result.stdout


def test_baseline_reads_a_findings_snippet_from_its_own_line_past_a_form_feed(tmp_path: Path) -> None:
    """A form feed is whitespace to Python and a line break to `str.splitlines`: the snippet is the finding's own code,
    so a change of the line above it leaves the finding known."""
    model = tmp_path / "model.py"
    model.write_text("import torch\n\x0c\nx = 1\n" + FLOAT_ARANGE)
    assert rope_lint("baseline", "model.py", "-o", "base.json", cwd=tmp_path).returncode == 0
    [entry] = json.loads((tmp_path / "base.json").read_text())["findings"]
    assert entry["snippet"] == "torch.arange(4096, dtype=torch.float32)"
    model.write_text("import torch\n\x0c\nx = 2\n" + FLOAT_ARANGE)
    result = rope_lint("check", "--baseline", "base.json", "--output-format", "json", "model.py", cwd=tmp_path)
    assert (result.returncode, _codes_and_lines(result.stdout)) == (0, [])


def test_baseline_counts_identical_findings(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import torch\n" + FLOAT_ARANGE)
    assert rope_lint("baseline", "a.py", "-o", "base.json", cwd=tmp_path).returncode == 0
    (tmp_path / "a.py").write_text("import torch\n" + FLOAT_ARANGE + "\n" + FLOAT_ARANGE)
    result = rope_lint("check", "--baseline", "base.json", "--output-format", "json", "a.py", cwd=tmp_path)
    assert _codes_and_lines(result.stdout) == [("RPL101", 4)]  # the first one is the known one


def test_baseline_all_known_passes_and_bad_baseline_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import torch\n" + FLOAT_ARANGE)
    rope_lint("baseline", ".", "-o", "base.json", cwd=tmp_path)
    result = rope_lint("check", "--baseline", "base.json", ".", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "All checks passed!\n")
    (tmp_path / "bad.json").write_text("[]")
    result = rope_lint("check", "--baseline", "bad.json", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert "not a rope-lint baseline" in result.stderr
    assert rope_lint("check", "--baseline", "missing.json", ".", cwd=tmp_path).returncode == 2


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd, check=True, capture_output=True
    )


def test_diff_base_reports_only_changed_lines(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "old.py").write_text("import torch\n" + FLOAT_ARANGE + "x = 1\n")
    (tmp_path / "same.py").write_text("import torch\n" + DIVISION)
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "base")
    # A new finding on a changed line, an old one moved down by an added line; an untracked file; a staged edit.
    (tmp_path / "old.py").write_text("import torch\n# moved\n" + FLOAT_ARANGE + "y = torch.arange(0.0, 8.0, 2.0)\n")
    (tmp_path / "new.py").write_text("import torch\n" + DIVISION)
    (tmp_path / "same.py").write_text("import torch\n" + DIVISION.replace("64))", "64))  # staged"))
    _git(tmp_path, "add", "same.py")

    result = rope_lint("check", "--diff-base", "main", "--output-format", "json", ".", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    found = [(f["path"], f["code"], f["start"]["line"]) for f in json.loads(result.stdout)]
    assert found == [("new.py", "RPL103", 2), ("old.py", "RPL102", 4), ("same.py", "RPL103", 2)]

    # Without changes since HEAD there is nothing to report; a file named alone is compared the same way.
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "more")
    assert rope_lint("check", "--diff-base", "HEAD", ".", cwd=tmp_path).returncode == 0
    assert rope_lint("check", "--diff-base", "HEAD~1", "old.py", cwd=tmp_path).returncode == 1

    # File names git writes with a trailing tab (a space) or in C quotes (a quote, a non-ASCII letter).
    names = ("a b.py", 'q"uote é.py')
    for name in names:
        (tmp_path / name).write_text("import torch\nx = 1\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "names")
    for name in names:
        (tmp_path / name).write_text("import torch\nx = 1\n" + FLOAT_ARANGE)
    result = rope_lint("check", "--diff-base", "HEAD", "--output-format", "json", ".", cwd=tmp_path)
    assert sorted(f["path"] for f in json.loads(result.stdout)) == sorted(names)


def test_diff_base_outside_a_repository_or_with_a_bad_ref_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import torch\n" + FLOAT_ARANGE)
    outside = rope_lint("check", "--diff-base", "main", ".", cwd=tmp_path)
    assert outside.returncode == 2 and "rope-lint: error:" in outside.stderr
    _git(tmp_path, "init", "-q")
    bad_ref = rope_lint("check", "--diff-base", "no-such-ref", ".", cwd=tmp_path)
    assert bad_ref.returncode == 2 and "no-such-ref" in bad_ref.stderr


def test_baseline_never_holds_a_file_that_does_not_parse(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("import torch\nt = torch.arange(8, dtype=torch.float32\n")
    written = rope_lint("baseline", ".", "-o", "base.json", cwd=tmp_path)
    assert written.returncode == 2
    assert written.stdout.startswith("bad.py:2:")
    assert json.loads((tmp_path / "base.json").read_text())["findings"] == []
    assert rope_lint("check", "--baseline", "base.json", ".", cwd=tmp_path).returncode == 2
