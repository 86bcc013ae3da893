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
        return self.cls


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
    # Shape 5: tables from functions outside the class, and classes that initialise them again.
    Case("rotary_meta_init", "SharedFrequencyRotaryEmbedding", {"dim": DIM}, activations_and_positions),
    Case(
        "rotary_meta_init",
        "ConfiguredRotaryEmbedding",
        {"dim": DIM, "rope_type": "scaled", "max_positions": POSITIONS},
        activations_and_positions,
    ),
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
