"""The rope codemod keeps what correct code computes (issue 15, shapes 3 to 5).

Each rotary class of the bundled fixtures is built from its hazard file (the original) and from its fixed twin (the
output of `rope-lint fix --unsafe-fixes`), and compared in fp32 for positions 0..4095: the same values, dtype and
shape, and the same state_dict keys and shapes. The fixed classes must also work where training frameworks build
models: under `torch.set_default_device(...)`, under `with torch.device("meta")`, and on `meta` materialised with
`to_empty()` and the class's own init. The meta device stands in for an accelerator: a table left on the CPU meets a
meta input and fails, as it would meet a CUDA one.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from helpers import REPO

POSITIONS = 4096
DIM = 64


@dataclass(frozen=True)
class Case:
    fixture: str
    cls: str
    kwargs: dict[str, Any]
    arguments: Callable[[torch.device], tuple[Any, ...]]  # forward's arguments for positions 0..4095, on a device

    def __str__(self) -> str:
        return "-".join([self.cls, *(str(value) for key, value in self.kwargs.items() if key == "rope_type")])


def activations(device: torch.device) -> tuple[Any, ...]:
    return (torch.ones(1, POSITIONS, DIM, device=device),)


def activations_and_positions(device: torch.device) -> tuple[Any, ...]:
    return torch.ones(1, POSITIONS, DIM, device=device), torch.arange(POSITIONS, device=device)[None]


CASES = [
    # Shape 3: a runtime method takes a length, a device, a shape or a function besides (or instead of) a tensor.
    Case(
        "rotary_device_source",
        "LengthFirstRotaryEmbedding",
        {"dim": DIM},
        lambda device: (POSITIONS, *activations(device)),
    ),
    Case("rotary_device_source", "DeviceArgumentRotaryEmbedding", {"dim": DIM}, lambda device: (POSITIONS, device)),
    Case(
        "rotary_device_source",
        "GridRotaryEmbedding",
        {"dim": DIM},
        lambda device: (torch.ones(1, 3, 64, POSITIONS // 64, device=device),),
    ),
    Case(
        "rotary_device_source",
        "Float32CacheRotaryEmbedding",
        {"dim": DIM, "max_positions": POSITIONS},
        activations_and_positions,
    ),
    # Shape 4: tables kept as buffers, and positions made where the default device is.
    Case("rotary_default_device", "CheckpointedRotaryEmbedding", {"dim": DIM}, activations_and_positions),
    Case("rotary_default_device", "SequenceRotaryEmbedding", {"dim": DIM}, activations),
    Case("rotary_default_device", "ScaledRotaryEmbedding", {"dim": DIM}, activations_and_positions),
    Case("rotary_default_device", "ScaledCheckpointRotaryEmbedding", {"dim": DIM}, activations_and_positions),
    # Shape 5: tables from functions outside the class, and classes that initialise them again.
    Case("rotary_meta_init", "SharedFrequencyRotaryEmbedding", {"dim": DIM}, activations_and_positions),
    Case(
        "rotary_meta_init",
        "ConfiguredRotaryEmbedding",
        {"dim": DIM, "rope_type": "scaled", "max_positions": POSITIONS},
        activations_and_positions,
    ),
    # Issue 19: tables read through their copy on the input's device, and updates outside the class that replace
    # them or write into them in place.
    Case(
        "rotary_cache",
        "CachedRotaryEmbedding",
        {"dim": DIM, "max_position_embeddings": POSITIONS},
        lambda device: (*activations(device), POSITIONS),
    ),
    Case("rotary_updates", "UpdatedRotaryEmbedding", {"dim": DIM}, activations_and_positions),
    Case("rotary_updates", "UpdatedRotaryEmbedding", {"dim": DIM, "rope_type": "long"}, activations_and_positions),
]
META = torch.device("meta")
CPU = torch.device("cpu")


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{path.parent.name}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_MODULES: dict[Path, ModuleType] = {}


def build(case: Case, kind: str) -> torch.nn.Module:
    """The case's class from `fixtures/<kind>/` ("hazards": the original; "fixed": the codemod's output)."""
    path = REPO / "fixtures" / kind / f"{case.fixture}.py"
    if path not in _MODULES:
        _MODULES[path] = load(path)
    return getattr(_MODULES[path], case.cls)(**case.kwargs)


def outputs(module: torch.nn.Module, case: Case, device: torch.device) -> list[torch.Tensor]:
    with torch.no_grad():
        result = module(*case.arguments(device))
    return list(result) if isinstance(result, tuple) else [result]


def assert_same(fixed: list[torch.Tensor], original: list[torch.Tensor]) -> None:
    assert len(fixed) == len(original)
    for got, expected in zip(fixed, original, strict=True):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert expected.shape[-2] * expected.shape[-1] >= POSITIONS  # every position was compared
        scale = expected.abs().max().item()
        assert (got - expected).abs().max().item() <= 1e-6 * scale


@contextmanager
def default_device(device: torch.device) -> Iterator[None]:
    before = torch.get_default_device()
    torch.set_default_device(device)
    try:
        yield
    finally:
        torch.set_default_device(before)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_fixed_class_computes_what_the_original_computes_in_fp32(case: Case) -> None:
    assert_same(outputs(build(case, "fixed"), case, CPU), outputs(build(case, "hazards"), case, CPU))


@pytest.mark.parametrize("case", CASES, ids=str)
def test_fixed_class_keeps_the_state_dict_keys_and_shapes(case: Case) -> None:
    def layout(module: torch.nn.Module) -> dict[str, tuple[torch.Size, torch.dtype]]:
        return {key: (value.shape, value.dtype) for key, value in module.state_dict().items()}

    assert layout(build(case, "fixed")) == layout(build(case, "hazards"))


@pytest.mark.parametrize("case", CASES, ids=str)
def test_fixed_class_works_under_a_default_device(case: Case) -> None:
    """Built and called under `torch.set_default_device`: its outputs and buffers are where the original's are."""
    with default_device(META):
        original, fixed = build(case, "hazards"), build(case, "fixed")
        expected, got = outputs(original, case, META), outputs(fixed, case, META)
    assert [tensor.device for tensor in got] == [tensor.device for tensor in expected] == [META] * len(expected)
    # The buffers it keeps (a persistent table keeps its state_dict key) are on the default device, as the original's.
    assert {name: buffer.device for name, buffer in fixed.named_buffers()} == {
        name: buffer.device for name, buffer in original.named_buffers() if name in dict(fixed.named_buffers())
    }
    # So are its parameters, which are no tables: made on the CPU with them, they would stay there.
    assert {name: p.device for name, p in fixed.named_parameters()} == {
        name: p.device for name, p in original.named_parameters()
    }


@pytest.mark.parametrize("case", CASES, ids=str)
def test_fixed_class_runs_on_a_torch_without_get_default_device(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    """`torch.get_default_device` came with torch 2.3, and transformers 4.37 supports torch 1.11 on: the fixed class
    is built and called without it, and what it keeps still goes to the default device."""
    monkeypatch.delattr(torch, "get_default_device")
    assert_same(outputs(build(case, "fixed"), case, CPU), outputs(build(case, "hazards"), case, CPU))
    with torch.device(META):
        fixed = build(case, "fixed")
    assert {tensor.device for tensor in [*fixed.buffers(), *fixed.parameters()]} <= {META}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_fixed_class_built_under_a_meta_context_runs_on_meta_inputs(case: Case) -> None:
    """Built under `with torch.device("meta")`, then called, outside it, with meta inputs."""
    with torch.device(META):
        original, fixed = build(case, "hazards"), build(case, "fixed")
    expected, got = outputs(original, case, META), outputs(fixed, case, META)
    assert [tensor.device for tensor in got] == [tensor.device for tensor in expected] == [META] * len(expected)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_fixed_class_materialised_from_meta_computes_what_the_original_computes(case: Case) -> None:
    """Built on meta, materialised with `to_empty()`, initialised by its own init: the original's fp32 results."""
    with torch.device(META):
        fixed = build(case, "fixed")
    fixed.to_empty(device=CPU)
    if hasattr(fixed, "reset_parameters"):
        fixed.reset_parameters()
    assert_same(outputs(fixed, case, CPU), outputs(build(case, "hazards"), case, CPU))


def tables(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The float32 tables the fixed class keeps as plain attributes: its masters, on the CPU."""
    return {
        name: value
        for name, value in vars(module).items()
        if isinstance(value, torch.Tensor) and value.dtype == torch.float32
    }


@pytest.mark.parametrize("case", CASES, ids=str)
def test_fixed_class_moves_between_devices_and_dtypes_and_keeps_its_float32_tables(case: Case) -> None:
    """cpu -> meta -> cpu, then bf16 -> fp32, as users move models: every output is on the input's device and in
    its dtype, the results on the CPU are the first ones again, and the float32 tables are never rounded. Back from
    meta with `to_empty()`, as a module with buffers must come (their data is gone): the tables are not buffers."""
    fixed = build(case, "fixed")
    first = outputs(fixed, case, CPU)
    masters = {name: table.clone() for name, table in tables(fixed).items()}
    fixed.to(META)
    for _ in range(2):
        assert {tensor.device for tensor in outputs(fixed, case, META)} == {META}
    fixed.to_empty(device=CPU)
    if hasattr(fixed, "reset_parameters"):  # `to_empty()` leaves parameters uninitialised, tables or not
        fixed.reset_parameters()
    assert all(torch.equal(got, expected) for got, expected in zip(outputs(fixed, case, CPU), first, strict=True))
    fixed.to(torch.bfloat16)
    arguments = [
        a.bfloat16() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in case.arguments(CPU)
    ]
    with torch.no_grad():
        low, original_low = fixed(*arguments), build(case, "hazards").to(torch.bfloat16)(*arguments)
    low, original_low = (list(result) if isinstance(result, tuple) else [result] for result in (low, original_low))
    # The late cast: the float32 result rounded once, at the end, to the dtype the original returns.
    for got, fp32, original in zip(low, first, original_low, strict=True):
        assert got.dtype == original.dtype and torch.equal(got, fp32.to(original.dtype))
    fixed.to(torch.float32)
    assert all(torch.equal(got, expected) for got, expected in zip(outputs(fixed, case, CPU), first, strict=True))
    after = tables(fixed)
    assert masters and after.keys() >= masters.keys()
    assert all(after[name].device == CPU and torch.equal(after[name], table) for name, table in masters.items())


def test_a_class_whose_construction_reads_a_buffer_the_rewrite_would_keep_is_left_working() -> None:
    """Its table is built while it is constructed from a buffer under a name of its own, which a rewrite would keep on
    the default device beside tables computed on the CPU: the codemod leaves the class's tables alone, and it still
    builds under a default device and computes what the original computes."""
    case = Case("rotary_default_device", "BufferFrequenciesRotaryEmbedding", {"dim": DIM}, activations)
    fixed = (REPO / "fixtures" / "fixed" / "rotary_default_device.py").read_text()
    kept = 'self.register_buffer("freqs", freqs, persistent=False)'
    assert fixed.count(kept) == 1 and "int64" in fixed.split(kept)[1]  # only the positions were rewritten
    assert_same(outputs(build(case, "fixed"), case, CPU), outputs(build(case, "hazards"), case, CPU))
    for place in (default_device(META), torch.device(META)):
        with place:
            module = build(case, "fixed")
        assert {tensor.device for tensor in outputs(module, case, META)} == {META}


def test_an_update_outside_the_class_writes_into_the_copy_that_forward_reads() -> None:
    """A long-context update (`switch_frequencies`) writes the long or the short frequencies in place: into the copy
    on the input's device, the same tensor every call (CUDA graphs replay its address), never into the float32
    master; and on the CPU the fixed class computes what the original computes, long and short alike."""
    case = next(case for case in CASES if case.kwargs.get("rope_type") == "long")
    fixed = build(case, "fixed").to(META)
    master = fixed.inv_freq.clone()
    copies = []
    for _ in range(2):
        outputs(fixed, case, META)
        copies.append(vars(fixed)["_rope_tables_on_device"]["inv_freq", META][1])
    assert copies[0] is copies[1] and copies[0].device == META
    assert fixed.inv_freq.device == CPU and torch.equal(fixed.inv_freq, master)
    original, fixed = build(case, "hazards"), build(case, "fixed")
    for length in (32, 128, 32):  # short, long (past 64 positions), short again
        short = Case(case.fixture, case.cls, case.kwargs, lambda device, n=length: (
            torch.ones(1, n, DIM, device=device), torch.arange(n, device=device)[None]
        ))  # fmt: skip
        got, expected = outputs(fixed, short, CPU), outputs(original, short, CPU)
        assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))


def test_an_update_outside_the_class_that_replaces_the_table_computes_what_the_original_computes() -> None:
    """The dynamic update replaces `inv_freq` when the positions outgrow it: the fixed class follows it."""
    original, fixed = (build(Case("rotary_updates", "UpdatedRotaryEmbedding", {"dim": DIM, "rope_type": "dynamic"},
                                  activations_and_positions), kind) for kind in ("hazards", "fixed"))  # fmt: skip
    for length in (32, 96, 200):
        arguments = (torch.ones(1, length, DIM), torch.arange(length)[None])
        with torch.no_grad():
            got, expected = fixed(*arguments), original(*arguments)
        assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
    assert fixed.max_positions == original.max_positions == 200
