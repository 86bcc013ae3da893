"""The `full` output: code frames with carets, fixes as the lines they change, colour only for a person at a terminal.

The frames of a whole run are in the golden file `check.full` (tests/test_outputs.py); these tests pin each part."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from helpers import on_a_terminal, rope_lint

from rope_lint import api
from rope_lint.cli import main
from rope_lint.diagnostics import Diagnostic, Fix, FixSafety, Position
from rope_lint.output import WITH_EDITS, Report, renderer
from rope_lint.output.colour import ansi

FLOAT_ARANGE = "import torch\nt = torch.arange(4096, dtype=torch.float32)\n"  # RPL101 at 2:5-2:44, safe fix
# An ANSI escape code as `colour.ansi` writes them: the only kind a coloured output may hold.
SGR = re.compile(r"\x1b\[[0-9;]*m")


def test_a_finding_shows_its_line_carets_under_its_range_and_its_fix(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(FLOAT_ARANGE)
    result = rope_lint("check", "--output-format", "full", "a.py", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("a.py:2:5: RPL101 [*] `torch.arange` enumerates positions")
    assert lines[1:8] == [
        "  |",
        "2 | t = torch.arange(4096, dtype=torch.float32)",
        "  |     " + "^" * len("torch.arange(4096, dtype=torch.float32)"),
        "  |",
        "  = safe fix:",
        "2 - t = torch.arange(4096, dtype=torch.float32)",
        "2 + t = torch.arange(4096, dtype=torch.int64).float()",
    ]
    assert lines[-1] == "Found 1 finding. [*] 1 fixable with `rope-lint fix`."


def test_a_range_over_lines_is_underlined_to_the_end_of_its_first_and_its_other_lines_shown(tmp_path: Path) -> None:
    source = "import torch\n\n\n\n\n\n\nt = torch.arange(\n\t4096,\n\tdtype=torch.float32,\n)\n"
    (tmp_path / "a.py").write_text(source)
    lines = rope_lint("check", "--output-format", "full", "a.py", cwd=tmp_path).stdout.splitlines()
    assert lines[1:7] == [
        "   |",
        " 8 | t = torch.arange(",
        "   |     ^^^^^^^^^^^^^",
        " 9 |     4096,",  # a tab is shown as four spaces
        "10 |     dtype=torch.float32,",
        "11 | )",
    ]
    # The fix's lines are numbered as in the file before (`-`) and after (`+`) it.
    assert lines[8:13] == [
        "   = safe fix:",
        "10 -     dtype=torch.float32,",
        "11 - )",
        "10 +     dtype=torch.int64,",
        "11 + ).float()",
    ]


def _finding(path: Path, line: int, start: int, end: int, fix: Fix | None = None) -> Diagnostic:
    return Diagnostic(str(path), "RPL101", "float-arange", "m", Position(line, start), Position(line, end), fix)


def test_carets_stay_under_the_range_after_tabs_and_characters_shown_as_escapes(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_text("\tx = '\x1b[2J' + torch.arange(8.0)\n")
    start = len("\tx = '\x1b[2J' + ")
    shown = renderer("full")(Report([_finding(path, 1, start, start + len("torch.arange(8.0)"))]))
    code, carets = shown.splitlines()[2:4]
    assert code == "1 |     x = '\\x1b[2J' + torch.arange(8.0)"  # the escape code cannot reach the terminal
    assert carets.index("^") == code.index("torch") and carets.count("^") == len("torch.arange(8.0)")


def test_a_fix_the_report_holds_no_edit_of_names_the_command_that_shows_it(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_text(FLOAT_ARANGE)
    findings = [_finding(path, 2, 4, 43, Fix(FixSafety.SAFE)), _finding(path, 2, 4, 43, Fix(FixSafety.UNSAFE))]
    lines = renderer("full")(Report(findings)).splitlines()
    assert "  = safe fix: `rope-lint fix --diff` shows it" in lines
    assert "  = unsafe fix: `rope-lint fix --unsafe-fixes --diff` shows it" in lines


def test_a_file_that_cannot_be_read_shows_the_finding_without_code(tmp_path: Path) -> None:
    shown = renderer("full")(Report([_finding(tmp_path / "gone.py", 2, 4, 43)]))
    assert shown.splitlines() == [f"{tmp_path / 'gone.py'}:2:5: RPL101 m", "", "Found 1 finding."]


def test_the_edits_of_the_first_fixable_findings_only_when_limited(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(FLOAT_ARANGE + "u = torch.arange(8, dtype=torch.float32)\n")
    report = api.check([str(tmp_path / "a.py")], edits=True, edit_limit=1, cache=False)
    assert [bool(edit) for edit in report.edits] == [True, False]
    shown = renderer("full")(report)
    assert "2 + t = torch.arange(4096, dtype=torch.int64).float()" in shown
    assert shown.count("  = safe fix: `rope-lint fix --diff` shows it") == 1
    assert [bool(e) for e in api.check([str(tmp_path / "a.py")], edits=True, cache=False).edits] == [True, True]


def test_full_shows_the_fixes_of_its_first_fixable_findings_only(tmp_path: Path) -> None:
    limit = WITH_EDITS["full"]
    assert limit is not None
    (tmp_path / "a.py").write_text("import torch\n" + "t = torch.arange(4096, dtype=torch.float32)\n" * (limit + 1))
    shown = rope_lint("check", "--output-format", "full", "a.py", cwd=tmp_path).stdout
    assert shown.count(" = safe fix:\n") == limit
    assert shown.count(" = safe fix: `rope-lint fix --diff` shows it\n") == 1


def test_colour_only_on_a_terminal_and_never_with_no_color(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(FLOAT_ARANGE)
    coloured = on_a_terminal("check", "a.py", cwd=tmp_path).replace("\r\n", "\n")
    assert "\x1b[1;31mRPL101\x1b[0m" in coloured and "\x1b[32m2 + t = torch.arange" in coloured
    plain = SGR.sub("", coloured)
    assert "  |     ^^^^" in plain  # the default on a terminal is `full`
    environment = {**os.environ, "NO_COLOR": "1"}
    assert on_a_terminal("check", "a.py", cwd=tmp_path, env=environment).replace("\r\n", "\n") == plain
    # An empty NO_COLOR asks for nothing (no-color.org).
    assert "\x1b[" in on_a_terminal("check", "a.py", cwd=tmp_path, env={**os.environ, "NO_COLOR": ""})
    # Not a terminal: the one-line `text` output, without escape codes, for programs.
    piped = rope_lint("check", "a.py", cwd=tmp_path).stdout
    assert piped == rope_lint("check", "--output-format", "text", "a.py", cwd=tmp_path).stdout
    assert "\x1b" not in piped and "|" not in piped


def test_a_hostile_file_name_brings_no_escape_code_into_coloured_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a\x1b[2J\n::x.py").write_text(FLOAT_ARANGE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    assert main(["check", "."]) == 1
    out = capsys.readouterr().out
    assert "\x1b[1ma\\x1b[2J\\n::x.py\x1b[0m:2:5:" in out  # the name escaped, then painted
    assert "\x1b" not in SGR.sub("", out)


def test_the_painted_header_is_the_text_line_once_unpainted(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_text(FLOAT_ARANGE)
    finding = _finding(path, 2, 4, 43, Fix(FixSafety.SAFE))
    text = renderer("text")(Report([finding]))
    assert SGR.sub("", renderer("full", colour=True)(Report([finding]))).splitlines()[0] == text.splitlines()[0]
    assert ansi("1", "x") == "\x1b[1mx\x1b[0m"
