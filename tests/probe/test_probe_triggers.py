"""The triggers: the zero.Init stand-in patches exactly as DeepSpeed does, and every trigger restores global state."""

from __future__ import annotations

import pytest
import torch

from rope_lint.probe import TRIGGER_NAMES
from rope_lint.probe.triggers import (
    TRIGGERS,
    ZERO_INIT_CONSTRUCTORS,
    default_dtype,
    zero_init_stand_in,
)


def _global_state() -> tuple:
    return (
        torch.get_default_dtype(),
        tuple(getattr(torch, name) for name in ZERO_INIT_CONSTRUCTORS),
        "__new__" in torch.Tensor.__dict__,
        torch.is_autocast_enabled("cpu"),
    )


def test_every_trigger_name_has_one_trigger():
    assert tuple(TRIGGERS) == TRIGGER_NAMES


@pytest.mark.parametrize("name", [name for name in TRIGGER_NAMES if name != "deepspeed-zero-init"])
def test_triggers_restore_global_state_even_on_exceptions(name):
    trigger = TRIGGERS[name]
    before = _global_state()
    module = torch.nn.Linear(2, 2)
    for context in (trigger.construction(), trigger.forward(module)):
        with pytest.raises(RuntimeError, match="model code failed"), context:
            raise RuntimeError("model code failed")
        assert _global_state() == before


def test_stand_in_casts_floating_constructors_and_leaves_integers():
    with zero_init_stand_in():
        floating = [
            torch.arange(300, dtype=torch.float32),
            torch.tensor([1.5, 2.5]),
            torch.zeros(2),
            torch.ones(2, dtype=torch.float64),
            torch.full((2,), 3.0),
            torch.empty(2),
            torch.eye(2),
            torch.randn(2),
            torch.Tensor(3),  # through the patched Tensor.__new__
        ]
        integers = [torch.arange(300), torch.tensor([1, 2]), torch.zeros(2, dtype=torch.int64)]
        # Methods and results of arithmetic are not constructors: DeepSpeed leaves them alone.
        upcast = torch.arange(4).float()
    assert all(tensor.dtype == torch.bfloat16 for tensor in floating)
    assert all(tensor.dtype == torch.int64 for tensor in integers)
    assert upcast.dtype == torch.float32
    # The point of it all: bf16 holds integers exactly only up to 256.
    assert floating[0][257].item() == 256.0
    assert all(tensor.device.type == "cpu" for tensor in floating + integers)


def test_stand_in_keeps_a_device_the_call_names():
    with zero_init_stand_in(device=torch.device("meta")):
        given = torch.zeros(2, device="cpu")
        filled_in = torch.zeros(2)
    assert given.device.type == "cpu"
    assert filled_in.device.type == "meta"


def test_default_dtype_affects_literals_and_true_division():
    with default_dtype(torch.bfloat16):
        assert torch.arange(4.0).dtype == torch.bfloat16
        assert (torch.arange(0, 8, 2) / 8).dtype == torch.bfloat16
    assert torch.get_default_dtype() == torch.float32
