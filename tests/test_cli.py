"""The command line as users meet it: output, exit codes, selection, configuration, suppressions, fix."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path, PurePath

import pytest
from helpers import imported_by_check, rope_lint

from rope_lint.command import COLLECTOR_THRESHOLDS
from rope_lint.files import Excludes, Listings, absolute_paths, as_given, discover

FLOAT_ARANGE = "import torch\nt = torch.arange(4096, dtype=torch.float32)\n"  # RPL101, safe fix
BF16_ARANGE = "import torch\nt = torch.arange(4096, dtype=torch.bfloat16)\n"  # RPL101, unsafe fix
DIVISION = "import torch\ninv = 1.0 / (10000 ** (torch.arange(0, 64, 2) / 64))\n"  # RPL103
CLEAN = "import torch\nt = torch.arange(4096, dtype=torch.int64).float()\n"


def write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return folder


def test_text_output_marks_fixable_findings_and_summarises(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": FLOAT_ARANGE, "b.py": BF16_ARANGE})
    result = rope_lint("check", ".", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("a.py:2:5: RPL101 [*] `torch.arange` enumerates positions")
    assert lines[1].startswith("b.py:2:5: RPL101 `torch.arange`")  # unsafe fix: no [*]
    assert (
        lines[-1] == "Found 2 findings. [*] 1 fixable with `rope-lint fix`; 1 more with `rope-lint fix --unsafe-fixes`."
    )


def test_clean_tree_exits_zero(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": CLEAN})
    result = rope_lint("check", str(tmp_path))
    assert result.returncode == 0
    assert result.stdout.strip() == "All checks passed!"


def test_json_output(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": FLOAT_ARANGE})
    result = rope_lint("check", "--output-format", "json", "a.py", cwd=tmp_path)
    assert result.returncode == 1
    [finding] = json.loads(result.stdout)
    assert finding == {
        "code": "RPL101",
        "name": "float-arange",
        "message": finding["message"],
        "path": "a.py",
        "start": {"line": 2, "column": 5},
        "end": {"line": 2, "column": 44},
        "fix": {"available": True, "safety": "safe"},
    }


# Exact where it runs: RPL104's note, not RPL101's hazard.
FLOAT32_IN_FORWARD = (
    "import torch\n"
    "class Positions(torch.nn.Module):\n"
    "    def forward(self, x):\n"
    "        return torch.arange(x.shape[1], dtype=torch.float32)\n"
)


@pytest.mark.parametrize(
    ("flags", "codes"),
    [
        ([], ["RPL101", "RPL103"]),
        (["--select", "RPL103"], ["RPL103"]),
        (["--select", "RPL1"], ["RPL101", "RPL103"]),
        (["--ignore", "RPL10"], []),
        (["--select", "RPL1", "--ignore", "RPL101"], ["RPL103"]),
        # An informational rule runs only where its full code is selected: neither `ALL` nor a prefix names it.
        (["--select", "ALL"], ["RPL101", "RPL103"]),
        (["--select", "RPL104"], ["RPL104"]),
        (["--select", "RPL1,RPL104"], ["RPL101", "RPL103", "RPL104"]),
        (["--select", "RPL104", "--ignore", "RPL1"], []),
    ],
)
def test_select_and_ignore_take_codes_and_prefixes(tmp_path: Path, flags: list[str], codes: list[str]) -> None:
    write(tmp_path, {"a.py": FLOAT_ARANGE, "b.py": DIVISION, "c.py": FLOAT32_IN_FORWARD})
    result = rope_lint("check", "--output-format", "json", *flags, ".", cwd=tmp_path)
    assert sorted(f["code"] for f in json.loads(result.stdout)) == codes
    assert result.returncode == (1 if codes else 0)


def test_unknown_code_is_a_usage_error(tmp_path: Path) -> None:
    result = rope_lint("check", "--select", "XYZ9", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip() == "rope-lint: error: unknown rule code or prefix: 'XYZ9'"


def test_a_usage_error_names_the_command_and_the_top_level_help_lists_every_command() -> None:
    """A command's parser is built on its own, without the top-level one (see `cli.main`): it still answers as
    the command."""
    result = rope_lint("check", "--bogus")
    assert result.returncode == 2
    assert result.stderr.splitlines()[0].startswith("usage: rope-lint check [-h]")
    assert result.stderr.splitlines()[-1] == "rope-lint check: error: unrecognized arguments: --bogus"
    listed = rope_lint("--help").stdout
    assert all(f"    {command} " in listed for command in ("check", "baseline", "fix", "rules", "rule", "probe"))


def test_configuration_in_pyproject_and_flags_override_it(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": """
                [tool.rope-lint]
                select = ["RPL101"]
                exclude = ["generated"]
                per-file-ignores = {"legacy/*.py" = ["RPL101"]}
            """,
            "a.py": FLOAT_ARANGE,
            "b.py": DIVISION,
            "generated/c.py": FLOAT_ARANGE,
            "legacy/d.py": FLOAT_ARANGE,
        },
    )
    result = rope_lint("check", "--output-format", "json", ".", cwd=tmp_path)
    assert [(f["path"], f["code"]) for f in json.loads(result.stdout)] == [("a.py", "RPL101")]
    result = rope_lint("check", "--output-format", "json", "--select", "RPL103", ".", cwd=tmp_path)
    assert [(f["path"], f["code"]) for f in json.loads(result.stdout)] == [("b.py", "RPL103")]


@pytest.mark.parametrize(
    "section",
    [
        '[tool.rope-lint]\nselect = ["RPL103"]\n',
        '[ tool . "rope-lint" ]\nselect = ["RPL103"]\n',
        '[tool]\nrope-lint.select = ["RPL103"]\n',
        '[tool]\n"rope-lint" = { select = ["RPL103"] }\n',
        'tool.rope-lint.select = ["RPL103"]\n',
        "tool = { 'rope-lint' = { select = ['RPL103'] } }\n",
    ],
)
def test_every_spelling_of_the_section_is_read(tmp_path: Path, section: str) -> None:
    project = '\n[project]\nname = "zoo"\ndependencies = ["rope-lint"]\n'
    write(tmp_path, {"pyproject.toml": section + project, "a.py": FLOAT_ARANGE, "b.py": DIVISION})
    result = rope_lint("check", "--output-format", "json", ".", cwd=tmp_path)
    assert [(f["path"], f["code"]) for f in json.loads(result.stdout)] == [("b.py", "RPL103")]


def test_a_project_that_names_rope_lint_only_as_a_dependency_is_not_parsed(tmp_path: Path) -> None:
    """Parsing TOML means importing a TOML parser, which costs more than checking a file: a pyproject.toml that
    mentions rope-lint outside `[tool.rope-lint]` (a dependency, a script name) is not read as TOML."""
    pyproject = """
        [project]
        name = "zoo"
        dependencies = ["rope-lint>=0.1"]

        [project.scripts]
        rope-lint-zoo = "zoo:main"

        [tool.ruff]
        line-length = 100
    """
    write(tmp_path, {"pyproject.toml": pyproject, "a.py": FLOAT_ARANGE})
    assert imported_by_check(tmp_path, "a.py", ("tomllib", "tomli")) == []


def test_configuration_errors_are_one_line(tmp_path: Path) -> None:
    write(tmp_path, {"pyproject.toml": "[tool.rope-lint]\nselct = ['RPL1']\n", "a.py": CLEAN})
    result = rope_lint("check", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "unknown key 'selct' in [tool.rope-lint]" in result.stderr


@pytest.mark.parametrize(
    ("comment", "silenced"),
    [
        ("# rope-lint: ignore[RPL101]", True),
        ("# rope-lint: ignore", True),
        ("# noqa: RPL101", True),
        ("# rope-lint: ignore[RPL103]", False),
        ("# noqa: E501", False),
    ],
)
def test_suppression_comments(tmp_path: Path, comment: str, silenced: bool) -> None:
    write(tmp_path, {"a.py": f"import torch\nt = torch.arange(8, dtype=torch.float32)  {comment}\n"})
    result = rope_lint("check", "a.py", cwd=tmp_path)
    assert result.returncode == (0 if silenced else 1)


def test_walk_skips_hidden_folders_and_virtual_environments(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "model.py": FLOAT_ARANGE,
            ".hidden/a.py": FLOAT_ARANGE,
            "venv/lib/b.py": FLOAT_ARANGE,
            "myenv/pyvenv.cfg": "home = /usr\n",
            "myenv/lib/c.py": FLOAT_ARANGE,
            "notes.txt": FLOAT_ARANGE,
        },
    )
    result = rope_lint("check", "--output-format", "json", cwd=tmp_path)
    assert [f["path"] for f in json.loads(result.stdout)] == ["model.py"]


def test_walk_lists_files_and_links_to_files_but_never_walks_into_a_link_to_a_folder(tmp_path: Path) -> None:
    """As `os.walk` does: a link to a folder is neither walked into nor taken for a file, even under a `.py` name; a
    link to a file, a dangling one included, is a file (the check reports the one it cannot read). A folder given
    by name is walked even where it is a virtual environment; one found inside is not."""
    write(tmp_path, {"pkg/a.py": "", "pkg/sub/b.py": "", "env/pyvenv.cfg": "", "env/c.py": "", "z.py": ""})
    for link, target in [("folder", "pkg"), ("folder.py", "pkg"), ("pkg/sub/d.py", "z.py"), ("dangling.py", "gone")]:
        (tmp_path / link).symlink_to(tmp_path / target)
    found = [Path(path).relative_to(tmp_path).as_posix() for path in discover([str(tmp_path)], Excludes([], "."))]
    assert found == ["dangling.py", "z.py", "pkg/a.py", "pkg/sub/b.py", "pkg/sub/d.py"]
    assert list(discover([str(tmp_path / "env")], Excludes([], "."))) == [str(tmp_path / "env" / "c.py")]


def test_a_run_lists_each_folder_once_however_often_it_walks_it(tmp_path: Path, monkeypatch) -> None:
    """A warm check walks the tree checked, then the package that holds it (`files.Listings`): the second walk lists
    only the folders the first did not, and finds what a walk of its own finds, the excluded files and the virtual
    environment that the first walk was given by name (and so walked) included."""
    write(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "", "pkg/models/b.py": "", "pkg/models/c.py": ""})
    write(tmp_path, {"pkg/env/pyvenv.cfg": "", "pkg/env/d.py": ""})
    listed: list[str] = []
    scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path: listed.append(os.path.abspath(path)) or scandir(path))
    listings = Listings()
    models, package, env = (str(tmp_path / name) for name in ("pkg/models", "pkg", "pkg/env"))
    assert list(discover([models], Excludes(["c.py"], "."), listings)) == [str(tmp_path / "pkg/models/b.py")]
    assert list(discover([env], Excludes([], "."), listings)) == [str(tmp_path / "pkg/env/d.py")]
    walked_again = list(discover([package], Excludes([], "."), listings))
    assert listed == [models, env, package]
    assert (
        walked_again
        == list(discover([package], Excludes([], ".")))
        == [str(tmp_path / name) for name in ("pkg/__init__.py", "pkg/a.py", "pkg/models/b.py", "pkg/models/c.py")]
    )


def test_paths_are_spelled_as_pathlib_spells_them() -> None:
    """The check path has path strings, not `Path`s (see `files.discover`), and prints them as before: every string
    of up to six of `a`, `.` and `/` is spelled as `str(PurePath(...))` spells it."""
    for length in range(7):
        for characters in itertools.product("a./", repeat=length):
            path = "".join(characters)
            assert as_given(path) == str(PurePath(path)), path


def test_absolute_paths_are_those_of_os_path_abspath(tmp_path: Path, monkeypatch) -> None:
    """The cache knows files by absolute path, which a run makes once per folder (`files.absolute_paths`): the same
    as `os.path.abspath` of each, for every string of up to five of `a`, `.` and `/` and the paths a walk gives."""
    monkeypatch.chdir(tmp_path)
    paths = ["".join(characters) for length in range(6) for characters in itertools.product("a./", repeat=length)]
    paths += [*discover([str(write(tmp_path, {"x/y.py": "", "x/z/w.py": ""}))], Excludes([], ".")), "x/../x/y.py"]
    assert absolute_paths(paths) == [os.path.abspath(path) for path in paths]
    assert absolute_paths([Path("x") / "y.py"]) == [str(tmp_path / "x/y.py")]


def test_unreadable_files_are_reported_and_the_rest_still_checked(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": FLOAT_ARANGE, "broken.py": "import torch\ntorch.arange(\n"})
    (tmp_path / "latin.py").write_bytes(b"x = '\xff\xfe arange'\n")
    result = rope_lint("check", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert "a.py:2:5: RPL101" in result.stdout
    assert "broken.py:2:" in result.stdout and "RPL902 syntax error" in result.stdout
    assert "latin.py:1:1: RPL901 cannot decode" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_missing_path_is_an_error(tmp_path: Path) -> None:
    result = rope_lint("check", "nowhere.py", cwd=tmp_path)
    assert result.returncode == 2
    assert "nowhere.py:1:1: RPL901 cannot read: No such file or directory" in result.stdout


def test_rules_table_and_rule_documentation() -> None:
    table = rope_lint("rules")
    assert table.returncode == 0
    assert table.stdout.splitlines()[0].split() == ["CODE", "NAME", "FIX", "SUMMARY"]
    assert any(line.startswith("RPL101  float-arange") for line in table.stdout.splitlines())
    doc = rope_lint("rule", "rpl103")
    assert doc.returncode == 0
    assert doc.stdout.startswith("# RPL103 default-dtype-promotion")
    assert "## Fix safety" in doc.stdout
    assert rope_lint("rule", "RPL999").returncode == 2


def test_fix_applies_safe_fixes_and_reports_what_remains(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": FLOAT_ARANGE, "b.py": BF16_ARANGE})
    result = rope_lint("fix", ".", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == "Fixed 1 finding, 1 remaining."
    assert (tmp_path / "a.py").read_text() == CLEAN
    assert (tmp_path / "b.py").read_text() == BF16_ARANGE

    result = rope_lint("fix", "--unsafe-fixes", ".", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.splitlines()[-1] == "Fixed 1 finding, 0 remaining."
    assert (tmp_path / "b.py").read_text() == CLEAN


def test_fix_diff_writes_nothing(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": FLOAT_ARANGE})
    result = rope_lint("fix", "--diff", "a.py", cwd=tmp_path)
    assert (tmp_path / "a.py").read_text() == FLOAT_ARANGE
    assert result.returncode == 1  # as ruff's `--diff`: no finding would remain, but there is a diff
    assert "--- a/a.py\n+++ b/a.py\n" in result.stdout
    assert "-t = torch.arange(4096, dtype=torch.float32)\n+t = torch.arange(4096, dtype=torch.int64).float()\n" in (
        result.stdout
    )
    assert result.stdout.splitlines()[-1] == "Would fix 1 finding, 0 remaining."


def test_fix_keeps_encoding_bom_line_endings_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    original = b"\xef\xbb\xbfimport torch\r\n# caf\xc3\xa9\r\nt = torch.arange(8, dtype=torch.float32)\r\n"
    path.write_bytes(original)
    path.chmod(0o751)
    assert rope_lint("fix", str(path)).returncode == 0
    assert path.read_bytes() == original.replace(b"torch.float32)", b"torch.int64).float()")
    assert path.stat().st_mode & 0o777 == 0o751
    assert rope_lint("fix", str(path)).stdout.splitlines()[-1] == "Fixed 0 findings, 0 remaining."


def test_check_imports_neither_libcst_nor_torch(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": FLOAT_ARANGE})
    assert imported_by_check(tmp_path, ".", ("libcst", "torch", "transformers")) == []


def test_a_one_file_check_imports_no_module_it_can_do_without(tmp_path: Path) -> None:
    """A pre-commit run checks a few files, and starting up is most of its time: importing `typing`, `pathlib`,
    `dataclasses` or `tokenize` (for a file headed `# coding=utf-8`, as transformers' are) costs a fresh interpreter
    about a millisecond each (`python -X importtime`), where the one-file check of issue 21 runs 40 ms against a floor
    of 22. Modules the interpreter had before `main` (an editable install's import hook brings pathlib) do not
    count."""
    write(tmp_path, {"model.py": "# coding=utf-8\n" + FLOAT_ARANGE})
    assert imported_by_check(tmp_path, "model.py", ("typing", "pathlib", "dataclasses", "tokenize")) == []


def test_a_long_report_arrives_whole_though_the_command_skips_teardown(tmp_path: Path) -> None:
    """`rope-lint` ends with `os._exit`: what it printed must be flushed first. Output to a pipe is buffered
    unless PYTHONUNBUFFERED is set, as it may be where the tests run: here it is not."""
    write(tmp_path, {"many.py": "import torch\n" + "t = torch.arange(4096, dtype=torch.float32)\n" * 3000})
    result = subprocess.run(
        [sys.executable, "-m", "rope_lint", "check", "many.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=BUFFERED,
    )
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 3001 and lines[-1].startswith("Found 3000 findings.")
    assert result.stderr == ""


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path: Path) -> None:
    write(tmp_path, {"many.py": "import torch\n" + "t = torch.arange(4096, dtype=torch.float32)\n" * 3000})
    reader = subprocess.Popen(
        [sys.executable, "-m", "rope_lint", "check", "many.py"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=BUFFERED,
    )
    assert reader.stdout is not None and reader.stderr is not None
    assert reader.stdout.readline().startswith(b"many.py:2:")
    reader.stdout.close()  # `rope-lint check | head -1`
    assert reader.stderr.read() == b""
    assert reader.wait(timeout=60) == 0


BUFFERED = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}


def test_the_command_runs_with_a_rarer_cycle_collector_and_leaves_an_api_users_alone() -> None:
    """`rope-lint` raises the collector's thresholds for its own process (`command.run`), before it imports the rest of
    rope-lint; `cli.main`, which a program that uses rope-lint calls in its own process, leaves them as they are."""
    api_user = "import gc, sys\nfrom rope_lint import cli\nbefore = gc.get_threshold()\ncli.main(['rules'])\n"
    api_user += "print(before == gc.get_threshold(), file=sys.stderr)\n"
    result = subprocess.run([sys.executable, "-c", api_user], capture_output=True, text=True)
    assert (result.returncode, result.stderr) == (0, "True\n")
    command = textwrap.dedent("""
        import gc, sys

        class Importing:  # says the thresholds as `rope_lint.cli` is imported
            def find_spec(self, name, *rest):
                if name == "rope_lint.cli":
                    print(gc.get_threshold(), file=sys.stderr)

        sys.meta_path.insert(0, Importing())
        sys.argv = ["rope-lint", "rules"]
        from rope_lint import command
        command.run()
    """)
    result = subprocess.run([sys.executable, "-c", command], capture_output=True, text=True)
    assert (result.returncode, result.stderr) == (0, f"{COLLECTOR_THRESHOLDS}\n")
    assert "RPL101" in result.stdout
