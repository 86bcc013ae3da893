"""The conditions under which a rotary class is built, each restoring every global it touches."""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch
from torch import nn

# The constructors DeepSpeed's zero.Init replaces (partition_parameters._add_tensor_creation_wrappers).
ZERO_INIT_CONSTRUCTORS: tuple[str, ...] = ("tensor", "empty", "zeros", "ones", "full", "arange", "eye", "randn")

# A minimal ZeRO-3 config for a single process; bf16 makes zero.Init's target dtype bfloat16.
DEEPSPEED_CONFIG: dict[str, Any] = {
    "train_batch_size": 1,
    "bf16": {"enabled": True},
    "zero_optimization": {"stage": 3},
}


class TriggerUnavailable(Exception):
    """The trigger cannot run in this environment (for example DeepSpeed is not importable)."""


def _no_context() -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


def _no_forward_context(module: nn.Module) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


def _keep_module(module: nn.Module) -> nn.Module:
    return module


@dataclass(frozen=True)
class Trigger:
    """One precision condition: what surrounds construction and forward, and what happens between them."""

    name: str
    description: str
    # The dtype of the activations a real model passes to forward under this condition; classes cast their
    # output to it, so it sets the final (harmless) rounding of the tables.
    activation_dtype: torch.dtype
    construction: Callable[[], contextlib.AbstractContextManager[None]] = field(default=_no_context)
    forward: Callable[[nn.Module], contextlib.AbstractContextManager[Any]] = field(default=_no_forward_context)
    after_construction: Callable[[nn.Module], nn.Module] = field(default=_keep_module)
    # Whether it can run in a process forked from the probe's: DeepSpeed sets up a process group, which two processes
    # cannot share.
    forks: bool = True


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """`torch.set_default_dtype(dtype)`, as `from_pretrained(torch_dtype=...)` sets it while `__init__` runs."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def _zero_init_constructor(
    original: Callable[..., torch.Tensor], target_dtype: torch.dtype, device: torch.device
) -> Callable[..., torch.Tensor]:
    """DeepSpeed's `zero_wrapper_for_fp_tensor_constructor`: default the device, cast floating results."""

    def constructor(*args: Any, **kwargs: Any) -> torch.Tensor:
        if kwargs.get("device") is None:
            kwargs["device"] = device
        tensor = original(*args, **kwargs)
        if tensor.is_floating_point():
            # DeepSpeed swaps `.data`, so the returned object keeps its identity with the new dtype.
            tensor.data = tensor.data.to(target_dtype)
        return tensor

    return constructor


def _zero_init_tensor_new(
    original_empty: Callable[..., torch.Tensor], target_dtype: torch.dtype, device: torch.device
) -> Callable[..., torch.Tensor]:
    """DeepSpeed's `get_new_tensor_fn_for_dtype`, installed as `torch.Tensor.__new__`."""

    def new_tensor(cls: type, *args: Any, **kwargs: Any) -> torch.Tensor:
        if not args:
            args = (0,)
        tensor = original_empty(0, device=device).new_empty(*args, **kwargs)
        if tensor.is_floating_point():
            tensor = tensor.to(target_dtype)
        return tensor

    return new_tensor


@contextlib.contextmanager
def zero_init_stand_in(
    target_dtype: torch.dtype = torch.bfloat16, device: torch.device | None = None
) -> Iterator[None]:
    """Patch the tensor constructors exactly as `deepspeed.zero.Init` does, without DeepSpeed.

    Only the constructor patching matters for rotary tables: zero.Init's other effects (partitioning parameters,
    wrapping `Module.apply` and `F.linear`) do not touch the values of buffers and plain tensors.
    """
    device = device or torch.device("cpu")
    originals = {name: getattr(torch, name) for name in ZERO_INIT_CONSTRUCTORS}
    had_own_new = "__new__" in torch.Tensor.__dict__
    original_new = torch.Tensor.__dict__.get("__new__")
    try:
        for name, original in originals.items():
            setattr(torch, name, _zero_init_constructor(original, target_dtype, device))
        torch.Tensor.__new__ = _zero_init_tensor_new(originals["empty"], target_dtype, device)
        yield
    finally:
        for name, original in originals.items():
            setattr(torch, name, original)
        if had_own_new:
            torch.Tensor.__new__ = original_new
        else:
            # Tensor inherits __new__ from torch._C.TensorBase; deleting ours restores exactly that.
            del torch.Tensor.__new__


def _free_local_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@functools.cache
def _import_deepspeed() -> ModuleType | str:
    """DeepSpeed ready for a single CPU process, or the reason it cannot be used (cached: one attempt per run)."""
    # A single-process "world"; values the user already set (a real launcher) win.
    for key, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0"), ("MASTER_ADDR", "127.0.0.1")):
        os.environ.setdefault(key, value)
    os.environ.setdefault("MASTER_PORT", str(_free_local_port()))
    try:
        # DeepSpeed logs to stdout; keep stdout for the report.
        with contextlib.redirect_stdout(sys.stderr):
            import deepspeed
            import deepspeed.comm.torch  # loaded so that its build_shm_op can be replaced below
    except Exception as error:  # any import failure means "not usable here", reported as such
        return f"deepspeed cannot be imported: {type(error).__name__}: {error}"
    # Its first init otherwise JIT-compiles a shared-memory op (~90 s) that one process never uses.
    sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None
    return deepspeed


def load_deepspeed() -> ModuleType:
    """Import DeepSpeed for the `deepspeed-zero-init` trigger, or raise TriggerUnavailable saying why.

    DeepSpeed picks its accelerator itself (CPU on a machine without GPUs; `DS_ACCELERATOR` overrides it).
    """
    deepspeed = _import_deepspeed()
    if isinstance(deepspeed, str):
        raise TriggerUnavailable(deepspeed)
    return deepspeed


@contextlib.contextmanager
def deepspeed_zero_init() -> Iterator[None]:
    """The real `deepspeed.zero.Init` with a bf16 ZeRO-3 config."""
    deepspeed = load_deepspeed()
    with contextlib.redirect_stdout(sys.stderr), deepspeed.zero.Init(config_dict_or_path=DEEPSPEED_CONFIG):
        yield


def deepspeed_gathered(module: nn.Module) -> contextlib.AbstractContextManager[Any]:
    """ZeRO-3 leaves parameters partitioned (empty) after construction; the engine gathers them around each
    forward, and so does this."""
    return load_deepspeed().zero.GatheredParameters(list(module.parameters()), modifier_rank=None)


def _autocast_bf16(*_module: nn.Module) -> contextlib.AbstractContextManager[None]:
    return torch.autocast("cpu", dtype=torch.bfloat16)


def _to_bf16(module: nn.Module) -> nn.Module:
    return module.to(torch.bfloat16)


TRIGGERS: dict[str, Trigger] = {
    trigger.name: trigger
    for trigger in (
        Trigger("fp32", "plain float32 construction", torch.float32),
        Trigger(
            "default-dtype-bf16",
            "torch.set_default_dtype(bfloat16) during __init__",
            torch.bfloat16,
            construction=functools.partial(default_dtype, torch.bfloat16),
        ),
        Trigger(
            "default-dtype-fp16",
            "torch.set_default_dtype(float16) during __init__",
            torch.float16,
            construction=functools.partial(default_dtype, torch.float16),
        ),
        Trigger(
            "zero-init-bf16",
            "stand-in for deepspeed.zero.Init's constructor patching, bf16",
            torch.bfloat16,
            construction=zero_init_stand_in,
        ),
        Trigger(
            "deepspeed-zero-init",
            "real deepspeed.zero.Init, bf16 ZeRO-3 config",
            torch.bfloat16,
            construction=deepspeed_zero_init,
            forward=deepspeed_gathered,
            forks=False,
        ),
        Trigger(
            "to-bf16",
            "built in float32, then module.to(torch.bfloat16)",
            torch.bfloat16,
            after_construction=_to_bf16,
        ),
        Trigger(
            "autocast-bf16",
            "torch.autocast('cpu', bfloat16) around construction and forward",
            torch.bfloat16,
            construction=_autocast_bf16,
            forward=_autocast_bf16,
        ),
    )
}
