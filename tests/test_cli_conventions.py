"""The flags ruff users reach for: `check --fix`, `--exit-zero`, `--config`, `--show-fixes`, `--output-file`, ruff's
short forms of them (`-e`, `-o`, `-q`, `-n`, `-v`), and standard input (`check -`, `--stdin-filename`)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import on_a_terminal, rope_lint

from rope_lint.cli import main

FLOAT_ARANGE = "import torch\nt = torch.arange(4096, dtype=torch.float32)\n"  # RPL101, safe fix
BF16_ARANGE = "import torch\nt = torch.arange(4096, dtype=torch.bfloat16)\n"  # RPL101, unsafe fix
DIVISION = "import torch\ninv = 1.0 / (10000 ** (torch.arange(0, 64, 2) / 64))\n"  # RPL103, safe fix
LOGSUMEXP = "import torch\ny = torch.log(torch.sum(torch.exp(x)))\n"  # RPL302, no fix
SYNTAX_ERROR = "import torch\nt = torch.arange(8, dtype=torch.float32\n"  # RPL902


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    for name, text in {"a.py": FLOAT_ARANGE, "b.py": BF16_ARANGE, "c.py": DIVISION, "d.py": LOGSUMEXP}.items():
        (folder / name).write_text(text)
    return folder


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    return line


def _found(result: subprocess.CompletedProcess[str]) -> list[str]:
    """Where each finding of a concise output is, and its code."""
    return [line[: line.index(": ") + len(": RPL101")] for line in result.stdout.splitlines()]


@pytest.mark.parametrize("flags", [[], ["--unsafe-fixes"], ["--diff"], ["--show-fixes", "--statistics"]])
def test_check_fix_is_fix(project: Path, flags: list[str]) -> None:
    twin = project.with_name("twin")
    shutil.copytree(project, twin)
    by_check = rope_lint("check", "--fix", *flags, ".", cwd=project)
    by_fix = rope_lint("fix", *flags, ".", cwd=twin)
    assert (by_check.returncode, by_check.stdout, by_check.stderr) == (by_fix.returncode, by_fix.stdout, by_fix.stderr)
    assert by_check.returncode == 1  # the RPL302 finding has no fix
    assert {p.name: p.read_text() for p in project.iterdir()} == {p.name: p.read_text() for p in twin.iterdir()}
    changed = (project / "a.py").read_text() != FLOAT_ARANGE
    assert changed is ("--diff" not in flags)


def test_check_diff_is_fix_diff_and_writes_nothing(project: Path) -> None:
    result = rope_lint("check", "--diff", ".", cwd=project)
    assert result.stdout == rope_lint("fix", "--diff", ".", cwd=project).stdout
    assert "+t = torch.arange(4096, dtype=torch.int64).float()" in result.stdout
    assert (project / "a.py").read_text() == FLOAT_ARANGE


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--fix", "--output-format", "json"], "--output-format does not go with --fix or --diff"),
        (["--diff", "--baseline", "b.json"], "--baseline does not go with --fix or --diff"),
        (["--fix", "--diff-base", "HEAD"], "--diff-base does not go with --fix or --diff"),
        (["--unsafe-fixes"], "--unsafe-fixes goes with --fix, --diff or --show-fixes"),
        (["--show-fixes", "--output-format", "sarif"], "--show-fixes does not go with --output-format sarif"),
    ],
)
def test_flags_that_do_not_go_together_are_one_line_and_write_nothing(
    project: Path, flags: list[str], message: str
) -> None:
    assert _one_error_line(rope_lint("check", *flags, ".", cwd=project)).startswith(f"rope-lint: error: {message}")
    assert (project / "a.py").read_text() == FLOAT_ARANGE


@pytest.mark.parametrize("command", [["fix", "--diff"], ["check", "--diff"]])
def test_diff_exits_1_where_it_shows_a_change_as_ruffs_does(tmp_path: Path, command: list[str]) -> None:
    """Even where no finding would remain: a CI step that prints the changes still to make fails."""
    (tmp_path / "a.py").write_text(FLOAT_ARANGE)
    result = rope_lint(*command, "a.py", cwd=tmp_path)
    assert (result.returncode, result.stdout.splitlines()[-1]) == (1, "Would fix 1 finding, 0 remaining.")
    assert rope_lint(*command, "--exit-zero", "a.py", cwd=tmp_path).returncode == 0
    (tmp_path / "a.py").write_text("import torch\n")
    result = rope_lint(*command, "a.py", cwd=tmp_path)
    assert (result.returncode, "+++" in result.stdout) == (0, False)


@pytest.mark.parametrize("command", [["check"], ["fix"], ["check", "--fix"]])
def test_exit_zero_for_findings_but_not_for_errors(project: Path, command: list[str]) -> None:
    assert rope_lint(*command, ".", cwd=project).returncode == 1  # d.py's finding has no fix
    result = rope_lint(*command, "--exit-zero", ".", cwd=project)
    assert result.returncode == 0
    assert "RPL302" in result.stdout  # the findings are still reported
    (project / "e.py").write_text(SYNTAX_ERROR)
    assert rope_lint(*command, "--exit-zero", ".", cwd=project).returncode == 2
    assert rope_lint(*command, "--exit-zero", "--select", "RPL999", ".", cwd=project).returncode == 2


def test_config_file_replaces_the_nearest_pyproject_and_its_patterns_are_relative_to_it(
    project: Path, tmp_path: Path
) -> None:
    (project / "pyproject.toml").write_text('[tool.rope-lint]\nselect = ["RPL103"]\n')
    (project / "skip").mkdir()
    (project / "skip" / "s.py").write_text(FLOAT_ARANGE)
    (tmp_path / "lint.toml").write_text('[tool.rope-lint]\nselect = ["RPL1"]\nexclude = ["project/skip"]\n')
    # The project's own pyproject.toml: RPL103 only.
    assert _found(rope_lint("check", "--output-format", "concise", ".", cwd=project)) == ["c.py:2:24: RPL103"]
    # The file named: RPL1, and project/skip (relative to the file's folder, not to the project) left out.
    named = rope_lint("check", "--config", "../lint.toml", "--output-format", "concise", ".", cwd=project)
    assert _found(named) == ["a.py:2:5: RPL101", "b.py:2:5: RPL101", "c.py:2:24: RPL103"]
    # `fix` reads it too: RPL101's safe fix is applied, which the project's own RPL103-only file would not select.
    rope_lint("fix", "--config", str(tmp_path / "lint.toml"), ".", cwd=project)
    assert (project / "a.py").read_text() != FLOAT_ARANGE
    assert (project / "skip" / "s.py").read_text() == FLOAT_ARANGE


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "cannot read: No such file or directory"),
        ("[tool.rope-lint\n", "invalid TOML"),
        ("[tool.ruff]\nselect = []\n", "no [tool.rope-lint] section"),
        ('[tool.rope-lint]\nselect = "RPL1"\n', "[tool.rope-lint] select must be a list of strings"),
    ],
)
def test_a_config_file_that_cannot_be_used_is_one_line(project: Path, text: str | None, message: str) -> None:
    if text is not None:
        (project / "lint.toml").write_text(text)
    for command in ("check", "fix"):
        line = _one_error_line(rope_lint(command, "--config", "lint.toml", ".", cwd=project))
        assert line.startswith("rope-lint: error: lint.toml: ") and message in line
    assert (project / "a.py").read_text() == FLOAT_ARANGE


def test_show_fixes_lists_per_file_what_fix_would_fix(project: Path) -> None:
    result = rope_lint("check", "--show-fixes", ".", cwd=project)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    start = lines.index("Would fix 2 findings with `rope-lint fix`:")
    assert lines[start - 1].startswith("Found 4 findings.")  # after the report, its summary included
    assert lines[start:] == [
        "Would fix 2 findings with `rope-lint fix`:",
        "- a.py:",
        "    1  RPL101  [*] float-arange",
        "- c.py:",
        "    1  RPL103  [*] default-dtype-promotion",
    ]
    unsafe = rope_lint("check", "--show-fixes", "--unsafe-fixes", ".", cwd=project).stdout.splitlines()
    assert "Would fix 3 findings with `rope-lint fix --unsafe-fixes`:" in unsafe and "- b.py:" in unsafe
    clean = rope_lint("check", "--show-fixes", "d.py", cwd=project).stdout.splitlines()
    assert clean[-1] == "Would fix 0 findings with `rope-lint fix`."


def test_fix_show_fixes_lists_per_file_what_it_fixed(project: Path) -> None:
    lines = rope_lint("fix", "--show-fixes", ".", cwd=project).stdout.splitlines()
    assert lines[-6:] == [
        "Fixed 2 findings:",
        "- a.py:",
        "    1  RPL101  [*] float-arange",
        "- c.py:",
        "    1  RPL103  [*] default-dtype-promotion",
        "Fixed 2 findings, 2 remaining.",
    ]


# `--diff`, so that the fix leaves the files as they were for the second run.
@pytest.mark.parametrize("command", [["check"], ["fix", "--diff"], ["check", "--fix", "--diff"]])
def test_output_file_takes_the_report_and_stdout_gets_none_of_it(project: Path, command: list[str]) -> None:
    expected = rope_lint(*command, ".", cwd=project).stdout
    result = rope_lint(*command, "--output-file", "report.txt", ".", cwd=project)
    assert result.returncode == 1 and result.stdout == ""
    assert (project / "report.txt").read_text() == expected
    # On a terminal too: the file gets `text`, without colour; the terminal gets nothing.
    (project / "report.txt").unlink()
    assert on_a_terminal("check", "--output-file", "report.txt", "a.py", cwd=project) == ""
    written = (project / "report.txt").read_text()
    assert written == rope_lint("check", "a.py", cwd=project).stdout
    assert "\x1b" not in written and "  |" not in written


@pytest.mark.parametrize("command", [["check"], ["fix"]])
def test_a_run_that_fails_leaves_no_output_file_behind(project: Path, command: list[str]) -> None:
    line = _one_error_line(rope_lint(*command, "--select", "RPL999", "--output-file", "report.txt", ".", cwd=project))
    assert "RPL999" in line
    assert not (project / "report.txt").exists()


@pytest.mark.parametrize("command", [["check"], ["fix"]])
def test_an_output_file_that_cannot_be_written_is_one_line_and_fix_writes_nothing(
    project: Path, command: list[str]
) -> None:
    line = _one_error_line(rope_lint(*command, "--output-file", "no/such/folder/out.txt", ".", cwd=project))
    assert line == "rope-lint: error: no/such/folder/out.txt: No such file or directory"
    assert (project / "a.py").read_text() == FLOAT_ARANGE


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        (
            "check",
            [
                "--fix",
                "--unsafe-fixes",
                "--diff",
                "--show-fixes",
                "--exit-zero",
                "--config",
                "--output-file",
                "--stdin-filename",
            ],
        ),
        ("fix", ["--unsafe-fixes", "--diff", "--show-fixes", "--exit-zero", "--config", "--output-file"]),
    ],
)
def test_every_convention_is_in_the_help(command: str, flags: list[str]) -> None:
    shown = rope_lint(command, "--help").stdout
    assert [flag for flag in flags if f"  {flag}" not in shown and f", {flag}" not in shown] == []
    if command == "check":
        assert "{full,text,concise,json,sarif,github}" in shown and "default: full on a terminal" in shown


@pytest.mark.parametrize(
    ("command", "short", "long"),
    [
        (
            "check",
            ["-e", "-o", "{out}", "-q", "-n", "-v"],
            ["--exit-zero", "--output-file", "{out}", "--quiet", "--no-cache", "--verbose"],
        ),
        (
            "fix",
            ["-e", "-o", "{out}", "-q", "--diff", "-v"],
            ["--exit-zero", "--output-file", "{out}", "--quiet", "--diff", "--verbose"],
        ),
    ],
)
def test_short_flags_are_ruffs_and_do_what_the_long_ones_do(
    project: Path, tmp_path: Path, command: str, short: list[str], long: list[str]
) -> None:
    """`-e`, `-o`, `-q`, `-n` and `-v` as ruff spells them: a run with them reports what one with the long ones does."""
    reports = []
    for flags, name in ((short, "short.txt"), (long, "long.txt")):
        out = tmp_path / name
        result = rope_lint(command, *[flag.format(out=out) for flag in flags], str(project))
        assert result.returncode == 0 and result.stdout == "", result
        reports.append(out.read_text())
    assert reports[0] == reports[1] and "RPL101" in reports[0]


@pytest.mark.parametrize(
    ("command", "closing"),
    [
        (["check", "--output-format", "text"], "Found "),
        (["check", "--output-format", "full"], "Found "),
        (["check", "--fix"], "Fixed "),
        (["fix", "--diff"], "Would fix "),
    ],
)
def test_quiet_prints_the_findings_and_nothing_else(project: Path, command: list[str], closing: str) -> None:
    """ruff's `--quiet`: "Print diagnostics, but nothing else". It printed the closing line all the same."""
    loud = rope_lint(*command, str(project))
    quiet = rope_lint(*command, "--quiet", str(project))
    assert loud.returncode == quiet.returncode == 1
    assert loud.stdout.splitlines()[-1].startswith(closing)
    assert quiet.stdout == loud.stdout[: loud.stdout.rindex(closing)]
    assert "RPL101" in quiet.stdout and quiet.stderr == ""


def test_quiet_prints_nothing_for_a_clean_file(tmp_path: Path) -> None:
    clean = tmp_path / "clean.py"
    clean.write_text("x = 1\n")
    assert rope_lint("check", str(clean)).stdout == "All checks passed!\n"
    result = rope_lint("check", "-q", str(clean))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_check_reads_standard_input_for_a_path_of_dash_or_with_stdin_filename(project: Path) -> None:
    """The text checked is the one on standard input, not the file on disk; the findings name `-`, or the name given."""
    (project / "clean.py").write_text("import torch\n")
    assert _found(rope_lint("check", "--output-format", "concise", "-", cwd=project, stdin=FLOAT_ARANGE)) == [
        "-:2:5: RPL101"
    ]
    for arguments in (["--stdin-filename", "clean.py"], ["--stdin-filename", "./clean.py", "-"]):
        result = rope_lint("check", "--output-format", "concise", *arguments, cwd=project, stdin=FLOAT_ARANGE)
        assert (result.returncode, _found(result)) == (1, ["clean.py:2:5: RPL101"])
    result = rope_lint("check", "--stdin-filename", "a.py", cwd=project, stdin="import torch\n")
    assert (result.returncode, result.stdout) == (0, "All checks passed!\n")  # a.py on disk has a finding
    # A file called `-` is checked as one by another spelling.
    (project / "-").write_text(FLOAT_ARANGE)
    assert _found(rope_lint("check", "--output-format", "concise", "./-", cwd=project, stdin="")) == ["-:2:5: RPL101"]


def test_stdin_filename_brings_the_configuration_and_per_file_ignores_of_that_path(tmp_path: Path) -> None:
    """Found from the path given, not the current folder; its excludes do not apply, as ruff's do not without
    `--force-exclude`. The file need not exist."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[tool.rope-lint]\nexclude = ["vendored"]\nper-file-ignores = {"legacy/*.py" = ["RPL101"]}\n'
    )
    checked = {
        "project/legacy/new.py": [],
        "project/src/new.py": ["project/src/new.py:2:5: RPL101"],
        "project/vendored/new.py": ["project/vendored/new.py:2:5: RPL101"],
    }
    for name, found in checked.items():
        result = rope_lint(
            "check", "--output-format", "concise", "--stdin-filename", name, cwd=tmp_path, stdin=FLOAT_ARANGE
        )
        assert _found(result) == found, name
    # The same file on disk is excluded.
    (project / "vendored").mkdir()
    (project / "vendored" / "new.py").write_text(FLOAT_ARANGE)
    assert rope_lint("check", "project/vendored/new.py", cwd=tmp_path).stdout == "All checks passed!\n"


def test_code_frames_and_sarif_fixes_are_those_of_the_text_on_standard_input(project: Path) -> None:
    """`full` shows the lines and the fix of the text checked, and SARIF's fix edits it, where the file on disk is
    another text."""
    (project / "a.py").write_text("# two lines above\n# that standard input does not have\n" + FLOAT_ARANGE)
    full = rope_lint("check", "--output-format", "full", "--stdin-filename", "a.py", cwd=project, stdin=FLOAT_ARANGE)
    assert "2 | t = torch.arange(4096, dtype=torch.float32)\n" in full.stdout
    assert "2 + t = torch.arange(4096, dtype=torch.int64).float()\n" in full.stdout
    sarif = rope_lint("check", "--output-format", "sarif", "--stdin-filename", "a.py", cwd=project, stdin=FLOAT_ARANGE)
    [result] = json.loads(sarif.stdout)["runs"][0]["results"]
    [change] = result["fixes"][0]["artifactChanges"]
    [replacement] = change["replacements"]
    offset, length = replacement["deletedRegion"]["charOffset"], replacement["deletedRegion"]["charLength"]
    fixed = FLOAT_ARANGE[:offset] + replacement["insertedContent"]["text"] + FLOAT_ARANGE[offset + length :]
    assert fixed == "import torch\nt = torch.arange(4096, dtype=torch.int64).float()\n"


def test_standard_input_that_cannot_be_decoded_is_a_finding_about_the_run(project: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rope_lint", "check", "--output-format", "concise", "-"],
        cwd=project,
        input=b"\xff\xfe t = torch.arange(4.0)\n",
        capture_output=True,
    )
    assert (result.returncode, result.stdout.decode().split(" cannot decode")[0]) == (2, "-:1:1: RPL901")


NOT_ALONE = "standard input (`-`, --stdin-filename) goes without other paths; a file named `-` is `./-`"
CHECK_ONLY = "only `check` reads standard input (`-`); a file named `-` is `./-`"
WRITES_FILES = "--fix and --diff write files: they do not go with standard input"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["check", "-", "a.py"], NOT_ALONE),
        (["check", "--stdin-filename", "b.py", "a.py"], NOT_ALONE),
        (["fix", "-"], CHECK_ONLY),
        (["baseline", "-o", "b.json", "-"], CHECK_ONLY),
        (["check", "--fix", "-"], WRITES_FILES),
        (["check", "--diff", "--stdin-filename", "a.py"], WRITES_FILES),
        (
            ["check", "--stdin-filename", ""],
            "--stdin-filename names the file that standard input holds: it cannot be empty",
        ),
        (
            ["check", "--baseline", "b.json", "-"],
            "--baseline reads the file on disk: it does not go with standard input",
        ),
        (
            ["check", "--diff-base", "HEAD", "-"],
            "--diff-base reads the file on disk: it does not go with standard input",
        ),
    ],
)
def test_standard_input_where_it_cannot_be_read_is_one_line_and_writes_nothing(
    project: Path, arguments: list[str], message: str
) -> None:
    assert _one_error_line(rope_lint(*arguments, cwd=project, stdin=FLOAT_ARANGE)) == f"rope-lint: error: {message}"
    assert (project / "a.py").read_text() == FLOAT_ARANGE
    assert not (project / "b.json").exists()


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        (io.TextIOWrapper(io.BytesIO(b"#" * 11)), "standard input is larger than the 0 MB a run reads of a file"),
        (None, "there is no standard input to read"),
    ],
)
def test_standard_input_too_large_or_missing_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], stdin: io.TextIOWrapper | None, message: str
) -> None:
    monkeypatch.setattr("rope_lint.files.SOURCE_LIMIT", 10)
    monkeypatch.setattr("sys.stdin", stdin)
    assert main(["check", "-"]) == 2
    assert capsys.readouterr().err == f"rope-lint: error: {message}\n"
