import sys
from pathlib import Path

import pytest

# Test modules import their shared helpers as `helpers`.
sys.path.insert(0, str(Path(__file__).parent))

from releases import NEW, OLD, AcceptanceRun, acceptance_run


# The acceptance command on each pinned transformers release, once per session: several test modules judge it, and
# the newest release's run takes minutes. Fixtures here, not in a module, so that every module shares the one run.
@pytest.fixture(scope="session")
def old_acceptance(tmp_path_factory: pytest.TempPathFactory) -> AcceptanceRun:
    return acceptance_run(OLD, tmp_path_factory.mktemp("acceptance-old"))


@pytest.fixture(scope="session")
def new_acceptance(tmp_path_factory: pytest.TempPathFactory) -> AcceptanceRun:
    return acceptance_run(NEW, tmp_path_factory.mktemp("acceptance-new"))
