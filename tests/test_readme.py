"""The README's two-command quickstart stays true: CI runs its test command word for word."""

from __future__ import annotations

import re

from helpers import REPO


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
