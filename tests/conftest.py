import sys
from pathlib import Path

import pytest

# Test modules import their shared helpers as `helpers`.
sys.path.insert(0, str(Path(__file__).parent))

from collections.abc import Callable
from functools import cache
from typing import Any

from helpers import install_transformers, probe
from releases import NEW, OLD, PROBE_TRIGGERS, TREE_PROBE_OPTIONS, AcceptanceRun, acceptance_run
from suite_groups import release_group, runs_the_other_releases_acceptance


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """pytest-xdist runs the tests in two processes (`-n`, in pyproject.toml's addopts), and each process runs the
    session's fixtures that its own tests need. So the tests that judge one release's whole-release runs go to one
    process together (`--dist loadgroup`), and each run happens once: the newest release's first, as the longest,
    then the older release's, which the other process starts with. Every other test goes with its module, so that a
    module's fixtures run once too. A test in another group than its runs' would only run them again: slower, not
    wrong."""
    if crossing := [item.nodeid for item in items if runs_the_other_releases_acceptance(item)]:
        raise pytest.UsageError(f"tests that would run both releases' acceptance runs in one process: {crossing}")
    groups = {item: release_group(item) or item.nodeid.partition("::")[0] for item in items}
    for item, group in groups.items():
        item.add_marker(pytest.mark.xdist_group(group))
    first = [f"release-{NEW}", f"release-{OLD}"]
    items.sort(key=lambda item: first.index(groups[item]) if groups[item] in first else len(first))  # stable


# The acceptance command on each pinned transformers release, once per session: several test modules judge it, and
# the newest release's run takes minutes. Fixtures here, not in a module, so that every module shares the one run.
@pytest.fixture(scope="session")
def old_acceptance(tmp_path_factory: pytest.TempPathFactory) -> AcceptanceRun:
    return acceptance_run(OLD, tmp_path_factory.mktemp("acceptance-old"))


@pytest.fixture(scope="session")
def new_acceptance(tmp_path_factory: pytest.TempPathFactory) -> AcceptanceRun:
    return acceptance_run(NEW, tmp_path_factory.mktemp("acceptance-new"))


@pytest.fixture(scope="session")
def unfixed_probe() -> Callable[[str], dict[str, Any]]:
    """The probe of a release's whole unfixed `transformers` package under PROBE_TRIGGERS (with TREE_PROBE_OPTIONS), run
    once per session for each release asked: the whole-tree tests and the probe's tests judge the same report (the
    newest release's run takes minutes)."""

    @cache
    def run(version: str) -> dict[str, Any]:
        site = install_transformers(version)
        return probe("transformers", pythonpath=[site], triggers=PROBE_TRIGGERS, options=TREE_PROBE_OPTIONS)

    return run


@pytest.fixture(scope="session")
def fixed_probe() -> Callable[[AcceptanceRun], dict[str, Any]]:
    """The same probe of a release's fixed copy (its acceptance run), once per session for each release asked."""
    reports: dict[str, dict[str, Any]] = {}

    def run(release: AcceptanceRun) -> dict[str, Any]:
        if release.version not in reports:
            pythonpath = [release.fixed.parent, release.site]
            reports[release.version] = probe(
                "transformers", pythonpath=pythonpath, triggers=PROBE_TRIGGERS, options=TREE_PROBE_OPTIONS
            )
        return reports[release.version]

    return run


@pytest.fixture
def settled_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """The file system's clock read as a minute later: every file written so far has settled, so that its status
    stands for its bytes (`files.status_signature`), as on a tree edited longer ago than the cache's run."""
    import time
    import types

    from rope_lint import files

    real = time.time_ns
    monkeypatch.setattr(files, "time", types.SimpleNamespace(time_ns=lambda: real() + 60 * 10**9))
