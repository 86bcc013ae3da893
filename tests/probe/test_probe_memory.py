"""What the probe keeps in memory: the source it reads to find classes is released module by module, a measurement
works through the rows in blocks with the figures of one pass over the whole table, sinusoid values get a sin table
that takes no memory, the collector is left as it was found, and a large block that the probe's process frees goes
back to the system (issue 21: the probe's peak memory)."""

from __future__ import annotations

import gc
import math
import subprocess
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from torch import nn

from rope_lint.probe import build, discover, report
from rope_lint.probe.build import Tables
from rope_lint.probe.memory import allocations
from rope_lint.probe.readings import ROTATED_PAIRS, TABLES, is_rotation, largest_magnitude, tables_from_output
from rope_lint.probe.reference import textbook_tables
from rope_lint.probe.report import Yardstick
from rope_lint.probe.runner import LARGE_BLOCK, probe


def test_the_source_read_for_a_module_is_released_once_its_classes_are_found(
    monkeypatch: pytest.MonkeyPatch, probe_fixtures: Path
) -> None:
    sources: list[weakref.ref] = []
    original = discover._Sources.__init__

    def recorded(self: discover._Sources) -> None:
        original(self)
        sources.append(weakref.ref(self))

    monkeypatch.setattr(discover._Sources, "__init__", recorded)
    gc.disable()  # released as soon as the module is done, not whenever the collector runs
    try:
        found = discover.Discovery()
        list(discover.discovered([str(probe_fixtures / "computed_classes.py")], found))
        alive = [source for source in sources if source() is not None]
    finally:
        gc.enable()
    assert "computed_classes.BandPositions" in found.found_by  # found by its computation: its source was read
    assert sources and not alive


def test_a_measurement_in_blocks_has_the_figures_of_one_over_the_whole_table(monkeypatch: pytest.MonkeyPatch) -> None:
    reference = textbook_tables(dim=8, base=10000.0, positions=40)
    cos, sin = reference.cos.clone(), reference.sin.clone()
    cos[23, 1] += 0.01
    cos[31, 2] = math.nan
    sin[17, 0] -= 0.5
    sin[39, 7] += 0.001  # below the threshold: not wrong
    tables = Tables(cos, sin)
    whole = Yardstick(reference, 4e-3, curves=True).measure(tables)
    monkeypatch.setattr(report, "_BLOCK_ELEMENTS", 3 * 8)  # blocks of 3 rows: the last one short
    blocks = Yardstick(reference, 4e-3, curves=True).measure(tables)
    assert blocks == whole
    assert (blocks.first_wrong_position, blocks.cos_max_abs_error) == (17, math.inf)
    assert torch.equal(blocks.cos_error_by_position, whole.cos_error_by_position)


def test_sinusoid_values_get_a_sin_table_that_takes_no_memory() -> None:
    values = torch.sin(torch.outer(torch.arange(64.0), torch.linspace(0.01, 1.0, 32)))
    tables = tables_from_output(values, positions=64)
    assert tables.sin.shape == tables.cos.shape == (64, 32)
    assert not tables.sin.any()
    assert tables.sin.untyped_storage().nbytes() == tables.sin.element_size()


def test_the_probe_leaves_the_collector_unfrozen(in_repo: None) -> None:
    result = probe(["fixtures/probe/rotary_classes.py:LegacyRotaryEmbedding"], ["fp32"], 64, 4e-3)
    assert [entry.measured for entry in result.classes] == [True]
    assert gc.get_freeze_count() == 0


# Frees a block of three LARGE_BLOCKs, which raises where glibc's own threshold for mapping a block on its own lies,
# then takes one of two: how many of its bytes are mapped on their own (glibc's mallinfo2), after a probe or not.
_MAPPED_AFTER_A_FREE = """
import ctypes, sys, torch
from rope_lint.probe.runner import LARGE_BLOCK, probe

class MallocInfo(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = MallocInfo
if sys.argv[1] == "probe":
    probe(["fixtures/probe/rotary_classes.py:LegacyRotaryEmbedding"], ["fp32"], 64, 4e-3)
freed = torch.empty(3 * LARGE_BLOCK, dtype=torch.uint8)
del freed
before = mallinfo2().hblkhd
taken = torch.empty(2 * LARGE_BLOCK, dtype=torch.uint8)
print(mallinfo2().hblkhd - before)
"""


@pytest.mark.parametrize("probed", [True, False])
def test_a_large_block_is_mapped_on_its_own_in_a_probe_s_process(in_repo: None, probed: bool) -> None:
    """A block that a class frees goes back to the system, rather than to a heap that the next classes' objects pin
    (glibc's threshold would have followed the larger block freed before, and served this one from the heap)."""
    argument = "probe" if probed else "none"
    ran = subprocess.run([sys.executable, "-c", _MAPPED_AFTER_A_FREE, argument], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    mapped = int(ran.stdout.split()[-1])
    assert (mapped >= 2 * LARGE_BLOCK) == probed


def _storages_made(run: Callable[[], object]) -> list[int]:
    """The bytes of each storage that `run` made, in order."""
    _, made = allocations(run, limit=2**40)
    return list(made.values())


def test_a_table_off_its_rows_is_read_with_one_copy_per_table() -> None:
    # Positions on the middle axis of [heads, N, D]: reading it as [N, heads * D] float64 rows is one copy each.
    cos = torch.rand(4, 100, 16).cos()
    sin = torch.rand(4, 100, 16).sin()
    made = _storages_made(lambda: tables_from_output((cos, sin), positions=100))
    assert made == [100 * 4 * 16 * 8] * 2


def test_the_rotation_test_reads_an_output_in_its_own_floating_precision() -> None:
    rotated = torch.rand(1, 100, 64)  # [1, N, D] float32: its rows are a view, and the pair lengths one float32 table
    made = _storages_made(lambda: is_rotation(rotated, ROTATED_PAIRS, positions=100))
    assert max(made) == 100 * 32 * 4
    assert is_rotation(torch.ones(1, 100, 64, dtype=torch.int64), ROTATED_PAIRS, positions=100)  # integers: float64


def test_the_largest_magnitude_of_a_table_needs_no_copy_and_shows_a_nan() -> None:
    table = torch.tensor([[0.5, -3.0], [2.0, 1.0]])
    assert largest_magnitude(table) == 3.0
    assert all(size <= 8 for size in _storages_made(lambda: largest_magnitude(table)))  # scalars only
    table[1, 1] = math.nan
    assert math.isnan(largest_magnitude(table))


class _RecordsWhatStaysAlive(nn.Module):
    """A rotary class whose forward takes an activation: it notes whether the sin tables it returned before are
    still held when it is called again."""

    built: ClassVar[list[_RecordsWhatStaysAlive]] = []

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.returned: list[weakref.ref] = []
        self.held_at_each_call: list[int] = []
        self.built.append(self)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.held_at_each_call.append(sum(ref() is not None for ref in self.returned))
        angles = position_ids[..., None].float() * self.inv_freq
        emb = torch.cat((angles, angles), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        self.returned.append(weakref.ref(sin))
        return cos, sin


def test_reading_a_forward_that_takes_an_activation_holds_no_earlier_output_whole() -> None:
    """Which reading applies is told from the first tensors of two forwards; the tables come from a forward of their
    own: no call finds an earlier call's whole output held."""
    [(recipe, tables)] = build.find_recipes(_RecordsWhatStaysAlive, 64)
    assert recipe.forward_call.reading == TABLES and tables.cos.shape == (64, build.HEAD_DIM)
    calls = [count for module in _RecordsWhatStaysAlive.built for count in module.held_at_each_call]
    assert len(calls) >= 3 and not any(calls)
