"""What rope-lint runs, and how it fails: it runs only the ruff and git it finds by absolute path, passes no user text
to them as an option, answers every bad input with one line and exit 2 (a bug too: "internal error, please report"),
and prints file names so that no name can break or forge an output line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import rope_lint

from rope_lint import api, flake8_plugin, ruff
from rope_lint.cli import main

FLOAT_ARANGE = "import torch\nt = torch.arange(4096, dtype=torch.float32)\n"  # RPL101, safe fix
# RPL302 without a fix; its message holds `≈`.
LOGSUMEXP_ALL = "import torch\ntotal = torch.log(torch.exp(x).sum())\n"
# Writes a marker where it runs, as a hostile `ruff.py`, `json.py` or `git` of a checked project would.
MARKER_PY = "import pathlib\npathlib.Path(__file__).with_name('IMPORTED').write_text('x')\n"
# Names a crafted file can have: a forged GitHub command line, a terminal escape, a byte that is not UTF-8.
# Each with how the text output shows it.
HOSTILE_NAMES = {
    b"nl\n::error file=x.py,line=1::forged.py": "nl\\n::error file=x.py,line=1::forged.py",
    b"esc\x1b[2Jx.py": "esc\\x1b[2Jx.py",
    b"bad\xff.py": "bad\\xff.py",
    b"tab\tcr\r.py": "tab\\tcr\\r.py",
}


def _write_named(folder: Path, name: bytes, text: str) -> str:
    path = os.path.join(os.fsencode(folder), name)
    with open(path, "wb") as handle:
        handle.write(text.encode())
    return os.fsdecode(name)


def _git(*args: str, cwd: Path) -> None:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args]
    subprocess.run(command, cwd=cwd, check=True, capture_output=True)


def _repository(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).write_text(text)
    _git("init", "-q", ".", cwd=folder)
    _git("add", ".", cwd=folder)
    _git("commit", "-q", "-m", "start", cwd=folder)
    return folder


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`tmp_path`, as the current folder: the in-process runs name their files relative to it."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


# --- 3. Running what the user did not ask to run, and option injection ---------------------------------------------


@pytest.mark.parametrize("ruff_on_path", [True, False])
def test_fix_never_imports_a_ruff_py_of_the_current_folder(tmp_path: Path, ruff_on_path: bool) -> None:
    (tmp_path / "ruff.py").write_text(MARKER_PY)
    (tmp_path / "a.py").write_text(FLOAT_ARANGE)
    own_scripts = os.path.dirname(sys.executable)
    path = os.pathsep.join([own_scripts, "/usr/bin", "/bin"] if ruff_on_path else ["/usr/bin", "/bin"])
    environment = {**os.environ, "PATH": path}
    for arguments in (["fix", "--diff", "a.py"], ["fix", "a.py"]):
        result = subprocess.run(
            [sys.executable, "-m", "rope_lint", *arguments], cwd=tmp_path, env=environment, capture_output=True
        )
        assert result.returncode == ("--diff" in arguments), result.stderr  # a diff shown exits 1, as ruff's
        assert not (tmp_path / "IMPORTED").exists(), arguments
    assert "dtype=torch.int64" in (tmp_path / "a.py").read_text()


def test_ruff_is_the_executable_installed_with_rope_lint_never_a_module_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A `ruff` in the current folder, reached through a relative PATH entry, is never the one run either.
    (tmp_path / "ruff").write_text("#!/bin/sh\ntouch IMPORTED\n")
    (tmp_path / "ruff").chmod(0o755)
    monkeypatch.chdir(tmp_path)
    for path in ("", ".", f".{os.pathsep}/usr/bin"):
        monkeypatch.setenv("PATH", path)
        command = ruff.command()
        assert command is not None and len(command) == 1 and os.path.isabs(command[0]), (path, command)
        assert os.path.dirname(command[0]) != str(tmp_path)


def test_a_file_name_that_starts_with_a_dash_stays_ruffs_stdin_filename() -> None:
    command = ruff.command()
    assert command is not None
    assert ruff.run_on_text(command, ["format", "--quiet"], "-x.py", "x=1\n") == "x = 1\n"


@pytest.mark.parametrize("ref", ["--output={out}", "no-such-ref", ""])
def test_a_diff_base_is_never_an_option_of_git_and_must_name_a_commit(
    here: Path, capsys: pytest.CaptureFixture[str], ref: str
) -> None:
    _repository(here, {"a.py": FLOAT_ARANGE})
    out = here / "overwritten"
    assert main(["check", f"--diff-base={ref.format(out=out)}", "a.py"]) == 2
    assert not out.exists()
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("rope-lint: error: --diff-base ") and "is not a commit" in line


def test_git_is_never_found_through_a_relative_path_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _repository(tmp_path, {"a.py": FLOAT_ARANGE})
    (tmp_path / "git").write_text("#!/bin/sh\ntouch IMPORTED\nexit 1\n")
    (tmp_path / "git").chmod(0o755)
    monkeypatch.chdir(tmp_path)
    real_git = os.path.dirname(subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip())
    monkeypatch.setenv("PATH", f".{os.pathsep}{real_git}")
    (tmp_path / "a.py").write_text(FLOAT_ARANGE + "u = torch.arange(8, dtype=torch.float32)\n")
    assert main(["check", "--diff-base=HEAD", "--output-format=concise", "a.py"]) == 1
    assert capsys.readouterr().out.startswith("a.py:3:5: RPL101")
    assert not (tmp_path / "IMPORTED").exists()


def test_diff_base_runs_no_hook_the_repository_configures(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _repository(here, {"a.py": FLOAT_ARANGE})
    _git("config", "core.fsmonitor", f"touch {here / 'IMPORTED'}; false", cwd=here)
    assert main(["check", "--diff-base=HEAD", "a.py"]) == 0
    assert not (here / "IMPORTED").exists()


def test_diff_base_reads_a_file_name_that_is_not_utf8(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _repository(here, {"a.py": "x = 1\n"})
    name = _write_named(here, b"bad\xff.py", FLOAT_ARANGE)  # untracked: changed throughout
    assert main(["check", "--diff-base=HEAD", "--output-format=concise", "."]) == 1
    assert capsys.readouterr().out.startswith("bad\\xff.py:2:5: RPL101")
    assert os.path.exists(name)


def test_python_m_rope_lint_imports_nothing_from_the_current_folder(tmp_path: Path) -> None:
    (tmp_path / "json.py").write_text(MARKER_PY)
    (tmp_path / "a.py").write_text(FLOAT_ARANGE)
    result = rope_lint("check", "--output-format=json", "a.py", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert [finding["code"] for finding in json.loads(result.stdout)] == ["RPL101"]
    assert not (tmp_path / "IMPORTED").exists()


# --- 5. One line and exit 2 for every error -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        ("[tool]\nrope-lint = 5\n", "[tool.rope-lint] must be a table"),
        ('[[tool.rope-lint]]\nselect = ["RPL1"]\n', "[tool.rope-lint] must be a table"),
        ('tool = "rope-lint"\n', "`tool` must be a table"),
        ('[tool.rope-lint]\nselect = "RPL1"\n', "select must be a list of strings"),
        ("[tool.rope-lint]\nignore = [1]\n", "ignore must be a list of strings"),
        ("[tool.rope-lint]\nexclude = 5\n", "exclude must be a list of strings"),
        ("[tool.rope-lint]\nper-file-ignores = 3\n", "per-file-ignores must be a table"),
        ('[tool.rope-lint]\nper-file-ignores = {"a.py" = "RPL1"}\n', "per-file-ignores.a.py must be a list"),
        ('[tool.rope-lint]\nper-file-ignores = {"a.py" = ["XYZ"]}\n', "per-file-ignores.a.py: unknown rule code"),
        ("[tool.rope-lint]\nselect = []\n", "select is empty"),
        ("[tool.rope-lint]\nselect = [\n", "invalid TOML"),
        ("[tool.rope-lint]\nx = " + "[" * 5000 + "]" * 5000 + "\n", "invalid TOML: nested too deeply"),
        ('[tool.rope-lint]\nselect = ["\udcff"]\n', "not UTF-8"),
    ],
)
@pytest.mark.parametrize("command", ["check", "fix", "baseline"])
def test_a_configuration_that_cannot_be_used_is_one_line_naming_the_file_and_exit_2(
    here: Path, capsys: pytest.CaptureFixture[str], toml: str, said: str, command: str
) -> None:
    (here / "pyproject.toml").write_bytes(toml.encode("utf-8", "surrogateescape"))
    (here / "a.py").write_text(FLOAT_ARANGE)
    output = ["-o", "b.json"] if command == "baseline" else []
    assert main([command, *output, "a.py"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"rope-lint: error: {here / 'pyproject.toml'}: ") and said in line
    assert (here / "a.py").read_text() == FLOAT_ARANGE


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--line-length=3"], "rope-lint check: error: unrecognized arguments: --line-length=3"),
        (["--config=pyproject.toml"], "rope-lint: error: pyproject.toml: cannot read: No such file or directory"),
        (["--output-format=xml"], "rope-lint check: error: argument --output-format: invalid choice: 'xml'"),
        (["--select=RPL999"], "rope-lint: error: unknown rule code or prefix: 'RPL999'"),
        (["--diff-base=HEAD"], "rope-lint: error: --diff-base needs a git repository: `git rev-parse --show-toplevel`"),
        (["--baseline=."], "rope-lint: error: cannot read baseline ."),
    ],
)
def test_odd_options_are_one_error_line_and_exit_2(
    here: Path, capsys: pytest.CaptureFixture[str], arguments: list[str], said: str
) -> None:
    (here / "a.py").write_text(FLOAT_ARANGE)
    try:
        code = main(["check", *arguments, "a.py"])
    except SystemExit as usage_error:  # argparse's, after its usage lines
        code = usage_error.code
    assert code == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith(said)


def test_sarif_and_json_of_a_file_name_that_is_not_utf8_are_valid_unicode(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_named(here, b"bad\xff.py", FLOAT_ARANGE)
    assert main(["check", "--output-format=sarif", "."]) == 1
    sarif = capsys.readouterr().out
    sarif.encode("utf-8")  # no lone surrogate
    [result] = json.loads(sarif)["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "bad%FF.py"  # the byte, kept
    assert main(["check", "--output-format=json", "."]) == 1
    [finding] = json.loads(capsys.readouterr().out)
    assert finding["path"] == "bad\ufffd.py"
    finding["path"].encode("utf-8")


def test_output_an_ascii_terminal_cannot_encode_is_escaped(tmp_path: Path) -> None:
    # The diff's context holds the comment; the message left after the fix holds `≈` too.
    (tmp_path / "a.py").write_text("# within ≈ 1e-6\n" + FLOAT_ARANGE + LOGSUMEXP_ALL.split("\n", 1)[1])
    environment = {**os.environ, "PYTHONIOENCODING": "ascii"}
    for arguments in (["check", "a.py"], ["fix", "--diff", "a.py"], ["rule", "RPL305"]):
        result = subprocess.run(
            [sys.executable, "-m", "rope_lint", *arguments], cwd=tmp_path, env=environment, capture_output=True
        )
        assert result.returncode in (0, 1), result.stderr
        assert b"Traceback" not in result.stderr
        assert b"\\u2248" in result.stdout, arguments


def test_an_unexpected_exception_is_one_line_asking_for_a_report_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("a bug\nover two lines")

    monkeypatch.setattr(api, "check", broken)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "."]) == 2
    said = "rope-lint: internal error, please report: ValueError: a bug\\nover two lines"
    assert _one_error_line(capsys.readouterr().err) == f"{said} (--verbose shows where)"
    assert main(["check", "--verbose", "."]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last)") and err.endswith(f"\n{said}\n")


def test_a_probe_that_fails_unexpectedly_is_the_same_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rope_lint.probe import cli as probe_cli

    def broken(args: object) -> int:
        raise RuntimeError("probe bug")

    monkeypatch.setattr(probe_cli, "run", broken)
    assert main(["probe", "x.py"]) == 2
    assert _one_error_line(capsys.readouterr().err).startswith("rope-lint: internal error, please report: RuntimeError")


def test_the_flake8_plugin_reports_its_own_failure_as_one_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RecursionError("too deep")

    monkeypatch.setattr(api, "check_text", broken)
    found = list(flake8_plugin.Plugin(None, "a.py", [FLOAT_ARANGE]).run())  # type: ignore[arg-type]
    assert [(row, column, text.split(" ", 1)[0]) for row, column, text, _ in found] == [(1, 0, "RPL903")]
    assert "internal error, please report: RecursionError: too deep" in found[0][2]


# --- 6. select, and file names in output ----------------------------------------------------------------------------


@pytest.mark.parametrize("select", ["", ",", " , "])
@pytest.mark.parametrize("command", ["check", "fix"])
def test_an_empty_select_is_a_usage_error(
    here: Path, capsys: pytest.CaptureFixture[str], select: str, command: str
) -> None:
    (here / "a.py").write_text(FLOAT_ARANGE)
    with pytest.raises(SystemExit) as exit_:
        main([command, f"--select={select}", "a.py"])
    assert exit_.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == f"rope-lint {command}: error: argument --select: no code given: name codes or prefixes, or ALL"
    assert (here / "a.py").read_text() == FLOAT_ARANGE


@pytest.mark.parametrize(("name", "shown"), HOSTILE_NAMES.items())
@pytest.mark.parametrize("output_format", ["text", "concise", "github"])
def test_a_hostile_file_name_never_breaks_or_forges_an_output_line(
    here: Path, capsys: pytest.CaptureFixture[str], name: bytes, shown: str, output_format: str
) -> None:
    _write_named(here, name, FLOAT_ARANGE)
    assert main(["check", f"--output-format={output_format}", "."]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) == (2 if output_format == "text" else 1), out  # the finding, and the text output's summary
    assert not any(char in out for char in "\x1b\r\t\udcff")
    if output_format == "github":  # its own %0A for a newline, `%3A` for `:` in a property
        assert lines[0].startswith("::error file=") and lines[0].count("::") == 2
    else:
        assert lines[0].startswith(f"{shown}:2:5: RPL101 [*] ")


def test_fix_and_baseline_reports_and_error_lines_escape_file_names(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = _write_named(here, b"nl\n::error file=x.py,line=1::forged.py", LOGSUMEXP_ALL)  # a finding the fix leaves
    assert main(["fix", "."]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("nl\\n::error file=x.py,line=1::forged.py:2:9: RPL302 ")
    assert len(out.splitlines()) == 2
    _write_named(here, b"esc\x1b[2J\n+++ other.py", FLOAT_ARANGE)
    assert main(["fix", "--diff", "."]) == 1
    headers = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("---", "+++"))]
    assert headers == ["--- a/esc\\x1b[2J\\n+++ other.py", "+++ b/esc\\x1b[2J\\n+++ other.py"]
    assert main(["baseline", "-o", "base\nline.json", name]) == 0
    assert _one_error_line(capsys.readouterr().err) == "Wrote 1 finding to base\\nline.json."
    assert main(["check", "--baseline", "no\nsuch.json", name]) == 2
    assert _one_error_line(capsys.readouterr().err).startswith("rope-lint: error: cannot read baseline no\\nsuch.json")
    assert main(["baseline", "-o", "missing\n/b.json", name]) == 2
    assert _one_error_line(capsys.readouterr().err).startswith("rope-lint: error: missing\\n/b.json: ")
