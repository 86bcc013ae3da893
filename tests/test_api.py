"""The run layer's API (`rope_lint.api`), called as a script or another tool calls it: the findings, edits, fixes,
baselines and errors that the command line prints come from it, so they must agree with what `rope-lint` prints."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import REPO, rope_lint

from rope_lint import api
from rope_lint.output.json import as_dict

HAZARDS = REPO / "fixtures" / "hazards"
FIXED = REPO / "fixtures" / "fixed"
# The fixed twins are formatted with these settings (see test_fixtures.py).
RUFF_SETTINGS = "[tool.ruff]\nline-length = 120\n"
FLOAT_ARANGE = "import torch\nt = torch.arange(4096, dtype=torch.float32)\n"  # RPL101, safe fix
DIVISION = "import torch\ninv = 1.0 / (10000 ** (torch.arange(0, 64, 2) / 64))\n"  # RPL103


@pytest.fixture
def in_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    """Findings name paths as given: run where the command line runs, so that both name them alike."""
    monkeypatch.chdir(REPO)


def _hazards_copy(folder: Path) -> Path:
    shutil.copytree(HAZARDS, folder / "hazards")
    (folder / "pyproject.toml").write_text(RUFF_SETTINGS)
    return folder / "hazards"


@pytest.mark.usefixtures("in_repository")
def test_check_gives_the_findings_the_command_line_prints() -> None:
    report = api.check(["fixtures/hazards"])
    printed = json.loads(rope_lint("check", "--output-format", "json", "fixtures/hazards", cwd=REPO).stdout)
    assert [as_dict(d) for d in report.findings] == printed
    assert len(printed) > 40  # every hazard fixture flags several lines
    assert report.edits is None
    assert report.errors == []


@pytest.mark.usefixtures("in_repository")
def test_options_choose_rules_as_the_flags_do() -> None:
    only = api.check(["fixtures/hazards"], api.Options(select=["RPL1"], ignore=["RPL103"]))
    codes = {d.code for d in only.findings}
    assert codes == {"RPL101", "RPL102", "RPL105"}
    printed = json.loads(
        rope_lint(
            "check", "--output-format", "json", "--select", "RPL1", "--ignore", "RPL103", "fixtures/hazards", cwd=REPO
        ).stdout
    )
    assert [as_dict(d) for d in only.findings] == printed


@pytest.mark.usefixtures("in_repository")
def test_each_edit_is_the_sarif_fix_and_removes_its_own_finding() -> None:
    report = api.check(["fixtures/hazards"], edits=True)
    assert report.edits is not None and len(report.edits) == len(report.findings)
    sarif = json.loads(rope_lint("check", "--output-format", "sarif", "fixtures/hazards", cwd=REPO).stdout)
    results = sarif["runs"][0]["results"]
    assert len(results) == len(report.findings)
    edited = 0
    for finding, edit, result in zip(report.findings, report.edits, results, strict=True):
        if finding.fix is None:
            assert edit == [] and "fixes" not in result
            continue
        [change] = result["fixes"][0]["artifactChanges"]
        assert [(r.offset, r.length, r.text) for r in edit] == [
            (r["deletedRegion"]["charOffset"], r["deletedRegion"]["charLength"], r["insertedContent"]["text"])
            for r in change["replacements"]
        ]
        # Applied alone to the file, the edit leaves fewer findings of its code (a codemod's may fix its neighbours).
        text = Path(finding.path).read_text(encoding="utf-8")
        for replacement in sorted(edit, reverse=True):
            text = text[: replacement.offset] + replacement.text + text[replacement.offset + replacement.length :]
        before = [d.code for d in report.findings if d.path == finding.path].count(finding.code)
        after = [d.code for d in api.check_text(finding.path, text)].count(finding.code)
        assert after < before, finding
        edited += 1
    assert edited == sum(1 for d in report.findings if d.fix is not None) > 40


def test_fix_writes_the_fixed_twins_and_reports_what_the_command_line_prints(tmp_path: Path) -> None:
    by_api = _hazards_copy(tmp_path / "api")
    by_command = _hazards_copy(tmp_path / "command")
    report = api.fix([str(by_api)], unsafe=True)
    printed = rope_lint("fix", "--unsafe-fixes", str(by_command)).stdout
    names = sorted(path.name for path in HAZARDS.glob("*.py"))
    for name in names:
        assert (by_api / name).read_text() == (FIXED / name).read_text() == (by_command / name).read_text()
    assert report.written and report.diff == "" and report.failures == []
    assert report.files_changed == sum((HAZARDS / name).read_text() != (FIXED / name).read_text() for name in names)
    assert printed.splitlines()[-1] == f"Fixed {len(report.fixed)} findings, {len(report.remaining)} remaining."
    # What is left is what no fix covers, in both.
    assert all(d.fix is None for d in report.remaining)
    assert len(report.fixed) == sum(1 for d in api.check([str(HAZARDS)]).findings if d.fix is not None)


def test_fix_with_diff_writes_nothing_and_gives_the_diff(tmp_path: Path) -> None:
    hazards = _hazards_copy(tmp_path)
    report = api.fix([str(hazards)], diff=True)
    assert not report.written and report.files_changed == 0
    for path in HAZARDS.glob("*.py"):
        assert (hazards / path.name).read_text() == path.read_text()
    printed = rope_lint("fix", "--diff", str(hazards)).stdout
    assert report.diff.startswith("--- a/") and printed.startswith(report.diff)
    assert printed.splitlines()[-1].startswith(f"Would fix {len(report.fixed)} findings,")
    # Only safe fixes without `unsafe`.
    assert {d.fix.safety.value for d in report.fixed} == {"safe"}


def test_baseline_written_then_read_leaves_only_new_findings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(FLOAT_ARANGE)
    written = api.write_baseline(["a.py"], "base.json")
    assert (written.path, written.written, written.errors) == ("base.json", 1, [])
    assert [d.code for d in api.check(["a.py"]).findings] == ["RPL101"]
    assert api.check(["a.py"], baseline="base.json").findings == []
    (tmp_path / "a.py").write_text(FLOAT_ARANGE + DIVISION)
    assert [d.code for d in api.check(["a.py"], baseline="base.json").findings] == ["RPL103"]


@pytest.mark.parametrize(
    ("arguments", "flags"),
    [
        ({"options": api.Options(select=["XYZ9"])}, ["--select", "XYZ9"]),
        ({"baseline": "missing.json"}, ["--baseline", "missing.json"]),
        ({"baseline": "not-a-baseline.json"}, ["--baseline", "not-a-baseline.json"]),
        ({"diff_base": "HEAD"}, ["--diff-base", "HEAD"]),  # the temporary folder is no git repository
    ],
)
def test_a_check_that_cannot_be_made_raises_run_error_with_the_message_the_command_line_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arguments: dict, flags: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(FLOAT_ARANGE)
    (tmp_path / "not-a-baseline.json").write_text("[]")
    with pytest.raises(api.RunError) as raised:
        api.check(["."], **arguments)
    printed = rope_lint("check", *flags, ".", cwd=tmp_path)
    assert (printed.returncode, printed.stdout) == (2, "")
    assert printed.stderr == f"rope-lint: error: {raised.value}\n"


def test_check_text_raises_run_error_for_an_unknown_code() -> None:
    with pytest.raises(api.RunError, match="unknown rule code or prefix: 'NOPE'"):
        api.check_text("a.py", FLOAT_ARANGE, api.Options(ignore=["NOPE"]))


def test_a_bad_configuration_is_a_run_error(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.rope-lint]\nselekt = ["RPL1"]\n')
    (tmp_path / "a.py").write_text(FLOAT_ARANGE)
    with pytest.raises(api.RunError, match="unknown key 'selekt'"):
        api.check([str(tmp_path)])
    with pytest.raises(api.RunError, match="unknown key 'selekt'"):
        api.fix([str(tmp_path)])


@pytest.mark.usefixtures("in_repository")
def test_check_text_finds_in_a_text_what_check_finds_in_the_file() -> None:
    for path in sorted(HAZARDS.glob("*.py")):
        shown = str(path.relative_to(REPO))
        found = api.check_text(shown, path.read_text(encoding="utf-8"))
        assert found == api.check([shown]).findings
        assert found
    assert [d.code for d in api.check_text("t.py", "import torch\nt = torch.arange(8, dtype=torch.float32\n")] == [
        "RPL902"
    ]
