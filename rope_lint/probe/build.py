"""Construct a rotary class from its signature and read the cos/sin tables its forward returns.

A `Recipe` (constructor arguments and forward call) is worked out once, by trying the plausible ways under plain
float32, and then reused unchanged for every trigger and for the float64 reference.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

# Small sizes for config-style classes: two heads of 128, the head dim of Llama and most models, at which the
# tables' errors were measured.
HEAD_DIM = 128
CONFIG_SIZES: dict[str, int] = {
    "hidden_size": 2 * HEAD_DIM,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": HEAD_DIM,
}
DEFAULT_BASE = 10000.0

# Old-style constructor parameters, by name.
_DIM_NAMES = frozenset({"dim", "head_dim", "rotary_dim", "rotary_ndims", "embed_dim", "embedding_dim", "rope_dim"})
_MAX_POSITION_NAMES = frozenset(
    {"max_position_embeddings", "max_positions", "max_seq_len", "max_seq_length", "max_len", "max_length"}
)
_BASE_NAMES = frozenset({"base", "theta", "rope_theta", "rotary_emb_base", "rope_base"})
# Forward parameters, by name.
_SEQ_LEN_NAMES = frozenset({"seq_len", "seqlen", "seq_length", "max_seq_len", "kv_seq_len", "sequence_length"})
_POSITION_NAMES = frozenset({"position_ids", "positions", "position_idx", "pos_ids", "pos"})
_OFFSET_NAMES = frozenset({"offset", "past_key_values_length", "past_length", "start_pos", "seq_len_offset"})


class CannotBuild(Exception):
    """The class could not be constructed or its tables read; the message is the reason reported."""


@dataclasses.dataclass(frozen=True)
class Tables:
    """cos and sin for positions 0..N-1, as float64 on CPU, shape [N, D]."""

    cos: torch.Tensor
    sin: torch.Tensor


@dataclasses.dataclass(frozen=True)
class ForwardCall:
    """How forward is called: which parameter gets x, the sequence length, the positions or an offset of 0."""

    roles: tuple[tuple[str, str], ...]  # (parameter name, role), role in {"x", "seq_len", "positions", "offset"}
    fixed: tuple[tuple[str, Any], ...]  # keyword arguments passed as they are, such as layer_type
    x_shape: tuple[int, ...]
    positions_shape: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Everything needed to build one class and read its tables, and what a textbook RoPE of it would use."""

    cls: type[nn.Module]
    init_kwargs: dict[str, Any]
    forward_call: ForwardCall
    variant: str | None  # which of several tables of the class, such as "layer_type=sliding_attention"
    positions: int
    style: str  # "old-style" (dim, max_position_embeddings, base, ...) or "config"
    dim: int | None
    base: float | None
    linear_scaling: float


def _parameters(function: Any) -> list[inspect.Parameter]:
    """The parameters after `self`, or CannotBuild when the signature cannot be read."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError) as error:
        raise CannotBuild(f"cannot read the signature: {error}") from error
    return parameters[1:]


def _required(parameter: inspect.Parameter) -> bool:
    positional_or_keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return parameter.kind in positional_or_keyword and parameter.default is inspect.Parameter.empty


def _old_style_kwargs(cls: type[nn.Module], positions: int) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for parameter in _parameters(cls.__init__):
        if parameter.name in _DIM_NAMES:
            kwargs[parameter.name] = HEAD_DIM
        elif parameter.name in _MAX_POSITION_NAMES:
            kwargs[parameter.name] = positions
        elif parameter.name in _BASE_NAMES and _required(parameter):
            kwargs[parameter.name] = DEFAULT_BASE
        elif parameter.name in ("scaling_factor", "factor", "scale") and _required(parameter):
            kwargs[parameter.name] = 1.0
        elif parameter.name == "device" and _required(parameter):
            kwargs[parameter.name] = None
        elif _required(parameter):
            raise CannotBuild(f"constructor parameter {parameter.name!r} has no known value")
    if not any(name in _DIM_NAMES for name in kwargs):
        raise CannotBuild("constructor takes neither a config nor a rotary dimension")
    return kwargs


def _default_of(cls: type[nn.Module], names: frozenset[str]) -> Any:
    for parameter in _parameters(cls.__init__):
        if parameter.name in names and parameter.default is not inspect.Parameter.empty:
            return parameter.default
    return None


def _is_config_class(value: object) -> bool:
    return isinstance(value, type) and value.__name__.endswith("Config")


def _resolve_annotation(cls: type[nn.Module]) -> object:
    annotation = inspect.signature(cls.__init__).parameters["config"].annotation
    if isinstance(annotation, str):
        module = sys.modules.get(cls.__init__.__module__)
        annotation = getattr(module, annotation.strip("'\""), None)
    return annotation


def _sibling_config_classes(module_name: str) -> list[type]:
    """Config classes of `configuration_*.py` modules next to the modeling module, as model libraries lay them."""
    module = sys.modules.get(module_name)
    package_name, _, _ = module_name.rpartition(".")
    if module is None or not package_name or not getattr(module, "__file__", None):
        return []
    classes = []
    for path in sorted(Path(module.__file__).parent.glob("configuration_*.py")):
        try:
            sibling = importlib.import_module(f"{package_name}.{path.stem}")
        except Exception:  # an unusable sibling simply offers no candidates
            continue
        classes.extend(value for value in vars(sibling).values() if _is_config_class(value))
    return classes


def _config_candidates(cls: type[nn.Module]) -> list[type]:
    """Config classes to try, the likeliest first: the annotation, then same-module configs by shared name."""
    candidates: list[type] = []
    annotation = _resolve_annotation(cls)
    if _is_config_class(annotation):
        candidates.append(annotation)
    module_names = dict.fromkeys((cls.__module__, cls.__init__.__module__))
    found = [value for name in module_names for value in vars(sys.modules[name]).values() if _is_config_class(value)]
    if not found:
        found = [value for name in module_names for value in _sibling_config_classes(name)]

    def shared_prefix(config_cls: type) -> int:
        pairs = zip(config_cls.__name__, cls.__name__, strict=False)
        return next((index for index, (a, b) in enumerate(pairs) if a != b), len(config_cls.__name__))

    # Rotary tables belong to the text model of a composite config; prefer *TextConfig among equal prefixes.
    found.sort(key=lambda config_cls: (-shared_prefix(config_cls), "Text" not in config_cls.__name__))
    candidates.extend(config_cls for config_cls in dict.fromkeys(found) if config_cls not in candidates)
    return candidates


def _small_config(config_cls: type, positions: int) -> Any:
    sizes = {**CONFIG_SIZES, "max_position_embeddings": positions}
    try:
        return config_cls(**sizes)
    except Exception:  # a config that rejects some of these keywords: build its defaults, then set what it takes
        config = config_cls()
        for name, value in sizes.items():
            with contextlib.suppress(Exception):  # read-only (derived) or per-layer attributes keep their value
                setattr(config, name, value)
        return config


def _attribute(config: Any, name: str) -> Any:
    """A config attribute, or None when it is missing or refuses to be read (per-layer attributes raise)."""
    try:
        return getattr(config, name, None)
    except Exception:
        return None


def _config_rope(config: Any) -> tuple[int | None, float | None, float]:
    """Dim, base and linear scaling factor of a config, for a textbook RoPE."""
    heads = _attribute(config, "num_attention_heads")
    head_dim = _attribute(config, "head_dim") or (heads and (_attribute(config, "hidden_size") or 0) // heads) or None
    if head_dim is not None:
        head_dim = int(head_dim * (_attribute(config, "partial_rotary_factor") or 1.0))
    rope_parameters = _attribute(config, "rope_parameters") or {}
    rope_scaling = _attribute(config, "rope_scaling") or {}
    if not (isinstance(rope_parameters, dict) and isinstance(rope_scaling, dict)):
        return head_dim, None, 1.0
    base = _attribute(config, "rope_theta") or rope_parameters.get("rope_theta")
    kind = rope_scaling.get("type") or rope_scaling.get("rope_type") or rope_parameters.get("rope_type")
    factor = rope_scaling.get("factor") or rope_parameters.get("factor") or 1.0
    return head_dim, base, float(factor) if kind == "linear" else 1.0


def _constructions(cls: type[nn.Module], positions: int) -> Iterator[Recipe | str]:
    """The ways to construct the class, likeliest first: recipes with no forward call yet, or why one failed."""
    init_parameters = {parameter.name: parameter for parameter in _parameters(cls.__init__)}
    unset_call = ForwardCall((), (), (), ())
    if "config" not in init_parameters:
        kwargs = _old_style_kwargs(cls, positions)
        dim = next(value for name, value in kwargs.items() if name in _DIM_NAMES)
        base = kwargs.get(next((name for name in kwargs if name in _BASE_NAMES), ""), _default_of(cls, _BASE_NAMES))
        scaling = _default_of(cls, frozenset({"scaling_factor"})) if "Linear" in cls.__name__ else None
        yield Recipe(cls, kwargs, unset_call, None, positions, "old-style", dim, base, float(scaling or 1.0))
        return
    others = [parameter for name, parameter in init_parameters.items() if name != "config" and _required(parameter)]
    if others:
        raise CannotBuild(f"constructor parameter {others[0].name!r} has no known value")
    candidates = _config_candidates(cls)
    if not candidates:
        raise CannotBuild("takes a config, but no config class was found next to it")
    for config_cls in candidates:
        try:
            config = _small_config(config_cls, positions)
        except Exception as error:
            yield f"cannot create {config_cls.__name__}: {describe(error)}"
            continue
        yield Recipe(cls, {"config": config}, unset_call, None, positions, "config", *_config_rope(config))


def describe(error: BaseException) -> str:
    """One line for a report: the exception's type and the first line of its message (ours: the message)."""
    text = str(error) if isinstance(error, CannotBuild) else f"{type(error).__name__}: {error}".strip()
    return text.splitlines()[0] if text else type(error).__name__


def _forward_calls(cls: type[nn.Module], positions: int, layer_type: str | None) -> list[ForwardCall]:
    """The plausible ways to call forward, likeliest first: x as [1, N, D] or [1, 1, N, D], and positions as
    [1, N], [3, 1, N] (one row per multimodal section), [N] or [N, 2] (axial 2-D, both coordinates equal)."""
    roles: list[tuple[str, str]] = []
    fixed: dict[str, Any] = {}
    for parameter in _parameters(cls.forward):
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if parameter.name in _SEQ_LEN_NAMES:
            roles.append((parameter.name, "seq_len"))
        elif parameter.name in _POSITION_NAMES:
            roles.append((parameter.name, "positions"))
        elif parameter.name in _OFFSET_NAMES:
            roles.append((parameter.name, "offset"))
        elif parameter.name == "layer_type" and layer_type is not None:
            fixed[parameter.name] = layer_type
        elif not roles:  # the first parameter is the activation tensor
            roles.append((parameter.name, "x"))
        elif _required(parameter):
            raise CannotBuild(f"forward parameter {parameter.name!r} has no known value")
    x_shapes = [(1, positions, HEAD_DIM), (1, 1, positions, HEAD_DIM)]
    position_shapes = [(1, positions), (3, 1, positions), (positions,), (positions, 2)]
    if not any(role == "positions" for _, role in roles):
        position_shapes = [()]
    return [ForwardCall(tuple(roles), tuple(fixed.items()), x, p) for x in x_shapes for p in position_shapes]


def _layer_types(cls: type[nn.Module], module: nn.Module, recipe: Recipe) -> list[str | None]:
    """The layer types to probe one by one when forward takes `layer_type` (per-layer-type tables), else [None]."""
    if "layer_type" not in inspect.signature(cls.forward).parameters:
        return [None]
    config = recipe.init_kwargs.get("config")
    rope_parameters = _attribute(config, "rope_parameters")
    declared = (
        getattr(module, "layer_types", None)
        or _attribute(config, "layer_types")
        or [name for name, value in dict(rope_parameters or {}).items() if isinstance(value, dict)]
    )
    return list(dict.fromkeys(declared)) or [None]


def module_device(module: nn.Module) -> torch.device:
    """Where the module's tensors live (the accelerator under real zero.Init on a GPU machine), CPU if none."""
    for tensor in (*module.buffers(), *module.parameters()):
        return tensor.device
    return torch.device("cpu")


def _on_rows(table: torch.Tensor, positions: int) -> torch.Tensor:
    """[..., N, ...] -> float64 [N, D] on CPU, taking the first axis of length N as the positions."""
    table = table.detach()
    if table.is_complex():
        raise CannotBuild("complex table where a real one was expected")
    axis = next((index for index, size in enumerate(table.shape) if size == positions), None)
    if axis is None:
        raise CannotBuild(f"forward returned shape {tuple(table.shape)}, with no axis of {positions} positions")
    return table.movedim(axis, 0).reshape(positions, -1).to(device="cpu", dtype=torch.float64)


def tables_from_output(output: Any, positions: int) -> Tables:
    """Normalise what forward returned: (cos, sin), stacked [2, ...] cos/sin, complex cis, or angles."""
    if (
        isinstance(output, (tuple, list))
        and len(output) >= 2
        and all(isinstance(item, torch.Tensor) for item in output[:2])
    ):
        return Tables(_on_rows(output[0], positions), _on_rows(output[1], positions))
    if not isinstance(output, torch.Tensor):
        raise CannotBuild(f"forward returned {type(output).__name__}, not cos/sin tensors")
    output = output.detach()
    if output.is_complex():  # cos + i sin
        return Tables(_on_rows(output.real, positions), _on_rows(output.imag, positions))
    if output.shape[0] == 2 and positions != 2:  # torch.stack([cos, sin])
        return Tables(_on_rows(output[0], positions), _on_rows(output[1], positions))
    # One real table: the rotation angles; their cos/sin in float64 show the angle error.
    angles = _on_rows(output, positions)
    return Tables(angles.cos(), angles.sin())


def _position_ids(positions: int, shape: tuple[int, ...], device: torch.device) -> torch.Tensor | None:
    """0..N-1 as int64 along the axis of `shape` that has length N, repeated along the others."""
    if not shape:
        return None
    axis = shape.index(positions)
    view = [positions if index == axis else 1 for index in range(len(shape))]
    return torch.arange(positions, dtype=torch.int64, device=device).view(view).expand(shape)


def call_forward(module: nn.Module, recipe: Recipe, activation_dtype: torch.dtype) -> Tables:
    """Call forward as a model would: x in the activation dtype on the module's device, exact int64 positions."""
    device = module_device(module)
    call = recipe.forward_call
    values = {
        "x": torch.zeros(call.x_shape, dtype=activation_dtype, device=device),
        "seq_len": recipe.positions,
        "positions": _position_ids(recipe.positions, call.positions_shape, device),
        "offset": 0,
    }
    output = module(**{name: values[role] for name, role in call.roles}, **dict(call.fixed))
    return tables_from_output(output, recipe.positions)


def construct(recipe: Recipe) -> nn.Module:
    return recipe.cls(**recipe.init_kwargs)


def _first_working_call(module: nn.Module, construction: Recipe, layer_type: str | None) -> tuple[Recipe, Tables]:
    reasons = []
    for call in _forward_calls(construction.cls, construction.positions, layer_type):
        variant = None if layer_type is None else f"layer_type={layer_type}"
        recipe = dataclasses.replace(construction, forward_call=call, variant=variant)
        try:
            return recipe, call_forward(module, recipe, torch.float32)
        except Exception as error:
            reasons.append(describe(error))
    raise CannotBuild(f"forward: {reasons[0]}")


def find_recipes(cls: type[nn.Module], positions: int) -> list[tuple[Recipe, Tables] | CannotBuild]:
    """Find how to build the class and call it, trying each way under plain float32; each recipe comes with its
    fp32 tables. A class with per-layer-type tables gets one entry per layer type (a CannotBuild where that type
    fails). Raises CannotBuild with the reason of the likeliest way when no way works.
    """
    reasons: list[str] = []
    for construction in _constructions(cls, positions):
        if isinstance(construction, str):
            reasons.append(construction)
            continue
        try:
            module = construct(construction)
        except Exception as error:
            reasons.append(f"constructor: {describe(error)}")
            continue
        found: list[tuple[Recipe, Tables] | CannotBuild] = []
        for layer_type in _layer_types(cls, module, construction):
            try:
                found.append(_first_working_call(module, construction, layer_type))
            except CannotBuild as error:
                found.append(CannotBuild(f"layer_type={layer_type}: {error}") if layer_type else error)
        if any(not isinstance(entry, CannotBuild) for entry in found):
            return found
        reasons.extend(str(entry) for entry in found)
    raise CannotBuild(reasons[0] if reasons else "no way to construct it")
