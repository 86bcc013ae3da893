"""A plain function, original and fixed, called on the same arguments derived from its signature and compared.

Each parameter gets a value from its default, its annotation (`int`, `float`, `bool`, `torch.Tensor`) or its name (a
dimension, a length, a base); a parameter that none of these decides is tried as a float32 tensor of a few shapes,
then as an int. A parameter that names an object the function cannot be handed blind (a config, a module, a
callable) makes the function one that could not be called, and the report says which.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import torch

from rope_lint.output.fix_report import FAILED, NOT_CALLED, VERIFIED
from rope_lint.probe.build import describe
from rope_lint.verify.compare import TOLERANCE, Incomparable, Mismatch, agreement, in_float64, relative_difference

# Names whose value cannot be made up: an object of the model's own making, or code to call.
_OPAQUE_NAMES = frozenset(
    {"config", "cfg", "model", "module", "self", "cls", "fn", "func", "function", "callback", "layer", "args"}
)
_DIMENSION_NAMES = frozenset({"dim", "head_dim", "rotary_dim", "embed_dim", "embedding_dim", "hidden_size", "d_model"})
_LENGTH_NAMES = frozenset(
    {"n", "seq_len", "seqlen", "seq_length", "length", "max_len", "max_seq_len", "num_positions", "end", "size"}
)
_BASE_NAMES = frozenset({"base", "theta", "rope_theta"})
# Names of a count or a length: `num_positions`, `max_len`, `n_heads`, `window_size`. Any value serves a comparison of
# the original with the fixed code; the probe, which measures tables over positions, guesses none of these (a table
# built for 16 positions and grown in forward measures clean where the model's 4096 are not).
_COUNT_PREFIXES = ("num_", "n_", "max_")
_COUNT_SUFFIXES = ("_size", "_len", "_length")
# The last word of a name that counts a model's parts, not annotated otherwise: `heads`, `kv_heads`, `depth`.
_PART_COUNTS = frozenset({"heads", "layers", "groups", "buckets", "depth"})
# Annotations written as strings (`from __future__ import annotations`) that decide a value.
_ANNOTATIONS = {"int": int, "float": float, "bool": bool, "torch.Tensor": torch.Tensor, "Tensor": torch.Tensor}
# Tensor shapes tried, in order, for a parameter taken as a tensor: every such parameter gets the same shape.
_TENSOR_SHAPES = ((2, 8, 16), (16,), (4, 16))


class NotCallable(Exception):
    """No arguments could be derived; the message says which parameter stopped it."""


def check_function(original: Callable[..., Any], fixed: Callable[..., Any]) -> tuple[str, str]:
    """(status, detail): call both on the first derived arguments the original accepts, and compare the results."""
    try:
        candidates = list(_argument_sets(original))
    except NotCallable as reason:
        return NOT_CALLED, str(reason)
    reasons = []
    for arguments in candidates:
        try:
            expected = _call(original, arguments)
        except Exception as error:  # this guess of the arguments does not suit the function; try the next
            reasons.append(describe(error))
            continue
        try:
            result = _call(fixed, arguments)
        except Exception as error:
            return FAILED, f"the fixed function raises where the original returns: {describe(error)}"
        try:
            difference = relative_difference(expected, result)
        except Mismatch as mismatch:
            return FAILED, f"fp32 {mismatch}"
        except Incomparable as incomparable:
            return NOT_CALLED, f"called, but its {incomparable}"
        agreed = agreement(expected, result, difference, functools.partial(_in_float64, original, fixed, arguments))
        if agreed is None:
            return FAILED, f"fp32 results differ by {difference:.3g} relative (at most {TOLERANCE:g} allowed)"
        return VERIFIED, f"{agreed}, called with {shown_arguments(arguments)}"
    return NOT_CALLED, f"no derived arguments suit it: {reasons[0]}"


def _in_float64(original: Callable[..., Any], fixed: Callable[..., Any], arguments: dict[str, Any]) -> tuple[Any, Any]:
    """What each function returns on the arguments in float64 (`compare.agreement`)."""
    return _call(original, in_float64(arguments)), _call(fixed, in_float64(arguments))


def _call(function: Callable[..., Any], arguments: dict[str, Any]) -> Any:
    """The function's result on a deep copy of the arguments (a function may change a tensor in place), with the
    global RNG seeded the same for each call."""
    torch.manual_seed(0)
    with torch.no_grad():
        return function(**copy.deepcopy(arguments))


def _argument_sets(function: Callable[..., Any]) -> Iterator[dict[str, Any]]:
    """Keyword arguments to try, likeliest first. Raises NotCallable when a parameter cannot be given a value."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError) as error:
        raise NotCallable(f"its signature cannot be read: {error}") from error
    fixed: dict[str, Any] = {}
    guessed: list[str] = []
    for parameter in parameters:
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise NotCallable(f"parameter {parameter.name!r} is positional-only")
        if parameter.default is not inspect.Parameter.empty:
            continue  # its default is what a caller who does not think about it passes
        value = value_for(parameter)
        if value is GUESS:
            guessed.append(parameter.name)
        else:
            fixed[parameter.name] = value
    tensors = [name for name, value in fixed.items() if value is TENSOR]
    if not guessed and not tensors:
        yield fixed
        return
    generator = torch.Generator().manual_seed(0)
    for shape in _TENSOR_SHAPES:  # every tensor of one call has the same shape, which elementwise code needs
        yield {**fixed, **{name: torch.randn(shape, generator=generator) for name in [*tensors, *guessed]}}
    if guessed:
        tensor_values = {name: torch.randn(_TENSOR_SHAPES[0], generator=generator) for name in tensors}
        yield {**fixed, **tensor_values, **dict.fromkeys(guessed, 16)}


GUESS = object()  # no annotation or name decides: tried as a tensor, then as an int
TENSOR = object()  # a tensor, of the shape being tried


def value_for(parameter: inspect.Parameter) -> Any:
    """A parameter's value from its annotation or name; TENSOR for a tensor of a shape still to choose, GUESS where
    neither decides. Raises NotCallable where no value can be derived (a config, a module, a callable)."""
    annotation = parameter.annotation
    if isinstance(annotation, str):
        annotation = _ANNOTATIONS.get(annotation, annotation)
    name = parameter.name
    if name in _OPAQUE_NAMES:
        raise NotCallable(f"parameter {name!r} needs an object that cannot be derived from its signature")
    if annotation is torch.Tensor:
        return TENSOR
    if annotation is bool:
        return False
    if annotation is torch.dtype or name == "dtype":
        return torch.float32
    if annotation is torch.device or name == "device" or name.startswith("device_"):  # `device_str` too
        return torch.device("cpu")
    if name in _BASE_NAMES or annotation is float:
        return 10000.0 if name in _BASE_NAMES else 0.5
    if name.endswith(("_idx", "_index")):
        return 0  # an index into something of the sizes above
    if name in _DIMENSION_NAMES or name.endswith("_dim"):
        return 64
    if name in _LENGTH_NAMES or annotation is int or name.startswith(_COUNT_PREFIXES) or name.endswith(_COUNT_SUFFIXES):
        return 16
    if name.rpartition("_")[2] in _PART_COUNTS and annotation is inspect.Parameter.empty:
        return 4  # a few parts, which divide the widths above
    if annotation is not inspect.Parameter.empty and not isinstance(annotation, str):
        raise NotCallable(f"parameter {name!r} is annotated {getattr(annotation, '__name__', annotation)}")
    return GUESS


def shown_arguments(arguments: dict[str, Any]) -> str:
    """The arguments of a call, for a report line: tensors by dtype and shape (`x=float32[2, 16]`)."""
    shown = []
    for name, value in arguments.items():
        if isinstance(value, torch.Tensor):
            shown.append(f"{name}={str(value.dtype).removeprefix('torch.')}{list(value.shape)}")
        else:
            shown.append(f"{name}={value!r}")
    return ", ".join(shown) or "no arguments"
