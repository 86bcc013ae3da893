"""A probe of many classes runs them in processes forked one per core, a fresh one after every few classes, and
reports exactly what one process would; a run that uses DeepSpeed's own `zero.Init` runs one class at a time."""

from __future__ import annotations

import os

import pytest
from helpers import REPO

from rope_lint import engine
from rope_lint.probe import discover, runner

CLASSES = [str(REPO / "fixtures" / "probe" / name) for name in ("rotary_classes.py", "rotating_classes.py")]
TRIGGERS = ["fp32", "zero-init-bf16", "to-bf16"]


# With the run-time cost too: it counts copies and graph breaks, which a forked process counts alike.
@pytest.mark.parametrize("runtime", [False, True])
def test_classes_probed_in_forked_processes_give_the_report_of_one_process(monkeypatch, runtime: bool) -> None:
    one_process = runner.probe(CLASSES, TRIGGERS, positions=512, threshold=4e-3, budget=2**30, runtime=runtime)
    forks = []
    real_fork = os.fork

    def counted_fork() -> int:
        forks.append(1)
        return real_fork()

    # Our fixtures hold fewer classes than a run needs to be spread (engine.LARGE_RUN), on a machine of 3 cores, in
    # processes of 4 classes each.
    monkeypatch.setattr(engine, "LARGE_RUN", 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    monkeypatch.setattr(os, "fork", counted_fork)
    monkeypatch.setattr(runner, "CLASSES_PER_PROCESS", 4)
    spread = runner.probe(CLASSES, TRIGGERS, positions=512, threshold=4e-3, budget=2**30, runtime=runtime)
    classes = len(list(discover.discovered(CLASSES, discover.Discovery())))
    assert len(forks) == -(-classes // 4) and classes >= 8
    assert len(one_process.classes) >= 10
    assert all((result.runtime is not None) == runtime for result in one_process.classes if result.measured)
    assert spread.to_json() == one_process.to_json()


def test_the_first_classes_are_probed_while_the_next_modules_are_imported(monkeypatch, tmp_path) -> None:
    """A process forked for the first module's classes starts before the second module is imported, and the report is
    the one process's all the same. Its progress has no total yet; the last process's has it."""
    one_process = runner.probe(CLASSES, TRIGGERS, positions=512, threshold=4e-3, budget=2**30)
    shown = tmp_path / "progress"

    def progress(index: int, total: int | None, name: str) -> None:  # called in the forked processes
        with shown.open("a") as stream:
            stream.write(f"{index} {total}\n")

    events = []
    real_fork, real_import = os.fork, discover._import_path

    def logged_fork() -> int:
        events.append("fork")
        return real_fork()

    def logged_import(path):
        events.append(path.name)
        return real_import(path)

    monkeypatch.setattr(engine, "LARGE_RUN", 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "fork", logged_fork)
    monkeypatch.setattr(discover, "_import_path", logged_import)
    monkeypatch.setattr(runner, "CLASSES_PER_PROCESS", 2)
    spread = runner.probe(CLASSES, TRIGGERS, positions=512, threshold=4e-3, budget=2**30, progress=progress)
    assert events.index("fork") < events.index("rotating_classes.py")
    assert spread.to_json() == one_process.to_json()
    totals = dict(line.split() for line in shown.read_text().splitlines())
    classes = len(list(discover.discovered(CLASSES, discover.Discovery())))
    assert sorted(map(int, totals)) == list(range(1, classes + 1))
    assert totals["1"] == "None" and totals[str(classes)] == str(classes)


@pytest.mark.parametrize(
    ("triggers", "processes"),
    [
        (TRIGGERS, 4),
        (["fp32", "deepspeed-zero-init"], 1),  # its process group cannot be shared
    ],
)
def test_how_many_classes_run_at_once(monkeypatch, triggers, processes) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert runner._processes([runner.TRIGGERS[name] for name in triggers]) == processes
