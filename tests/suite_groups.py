"""Which tests share a process when pytest-xdist spreads the suite (`tests/conftest.py` gives each test its group)."""

from __future__ import annotations

from typing import Any

from releases import NEW, OLD

# The session's fixtures that run a command on a whole transformers release (minutes each).
WHOLE_RELEASE_RUNS = frozenset({"old_acceptance", "new_acceptance", "unfixed_probe", "fixed_probe"})


def release_group(item: Any) -> str | None:
    """The group of the release whose whole-release runs the test judges: the release among its parameters (the
    tests that pick their run with `request.getfixturevalue`), else the one its fixtures name (`old_acceptance`);
    the newest for the probes' fixtures, whose release is an argument. None for a test that judges none."""
    callspec = getattr(item, "callspec", None)
    parameters = callspec.params.values() if callspec else ()
    pinned = [value for value in parameters if isinstance(value, str) and value in (OLD, NEW)]
    fixtures = WHOLE_RELEASE_RUNS & set(getattr(item, "fixturenames", ()))
    if pinned:
        return f"release-{pinned[0]}"
    if fixtures:
        return f"release-{OLD if 'old_acceptance' in fixtures else NEW}"
    return None


def runs_the_other_releases_acceptance(item: Any) -> bool:
    """Whether a test of one release's group names the other release's acceptance run among its fixtures: its
    process, the one of its group's runs, would run that one too (minutes more on the suite's longest process). Such
    a test takes the other run with `request.getfixturevalue`, in the case that needs it."""
    other = {f"release-{OLD}": "new_acceptance", f"release-{NEW}": "old_acceptance"}.get(release_group(item) or "")
    return other in getattr(item, "fixturenames", ())
