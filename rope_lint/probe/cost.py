"""What a rotary class costs a model at run time on an accelerator, measured on the CPU with the meta device standing
in for the accelerator (`--runtime-cost`):

- cross-device copies in a steady-state forward: the class is built on the CPU and moved with `.to("meta")`, as a
  user moves a model; forward is called twice on meta inputs, and the second call's ops that read or write tensors
  on more than one device are counted (a table kept on the CPU and moved to the input's device in every forward is
  one host-to-device copy per call, and on a GPU a stream synchronisation; CUDA graphs refuse it);
- the same count in a steady-state forward that `torch.compile` compiled, in its graphs: TorchDynamo runs what it
  traced, so a per-device cache that it does not guard on is traced empty once and copied into in every call;
- whether `torch.compile(module, fullgraph=True)` can compile forward: TorchDynamo traces it (`torch._dynamo.explain`,
  which needs no compiler backend) on CPU inputs, and the graph breaks are listed with their reasons.

A CPU tensor of zero dimensions mixed with meta tensors is a scalar to torch, not a copy. torch has no autocast for
the meta device: an autocast block that the input's device names (`torch.autocast(x.device.type, enabled=False)`)
is the CPU's there, which an accelerator's stands for.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from rope_lint.probe.build import Recipe, construct, describe, forward_arguments

META = torch.device("meta")
CPU = torch.device("cpu")


@dataclass(frozen=True)
class RuntimeCost:
    copies: int | None  # cross-device copies in a steady-state forward on the meta device; None: not measured
    compiled_copies: int | None  # the same, compiled by TorchDynamo (in its graphs); None: not measured
    graph_breaks: tuple[str, ...] | None  # TorchDynamo's graph breaks, () when it compiles; None: not traced
    problems: tuple[str, ...] = ()  # why something was not measured

    @property
    def compiles(self) -> bool | None:
        return None if self.graph_breaks is None else not self.graph_breaks

    def describe(self) -> str:
        copies = "copies not measured" if self.copies is None else f"{self.copies} cross-device copies per forward"
        if self.compiled_copies is not None:
            copies += f" ({self.compiled_copies} under torch.compile)"
        if self.graph_breaks is None:
            compiled = "compile not traced"
        elif self.graph_breaks:
            compiled = f"{len(self.graph_breaks)} graph breaks under torch.compile: {self.graph_breaks[0]}"
        else:
            compiled = "compiles with fullgraph=True"
        return "; ".join([copies, compiled, *self.problems])


class _CrossDeviceOps(TorchDispatchMode):
    """Counts the ops whose tensors (arguments and results) lie on more than one device."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        output = func(*args, **(kwargs or {}))
        tensors = [value for value in tree_flatten((args, kwargs, output))[0] if isinstance(value, torch.Tensor)]
        devices = {tensor.device for tensor in tensors if tensor.dim() or tensor.device != CPU}
        self.count += len(devices) > 1
        return output


@contextmanager
def _meta_autocast_as_cpu() -> Iterator[None]:
    """`torch.autocast(device_type="meta", ...)` as the CPU's (see the module docstring)."""
    original = torch.autocast.__init__

    @functools.wraps(original)  # its signature, by which TorchDynamo binds the arguments of an autocast block it traces
    def init(self: torch.autocast, device_type: str, *args: Any, **kwargs: Any) -> None:
        original(self, "cpu" if device_type == "meta" else device_type, *args, **kwargs)

    torch.autocast.__init__ = init  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.autocast.__init__ = original  # type: ignore[method-assign]


def _moved_to_meta(recipe: Recipe) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The class built on the CPU and moved to the meta device, as a user moves a model, and its forward's arguments
    made there."""
    return construct(recipe).to(META), forward_arguments(recipe, torch.float32, META)


def steady_state_copies(recipe: Recipe) -> int:
    """Cross-device copies in the second forward of the class moved to the meta device (see the module docstring)."""
    module, arguments = _moved_to_meta(recipe)
    with torch.no_grad(), _meta_autocast_as_cpu():
        module(**arguments)
        with _CrossDeviceOps() as counter:
            module(**arguments)
    return counter.count


def compiled_steady_state_copies(recipe: Recipe) -> int:
    """Cross-device copies in the graphs of a steady-state forward of the class moved to the meta device and compiled
    by TorchDynamo, the graphs run eagerly: what is traced is what runs, so a per-device cache that TorchDynamo does
    not guard on is traced empty and copied into in every call. Counted in the third call, after a recompilation that
    the first call's writes may cause."""
    module, arguments = _moved_to_meta(recipe)
    counts: list[int] = []

    def counting_backend(graph: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        def run(*inputs: Any) -> Any:
            with _CrossDeviceOps() as counter:  # entered in the graph: a mode around the compiled call runs it eagerly
                outputs = graph(*inputs)
            counts.append(counter.count)
            return outputs

        return run

    torch._dynamo.reset()
    compiled = torch.compile(module, backend=counting_backend)
    try:
        with torch.no_grad(), _meta_autocast_as_cpu():
            for _ in range(3):
                counts.clear()
                compiled(**arguments)
    finally:
        torch._dynamo.reset()
    return sum(counts)


def graph_breaks(recipe: Recipe) -> tuple[str, ...]:
    """TorchDynamo's graph breaks in forward on CPU inputs, each with its reason; () when it compiles whole."""
    module = construct(recipe)
    arguments = forward_arguments(recipe, torch.float32, CPU)
    torch._dynamo.reset()  # nothing traced for another class is reused, and no cache limit is reached
    try:
        with torch.no_grad():
            explanation = torch._dynamo.explain(module)(**arguments)
    finally:
        torch._dynamo.reset()
    return tuple(_one_line(reason.reason) for reason in explanation.break_reasons)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def runtime_cost(recipe: Recipe) -> RuntimeCost:
    """The measurements of one class; a class that raises in one is reported with the reason."""
    problems = []
    try:
        copies = steady_state_copies(recipe)
    except Exception as error:
        copies = None
        problems.append(f"on the meta device: {describe(error)}")
    try:
        compiled_copies = compiled_steady_state_copies(recipe) if copies is not None else None
    except Exception as error:
        compiled_copies = None
        problems.append(f"compiled on the meta device: {describe(error)}")
    try:
        breaks = graph_breaks(recipe)
    except Exception as error:
        breaks = None
        problems.append(f"under TorchDynamo: {describe(error)}")
    return RuntimeCost(copies, compiled_copies, breaks, tuple(problems))
