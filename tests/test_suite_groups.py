"""The suite's groups for pytest-xdist (tests/conftest.py): the tests that judge one transformers release's
whole-release runs (minutes each) share a process, so that each run happens once."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from releases import NEW, OLD
from suite_groups import release_group, runs_the_other_releases_acceptance


def test_a_test_runs_in_its_modules_group(request: pytest.FixtureRequest) -> None:
    """pytest-xdist sends a test to its group's process by the group's name in the test's id. pytest 9.2 moved the
    id where pytest-xdist 3.8 no longer writes it (pyproject.toml pins pytest below 9.2): every test then went to
    any process, and each ran the release runs again (the suite took 27.5 minutes over two processes, 48 minutes of
    CPU, against 32 in one process)."""
    assert [mark.args[0] for mark in request.node.iter_markers("xdist_group")] == ["tests/test_suite_groups.py"]
    if os.environ.get("PYTEST_XDIST_WORKER"):
        assert request.node.nodeid.endswith("@tests/test_suite_groups.py")


@pytest.mark.parametrize(
    ("fixtures", "parameters", "group"),
    [
        (["new_acceptance", "tmp_path"], {}, f"release-{NEW}"),
        (["old_acceptance"], {}, f"release-{OLD}"),
        (["unfixed_probe", "fixed_probe"], {"release": OLD}, f"release-{OLD}"),
        (["request"], {"version": NEW}, f"release-{NEW}"),  # picks its run with request.getfixturevalue
        (["unfixed_probe"], {}, f"release-{NEW}"),
        (["tmp_path"], {"command": ("ruff", "check")}, None),
    ],
)
def test_whole_release_tests_are_grouped_by_their_release(
    fixtures: list[str], parameters: dict[str, object], group: str | None
) -> None:
    callspec = SimpleNamespace(params=parameters) if parameters else None
    assert release_group(SimpleNamespace(fixturenames=fixtures, callspec=callspec)) == group


@pytest.mark.parametrize(
    ("fixtures", "parameters", "crosses"),
    [
        (["old_acceptance", "request"], {"release": NEW}, True),  # the newest release's process would run it too
        (["new_acceptance"], {"version": OLD}, True),
        (["old_acceptance"], {"release": OLD}, False),
        (["request"], {"release": NEW}, False),  # takes the older release's run only in its older case
        (["new_acceptance", "unfixed_probe"], {}, False),
    ],
)
def test_a_test_that_would_run_the_other_releases_acceptance_is_found(
    fixtures: list[str], parameters: dict[str, object], crosses: bool
) -> None:
    callspec = SimpleNamespace(params=parameters) if parameters else None
    assert runs_the_other_releases_acceptance(SimpleNamespace(fixturenames=fixtures, callspec=callspec)) is crosses
