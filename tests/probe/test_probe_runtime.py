"""`rope-lint probe --runtime-cost` (rope_lint/probe/cost.py): the cross-device copies of a steady-state forward
after `.to("meta")`, and whether TorchDynamo traces the forward whole (fixtures/probe/runtime_classes.py)."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import REPO
from test_probe_fixtures import entry


@pytest.fixture(scope="module")
def report(probe_cli, probe_fixtures) -> dict[str, Any]:
    target = str(probe_fixtures / "runtime_classes.py")
    run = probe_cli(target, "--trigger", "fp32", "--positions", "512", "--runtime-cost", "--output-format", "json")
    assert run.returncode == 0, run.stderr[-3000:]
    return run.json()


def runtime(report: dict[str, Any], name: str) -> dict[str, Any]:
    found = entry(report, name)
    assert found["measured"] is True, found["reason"]
    return found["runtime"]


def test_tables_moved_in_every_forward_cost_a_copy_each(report):
    cost = runtime(report, "MovedEveryForwardRotaryEmbedding")
    assert cost["cross_device_copies"] == cost["compiled_cross_device_copies"] == 2


def test_a_cache_that_torch_compile_does_not_guard_on_copies_in_every_compiled_forward(report):
    """Eager forwards read the cache; the compiled forward was traced while it was empty and runs that trace."""
    cost = runtime(report, "UnguardedCacheRotaryEmbedding")
    assert cost["cross_device_copies"] == 0
    assert cost["compiled_cross_device_copies"] == 2


@pytest.mark.parametrize(
    "name", ["CachedPerDeviceRotaryEmbedding", "BufferRotaryEmbedding", "AutocastOffRotaryEmbedding"]
)
def test_tables_cached_on_the_device_or_moved_with_the_model_cost_none(report, name):
    cost = runtime(report, name)
    assert cost["cross_device_copies"] == cost["compiled_cross_device_copies"] == 0
    assert cost["compiles"] is True
    assert cost["graph_breaks"] == []
    assert cost["problems"] == []


def test_a_forward_that_reads_a_tensor_back_as_a_number_does_not_compile_whole(report):
    cost = runtime(report, "DataDependentRotaryEmbedding")
    assert cost["compiles"] is False
    assert cost["graph_breaks"]
    assert any("item" in reason for reason in cost["graph_breaks"]), cost["graph_breaks"]


def test_without_the_flag_nothing_is_measured_at_run_time(probe_cli, probe_fixtures):
    target = f"{probe_fixtures / 'runtime_classes.py'}:BufferRotaryEmbedding"
    run = probe_cli(target, "--trigger", "fp32", "--positions", "512", "--output-format", "json")
    assert run.returncode == 0, run.stderr[-3000:]
    assert entry(run.json(), "BufferRotaryEmbedding")["runtime"] is None


def test_the_table_says_it_in_one_line(probe_cli, probe_fixtures):
    target = f"{probe_fixtures / 'runtime_classes.py'}:MovedEveryForwardRotaryEmbedding"
    run = probe_cli(target, "--trigger", "fp32", "--positions", "512", "--runtime-cost")
    assert (
        "  run time: 2 cross-device copies per forward (2 under torch.compile); compiles with fullgraph=True\n"
        in run.stdout
    )


FIXED_TWINS = ["rotary_cache", "rotary_updates", "rotary_meta_init", "rotary_default_device", "rotary_device_source"]


@pytest.mark.parametrize("name", FIXED_TWINS)
def test_the_rope_codemods_tables_cost_no_copy_and_compile_whole(probe_cli, name):
    """The fixed twins of the bundled hazards (`fixtures/fixed/`): after the first forward on a device, forward reads
    each table's copy there, so a steady-state forward copies nothing between devices, compiled or not, and it compiles
    whole."""
    target = str(REPO / "fixtures" / "fixed" / f"{name}.py")
    run = probe_cli(target, "--trigger", "fp32", "--positions", "512", "--runtime-cost", "--output-format", "json")
    measured = [found for found in run.json()["classes"] if found["measured"]]
    assert measured, run.stderr[-3000:]
    for found in measured:
        assert found["runtime"]["cross_device_copies"] == found["runtime"]["compiled_cross_device_copies"] == 0, found
        assert found["runtime"]["compiles"] is True, found
