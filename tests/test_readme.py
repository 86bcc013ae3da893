"""The README's quickstart stays true (CI runs its test command word for word), and its usage lines parse."""

from __future__ import annotations

import re
import shlex

from helpers import REPO

from rope_lint.cli import _parser


def quickstart_commands() -> list[str]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_quickstart_is_two_commands_and_ci_runs_the_second() -> None:
    commands = quickstart_commands()
    assert len(commands) == 2
    install_and_check, install_and_test = commands
    assert install_and_check.endswith("rope-lint check fixtures/hazards")
    assert install_and_test in (REPO / ".ci" / "run").read_text().splitlines()


def test_every_usage_line_parses_on_the_command_line() -> None:
    """The README's usage block stays in step with the command line: each `rope-lint` line is accepted as written,
    with its placeholders as values."""
    section = (REPO / "README.md").read_text().split("## Usage", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.+?)\n```", section, re.S)
    assert block is not None
    lines = [line.split("#", 1)[0].replace("[PATH ...]", "PATH") for line in block.group(1).splitlines()]
    commands = [shlex.split(line) for line in lines if line.startswith("rope-lint ")]
    assert len(commands) >= 10
    for command in commands:
        _parser().parse_args(command[1:])
