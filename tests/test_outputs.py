"""Every output format against golden files, the SARIF log against the SARIF 2.1.0 schema, and `--statistics`.

Golden files live in tests/data/golden/; after an intended change, regenerate them with
`ROPE_LINT_UPDATE_GOLDEN=1 pytest tests/test_outputs.py` and review the diff.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from helpers import REPO, on_a_terminal, rope_lint

from rope_lint import progress
from rope_lint.cli import _parser
from rope_lint.diagnostics import Diagnostic, Fix, FixSafety, Position
from rope_lint.fix.edits import Replacement
from rope_lint.output import FORMATS, Report, renderer
from rope_lint.rules import RULES_BY_CODE

GOLDEN = REPO / "tests" / "data" / "golden"
# The official schema (OASIS sarif-spec, errata01), kept as test data so that the test needs no network.
SARIF_SCHEMA = REPO / "tests" / "data" / "sarif-schema-2.1.0.json"

SOURCES = {
    # RPL101 with a safe fix, RPL101 with an unsafe fix, RPL103 with a safe fix; a non-ASCII line for columns.
    "model.py": (
        "import torch\n"
        "t = torch.arange(4096, dtype=torch.float32)\n"
        "u = torch.arange(4096, dtype=torch.bfloat16)\n"
        "θ = 1.0 / (10000 ** (torch.arange(0, 64, 2) / 64))\n"
    ),
    # A finding about the run itself, in a file whose name needs escaping in workflow commands.
    "odd,name:1.py": "import torch\nt = torch.arange(8, dtype=torch.float32\n",
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name, text in SOURCES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def _golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("ROPE_LINT_UPDATE_GOLDEN"):
        path.write_text(actual, encoding="utf-8")
    assert actual == path.read_text(encoding="utf-8")


def _sarif_without_help(text: str) -> str:
    """Rule documentation is tested against the rules themselves, so the golden file does not repeat it."""
    log = json.loads(text)
    for rule in log["runs"][0]["tool"]["driver"]["rules"]:
        if "help" in rule:
            assert rule["help"] == {"text": RULES_BY_CODE[rule["id"]].documentation()} | {
                "markdown": RULES_BY_CODE[rule["id"]].documentation()
            }
            rule["help"] = "<documentation>"
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("output_format", FORMATS)
def test_format_matches_golden_file(project: Path, output_format: str) -> None:
    result = rope_lint("check", "--output-format", output_format, ".", cwd=project)
    assert result.returncode == 2, result.stderr  # RPL902 makes it 2
    stdout = _sarif_without_help(result.stdout) if output_format == "sarif" else result.stdout
    _golden(f"check.{output_format}", stdout)


def test_statistics_matches_golden_file(project: Path) -> None:
    result = rope_lint("check", "--statistics", ".", cwd=project)
    assert result.returncode == 2
    _golden("check.statistics", result.stdout)


def test_concise_is_one_line_per_finding_and_nothing_else(project: Path) -> None:
    findings = json.loads(rope_lint("check", "--output-format", "json", ".", cwd=project).stdout)
    lines = rope_lint("check", "--output-format", "concise", ".", cwd=project).stdout.splitlines()
    assert len(lines) == len(findings) == 4
    assert [line.split(": ")[1].split()[0] for line in lines] == [f["code"] for f in findings]


def test_github_lines_never_wrap_whatever_the_terminal_width(project: Path) -> None:
    os.environ["COLUMNS"] = "20"
    try:
        lines = rope_lint("check", "--output-format", "github", ".", cwd=project).stdout.splitlines()
    finally:
        del os.environ["COLUMNS"]
    assert len(lines) == 4
    assert all(line.startswith("::error file=") and "title=RPL" in line for line in lines)
    assert lines[1].startswith(
        "::error file=model.py,line=3,col=5,endLine=3,endColumn=45,title=RPL101::`torch.arange` enumerates"
    )
    assert lines[3].startswith("::error file=odd%2Cname%3A1.py,line=2,col=17,")


def _validate_sarif(text: str) -> dict:
    log = json.loads(text)
    schema = json.loads(SARIF_SCHEMA.read_text())
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator_class(schema).validate(log)
    return log


def test_sarif_validates_against_the_schema(project: Path) -> None:
    log = _validate_sarif(rope_lint("check", "--output-format", "sarif", ".", cwd=project).stdout)
    run = log["runs"][0]
    assert [rule["id"] for rule in run["tool"]["driver"]["rules"]] == ["RPL101", "RPL103", "RPL902"]
    assert [r["ruleId"] for r in run["results"]] == ["RPL101", "RPL101", "RPL103", "RPL902"]
    assert all(run["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] == r["ruleId"] for r in run["results"])
    # Fixes where there are fixes: applying each replacement gives what `fix --unsafe-fixes` writes.
    source = SOURCES["model.py"]
    for result in run["results"][:3]:
        [change] = result["fixes"][0]["artifactChanges"]
        [replacement] = change["replacements"]
        start, length = replacement["deletedRegion"]["charOffset"], replacement["deletedRegion"]["charLength"]
        fixed = source[:start] + replacement["insertedContent"]["text"] + source[start + length :]
        assert fixed.count(".float()") == 1
        assert fixed.splitlines()[result["locations"][0]["physicalLocation"]["region"]["startLine"] - 1].endswith(
            (".float()", ".float() / 64))")
        )
    assert "fixes" not in run["results"][3]


def test_an_informational_rules_findings_are_notes_not_errors(tmp_path: Path) -> None:
    """RPL104 reports code that is exact where it runs: a SARIF `note` and a GitHub `::notice`, beside RPL101's
    errors."""
    (tmp_path / "model.py").write_text(
        "import torch\n"
        "t = torch.arange(4096, dtype=torch.float32)\n"
        "class Positions(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.arange(x.shape[1], dtype=torch.float32)\n"
    )
    selected = ("--select", "RPL101,RPL104")
    log = _validate_sarif(rope_lint("check", *selected, "--output-format", "sarif", ".", cwd=tmp_path).stdout)
    run = log["runs"][0]
    assert [(r["id"], r["defaultConfiguration"]["level"]) for r in run["tool"]["driver"]["rules"]] == [
        ("RPL101", "error"),
        ("RPL104", "note"),
    ]
    assert [(r["ruleId"], r["level"]) for r in run["results"]] == [("RPL101", "error"), ("RPL104", "note")]
    lines = rope_lint("check", *selected, "--output-format", "github", ".", cwd=tmp_path).stdout.splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == ["::error", "::notice"]
    assert lines[1].startswith("::notice file=model.py,line=5,col=16,")


def test_sarif_without_findings_validates(tmp_path: Path) -> None:
    (tmp_path / "clean.py").write_text("import torch\nt = torch.arange(8)\n")
    result = rope_lint("check", "--output-format", "sarif", ".", cwd=tmp_path)
    assert result.returncode == 0
    log = _validate_sarif(result.stdout)
    assert log["runs"][0]["results"] == []
    assert log["runs"][0]["tool"]["driver"]["rules"] == []


def test_sarif_writes_the_edits_of_the_report_and_computes_none() -> None:
    """The fix stage computes each finding's edit once; the SARIF output only writes out what the report holds, even
    for a file that does not exist, and offers no fix where the report holds no edit."""
    position = Position(2, 4)
    finding = Diagnostic("gone.py", "RPL101", "float-arange", "m", position, position, Fix(FixSafety.SAFE))
    edit = [Replacement(13, 5, "x = 1\n"), Replacement(40, 0, "y\n")]
    [result] = json.loads(renderer("sarif")(Report([finding], [edit])))["runs"][0]["results"]
    [change] = result["fixes"][0]["artifactChanges"]
    assert change["replacements"] == [
        {"deletedRegion": {"charOffset": 13, "charLength": 5}, "insertedContent": {"text": "x = 1\n"}},
        {"deletedRegion": {"charOffset": 40, "charLength": 0}, "insertedContent": {"text": "y\n"}},
    ]
    [result] = json.loads(renderer("sarif")(Report([finding])))["runs"][0]["results"]
    assert "fixes" not in result


def test_text_ends_with_its_summary_and_concise_has_none(project: Path) -> None:
    text = rope_lint("check", ".", cwd=project).stdout.splitlines()
    concise = rope_lint("check", "--output-format", "concise", ".", cwd=project).stdout.splitlines()
    assert text[:-1] == concise
    assert text[-1].startswith("Found 4 findings. [*] 2 fixable with `rope-lint fix`;")


def _stderr_on_a_terminal(*args: str, cwd: Path) -> str:
    """What the CLI wrote to stderr on a pseudo-terminal, as a person at a shell has it."""
    return on_a_terminal(*args, cwd=cwd, stream="stderr")


def test_progress_bar_only_on_a_terminal_and_not_with_quiet(tmp_path: Path) -> None:
    for i in range(progress.MIN_FILES):
        (tmp_path / f"m{i}.py").write_text("import torch\nt = torch.arange(8)\n")
    shown = _stderr_on_a_terminal("check", ".", cwd=tmp_path)
    assert f"{progress.MIN_FILES}/{progress.MIN_FILES} files" in shown
    assert shown.endswith("\r\x1b[K")  # the bar clears its line when done
    assert _stderr_on_a_terminal("check", "--quiet", ".", cwd=tmp_path) == ""
    assert rope_lint("check", ".", cwd=tmp_path).stderr == ""  # stderr is a pipe here
    # A short run shows nothing, even on a terminal.
    assert _stderr_on_a_terminal("check", "m0.py", cwd=tmp_path) == ""


def test_check_stays_free_of_libcst_and_torch_with_the_new_options(project: Path) -> None:
    rope_lint("baseline", ".", "-o", "base.json", cwd=project)
    probe = (
        "import sys\n"
        "from rope_lint.cli import main\n"
        "main(['check', '--baseline', 'base.json', '--statistics', '--output-format', 'github', '.'])\n"
        "main(['check', '--output-format', 'concise', '.'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('libcst', 'torch', 'transformers')))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=project, capture_output=True, text=True)
    assert result.stdout.splitlines()[-1] == "[]", result.stderr


def test_example_workflow_runs_commands_rope_lint_accepts() -> None:
    """examples/github-workflow.yml stays in step with the command line: each `rope-lint` command parses."""
    workflow = yaml.safe_load((REPO / "examples" / "github-workflow.yml").read_text())
    steps = workflow["jobs"]["rope-lint"]["steps"]
    commands = [shlex.split(step["run"].split(">")[0]) for step in steps if step.get("run", "").startswith("rope-lint")]
    assert [command[command.index("--output-format") + 1] for command in commands] == ["sarif", "github"]
    for command in commands:
        _parser().parse_args(command[1:])
    assert any(step.get("uses", "").startswith("github/codeql-action/upload-sarif@") for step in steps)
