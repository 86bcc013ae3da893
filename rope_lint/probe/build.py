"""Construct a rotary class from its signature and read the cos/sin tables its forward returns.

A `Recipe` (constructor arguments and forward call) is worked out once, by trying the plausible ways under plain
float32, and then reused unchanged for every trigger and for the float64 reference.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rope_lint.probe.readings import (
    ROTATED_HALVES,
    ROTATED_PAIRS,
    TABLES,
    CannotBuild,
    Tables,
    depends_on_input,
    first_tensor,
    is_rotation,
    returned_dtypes,
    rotated_tables,
    tables_from_output,
    unit_pairs,
)

# Small sizes for config-style classes: two heads of 128, the head dim of Llama and most models, at which the
# tables' errors were measured.
HEAD_DIM = 128


def _config_sizes(head_dim: int) -> dict[str, int]:
    return {"hidden_size": 2 * head_dim, "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": head_dim}


DEFAULT_BASE = 10000.0

# Old-style constructor parameters, by name.
_DIM_NAMES = frozenset({"dim", "head_dim", "rotary_dim", "rotary_ndims", "embed_dim", "embedding_dim", "rope_dim"})
_MAX_POSITION_NAMES = frozenset(
    {"max_position_embeddings", "max_positions", "max_seq_len", "max_seq_length", "max_len", "max_length"}
)
_BASE_NAMES = frozenset({"base", "theta", "rope_theta", "rotary_emb_base", "rope_base"})
_SCALE_NAMES = frozenset({"scaling_factor", "factor", "scale"})
_KNOWN_INIT_NAMES = _DIM_NAMES | _MAX_POSITION_NAMES | _BASE_NAMES | _SCALE_NAMES | {"device"}
# Forward parameters, by name.
_SEQ_LEN_NAMES = frozenset({"seq_len", "seqlen", "seq_length", "max_seq_len", "kv_seq_len", "sequence_length"})
_POSITION_NAMES = frozenset({"position_ids", "positions", "position_idx", "pos_ids", "pos"})
_OFFSET_NAMES = frozenset({"offset", "past_key_values_length", "past_length", "start_pos", "seq_len_offset"})


# What the forward's x parameter is given.
ACTIVATION = "activation"  # activations in the trigger's dtype: unit pairs (see readings.unit_pairs)
POSITIONS_AS_X = "positions"  # the positions themselves, as exact float values, for a forward that takes times
FEATURE_MAP = "feature map"  # a [1, C, H, W] feature map of zeros, for a vision RoPE that reads its grid's shape


@dataclasses.dataclass(frozen=True)
class ForwardCall:
    """How forward is called: which parameter gets x, the sequence length, the positions or an offset of 0."""

    roles: tuple[tuple[str, str], ...]  # (parameter name, role), role in {"x", "seq_len", "positions", "offset",
    # "dtype", "device"}; several parameters may take x (a forward that rotates q and k)
    fixed: tuple[tuple[str, Any], ...]  # keyword arguments passed as they are, such as layer_type
    x_shape: tuple[int, ...]
    positions_shape: tuple[int, ...]
    x_kind: str = ACTIVATION
    reading: str = TABLES  # readings.TABLES, or the layout of a forward that returns its input rotated


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

    @property
    def config(self) -> Any:
        """The config object the class is built from, None for an old-style constructor."""
        return next(iter(self.init_kwargs.values())) if self.style == "config" else None


def parameters_after_self(function: Any) -> list[inspect.Parameter]:
    """The parameters after `self`, or CannotBuild when the signature cannot be read."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError) as error:
        raise CannotBuild(f"cannot read the signature: {error}") from error
    return parameters[1:]


def _required(parameter: inspect.Parameter) -> bool:
    positional_or_keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return parameter.kind in positional_or_keyword and parameter.default is inspect.Parameter.empty


def _old_style_kwargs(cls: type[nn.Module], positions: int) -> tuple[dict[str, Any], str]:
    """The constructor's keyword arguments, and which of them is the rotary dimension. A constructor with no
    parameter of a known dimension name whose one unknown required parameter is it (`demb`) gets it as the dim."""
    unknown = [
        parameter
        for parameter in parameters_after_self(cls.__init__)
        if _required(parameter) and parameter.name not in _KNOWN_INIT_NAMES
    ]
    dim_names = [parameter.name for parameter in parameters_after_self(cls.__init__) if parameter.name in _DIM_NAMES]
    if not dim_names and len(unknown) == 1:
        dim_names.append(unknown.pop().name)
    if unknown:
        raise CannotBuild(f"constructor parameter {unknown[0].name!r} has no known value")
    if not dim_names:
        raise CannotBuild("constructor takes neither a config nor a rotary dimension")
    kwargs: dict[str, Any] = dict.fromkeys(dim_names, HEAD_DIM)
    for parameter in parameters_after_self(cls.__init__):
        if parameter.name in _MAX_POSITION_NAMES:
            kwargs[parameter.name] = positions
        elif parameter.name in _BASE_NAMES and _required(parameter):
            kwargs[parameter.name] = DEFAULT_BASE
        elif parameter.name in _SCALE_NAMES and _required(parameter):
            kwargs[parameter.name] = 1.0
        elif parameter.name == "device" and _required(parameter):
            kwargs[parameter.name] = None
    return kwargs, dim_names[0]


def _default_of(cls: type[nn.Module], names: frozenset[str]) -> Any:
    for parameter in parameters_after_self(cls.__init__):
        if parameter.name in names and parameter.default is not inspect.Parameter.empty:
            return parameter.default
    return None


def _is_config_class(value: object) -> bool:
    return isinstance(value, type) and value.__name__.endswith("Config")


def config_parameter(cls: type[nn.Module]) -> str | None:
    """The constructor's config parameter: `config`, or the one required parameter named `*_config` (a class built
    from one part of a composite config, such as `atom_config`); None for an old-style constructor."""
    names = [parameter.name for parameter in parameters_after_self(cls.__init__)]
    if "config" in names:
        return "config"
    named = [parameter.name for parameter in parameters_after_self(cls.__init__) if _required(parameter)]
    return named[0] if len(named) == 1 and named[0].endswith("_config") else None


def _resolve_annotation(cls: type[nn.Module], name: str) -> object:
    annotation = inspect.signature(cls.__init__).parameters[name].annotation
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


def config_candidates(cls: type[nn.Module]) -> list[type]:
    """Config classes to try, the likeliest first: the annotation, then same-module configs by shared name."""
    candidates: list[type] = []
    annotation = _resolve_annotation(cls, config_parameter(cls) or "config")
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


def small_config(config_cls: type, positions: int, head_dim: int = HEAD_DIM) -> Any:
    sizes = {**_config_sizes(head_dim), "max_position_embeddings": positions}
    try:
        config = config_cls(**sizes)
        settable = {"max_position_embeddings": positions}  # a config may derive it from something else
    except Exception:  # a config that rejects some of these keywords: build its defaults, then set what it takes
        config = config_cls()
        settable = sizes
    for name, value in settable.items():
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
    init_parameters = {parameter.name: parameter for parameter in parameters_after_self(cls.__init__)}
    unset_call = ForwardCall((), (), (), ())
    config_name = config_parameter(cls)
    if config_name is None:
        kwargs, dim_name = _old_style_kwargs(cls, positions)
        if dim_name not in _DIM_NAMES:
            # A guess: should it fail, the reason is that the parameter has no known value.
            yield f"constructor parameter {dim_name!r} has no known value"
        dim = kwargs[dim_name]
        base = kwargs.get(next((name for name in kwargs if name in _BASE_NAMES), ""), _default_of(cls, _BASE_NAMES))
        scaling = _default_of(cls, frozenset({"scaling_factor"})) if "Linear" in cls.__name__ else None
        yield Recipe(cls, kwargs, unset_call, None, positions, "old-style", dim, base, float(scaling or 1.0))
        return
    others = [parameter for name, parameter in init_parameters.items() if name != config_name and _required(parameter)]
    if others:
        raise CannotBuild(f"constructor parameter {others[0].name!r} has no known value")
    candidates = config_candidates(cls)
    if not candidates:
        raise CannotBuild("takes a config, but no config class was found next to it")
    for config_cls in candidates:
        try:
            config = small_config(config_cls, positions)
        except Exception as error:
            yield f"cannot create {config_cls.__name__}: {describe(error)}"
            continue
        yield _config_recipe(cls, config, positions)


def _config_recipe(cls: type[nn.Module], config: Any, positions: int) -> Recipe:
    kwargs = {config_parameter(cls) or "config": config}
    return Recipe(cls, kwargs, ForwardCall((), (), (), ()), None, positions, "config", *_config_rope(config))


# A config-built class that fails is retried with a config repaired from what its error says, one repair at a time
# and at most this many times.
_MAX_REPAIRS = 6
_MISSING_KEY = re.compile(r"KeyError: '([^']+)'")
_MISSING_ATTRIBUTE = re.compile(r"object has no attribute '(\w+)'")
_NUMBER_LIST = re.compile(r"\[(\d+(?:,\s*\d+)*)\]")
_NUMBER = re.compile(r"\b\d+\b")
# `.get("name")` without a default: a value the class reads where it may be absent.
_OPTIONAL_READ = re.compile(r"\.get\(\s*[\"'](\w+)[\"']\s*\)")


class ConfigRepairs:
    """The next config to try after a failure, derived from the error, or None:

    - a KeyError on a layer type the config's per-layer-type rope parameters lack: that type gets a default RoPE;
    - an attribute the config lacks that one of its sub-configs has (a class built from one part of a composite
      config): that sub-config;
    - a value the class reads with `.get(name)` that the config's rope parameters lack: multimodal sections (three,
      summing to half the head dim, the one such value rotary classes read);
    - the config class's own defaults, which are consistent with each other where our small sizes may not be;
    - sizes in the error (`expected 64, got [8, 12, 12]`): a head dim that fits them (twice their sum, the number
      itself, ...).
    """

    def __init__(self, construction: Recipe) -> None:
        self.construction = construction
        self.left = _MAX_REPAIRS
        self.head_dims_tried = {construction.dim}
        self.reads_filled: set[str] = set()
        self.defaults_tried = False

    def after(self, message: str) -> Recipe | None:
        config = self.construction.config
        if config is None or self.left == 0:
            return None
        self.left -= 1
        for repair in (self._layer_type, self._sub_config, self._optional_read, self._defaults, self._head_dim):
            repaired = repair(config, message)
            if repaired is not None:
                self.construction = _config_recipe(self.construction.cls, repaired, self.construction.positions)
                return self.construction
        return None

    def _rope_parameters(self, config: Any) -> dict[str, Any] | None:
        rope_parameters = _attribute(config, "rope_parameters")
        return rope_parameters if isinstance(rope_parameters, dict) else None

    def _layer_type(self, config: Any, message: str) -> Any:
        match = _MISSING_KEY.search(message)
        rope_parameters = self._rope_parameters(config)
        layer_types = _attribute(config, "layer_types") or ()
        if match is None or rope_parameters is None or match.group(1) not in layer_types:
            return None
        rope_parameters[match.group(1)] = {"rope_type": "default", "rope_theta": DEFAULT_BASE}
        return config

    def _sub_config(self, config: Any, message: str) -> Any:
        match = _MISSING_ATTRIBUTE.search(message)
        if match is None:
            return None
        parts = [value for value in vars(config).values() if _is_config_class(type(value))]
        part = next((value for value in parts if _attribute(value, match.group(1)) is not None), None)
        if part is not None:
            with contextlib.suppress(Exception):
                part.max_position_embeddings = self.construction.positions
        return part

    def _optional_read(self, config: Any, message: str) -> Any:
        rope_parameters = self._rope_parameters(config)
        if rope_parameters is None or "NoneType" not in message:
            return None
        try:
            source = inspect.getsource(self.construction.cls)
        except (OSError, TypeError):
            return None
        read = [name for name in _OPTIONAL_READ.findall(source) if name not in rope_parameters]
        name = next((name for name in read if name not in self.reads_filled), None)
        if name is None:
            return None
        self.reads_filled.add(name)
        half = (self.construction.dim or HEAD_DIM) // 2
        rope_parameters[name] = [half - 2 * (half // 3), half // 3, half // 3]
        return config

    def _head_dim(self, config: Any, message: str) -> Any:
        sums = [sum(map(int, _NUMBER.findall(found))) for found in _NUMBER_LIST.findall(message)]
        numbers = sums + [int(found) for found in _NUMBER.findall(_NUMBER_LIST.sub("", message))]
        candidates = [size for number in numbers for size in (2 * number, number, 4 * number)]
        head_dim = next(
            (size for size in candidates if 8 <= size <= 1024 and size % 2 == 0 and size not in self.head_dims_tried),
            None,
        )
        if head_dim is None:
            return None
        self.head_dims_tried.add(head_dim)
        try:
            return small_config(type(config), self.construction.positions, head_dim)
        except Exception:  # the config rejects this size: the next repair is tried
            return None

    def _defaults(self, config: Any, message: str) -> Any:
        if self.defaults_tried:
            return None
        self.defaults_tried = True
        try:
            defaults = type(config)()
        except Exception:  # no defaults to fall back on
            return None
        with contextlib.suppress(Exception):
            defaults.max_position_embeddings = self.construction.positions
        return defaults


def describe(error: BaseException) -> str:
    """One line for a report: the exception's type and the first line of its message (ours: the message)."""
    text = str(error) if isinstance(error, CannotBuild) else f"{type(error).__name__}: {error}".strip()
    return text.splitlines()[0] if text else type(error).__name__


def _forward_calls(cls: type[nn.Module], positions: int, layer_type: str | None) -> list[ForwardCall]:
    """The plausible ways to call forward, likeliest first: x as [1, N, D] or [1, 1, N, D], and positions as
    [1, N], [3, 1, N] (one row per multimodal section), [N] or [N, 2] (axial 2-D, both coordinates equal). A forward
    without positions may take the positions (times) as x: [1, N], [N, 1], [N] or [1, N, 1]; or, with several
    tensors to take, points: their coordinates as x and the positions as the rest."""
    roles: list[tuple[str, str]] = []
    fixed: dict[str, Any] = {}
    for parameter in parameters_after_self(cls.forward):
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
        elif parameter.name in ("dtype", "device") and _required(parameter):
            roles.append((parameter.name, parameter.name))
        elif not roles or (_required(parameter) and all(role == "x" for _, role in roles)):
            # The first parameter is the activation tensor; required ones right after it take the same tensor, as
            # a forward that rotates q and k does.
            roles.append((parameter.name, "x"))
        elif _required(parameter):
            raise CannotBuild(f"forward parameter {parameter.name!r} has no known value")
    x_shapes = [(1, positions, HEAD_DIM), (1, 1, positions, HEAD_DIM)]
    position_shapes = [(1, positions), (3, 1, positions), (positions,), (positions, 2)]
    calls = [ForwardCall(tuple(roles), tuple(fixed.items()), x, p) for x in x_shapes for p in position_shapes]
    if any(role == "positions" for _, role in roles):
        return calls
    calls = [ForwardCall(tuple(roles), tuple(fixed.items()), x, ()) for x in x_shapes]
    times = [(1, positions), (positions, 1), (positions,), (1, positions, 1)]
    calls += [ForwardCall(tuple(roles), tuple(fixed.items()), x, (), POSITIONS_AS_X) for x in times]
    taking_x = [name for name, role in roles if role == "x"]
    if len(taking_x) > 1:
        # A forward over points: their coordinates ([1, N, 3] or [1, N, 2], every axis at the point's position)
        # first, then a per-point tensor such as an id, given the positions.
        point_roles = tuple((name, "positions" if name in taking_x[1:] else role) for name, role in roles)
        points = [(1, positions, axes) for axes in (3, 2)]
        calls += [ForwardCall(point_roles, tuple(fixed.items()), x, (1, positions), POSITIONS_AS_X) for x in points]
    return calls


def _layer_types(cls: type[nn.Module], module: nn.Module, recipe: Recipe) -> list[str | None]:
    """The layer types to probe one by one when forward takes `layer_type` (per-layer-type tables), else [None].
    A layer type whose rope parameters are None has no positional encoding: it has no table to probe."""
    if "layer_type" not in inspect.signature(cls.forward).parameters:
        return [None]
    config = recipe.config
    rope_parameters = _attribute(config, "rope_parameters")
    per_type = dict(rope_parameters) if isinstance(rope_parameters, dict) else {}
    declared = (
        getattr(module, "layer_types", None)
        or _attribute(config, "layer_types")
        or [name for name, value in per_type.items() if isinstance(value, dict)]
    )
    kept = [name for name in dict.fromkeys(declared) if not (name in per_type and per_type[name] is None)]
    return kept or [None]


def module_device(module: nn.Module) -> torch.device:
    """Where the module's tensors live (the accelerator under real zero.Init on a GPU machine), CPU if none."""
    for tensor in (*module.buffers(), *module.parameters()):
        return tensor.device
    return torch.device("cpu")


def _position_ids(positions: int, shape: tuple[int, ...], device: torch.device) -> torch.Tensor | None:
    """0..N-1 as int64 along the axis of `shape` that has length N, repeated along the others."""
    if not shape:
        return None
    axis = shape.index(positions)
    view = [positions if index == axis else 1 for index in range(len(shape))]
    return torch.arange(positions, dtype=torch.int64, device=device).view(view).expand(shape)


def _x_value(call: ForwardCall, positions: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    if call.x_kind == POSITIONS_AS_X:
        # Exact positions: float32 holds every integer up to 2^24, so the probe's own input rounds nothing.
        return _position_ids(positions, call.x_shape, device).to(torch.float32)
    if call.x_kind == FEATURE_MAP:
        return torch.zeros(call.x_shape, dtype=dtype, device=device)
    return unit_pairs(call.x_shape, call.reading, dtype, device)


def forward_arguments(
    recipe: Recipe, activation_dtype: torch.dtype, device: torch.device, reading: str | None = None
) -> dict[str, Any]:
    """The keyword arguments of the recipe's forward call, its tensors made on `device`, x in the inputs of
    `reading` (the recipe's own by default)."""
    call = dataclasses.replace(recipe.forward_call, reading=reading or recipe.forward_call.reading)
    values = {
        "x": _x_value(call, recipe.positions, activation_dtype, device),
        "seq_len": recipe.positions,
        "positions": _position_ids(recipe.positions, call.positions_shape, device),
        "offset": 0,
        "dtype": activation_dtype,
        "device": device,
    }
    return {name: values[role] for name, role in call.roles} | dict(call.fixed)


def _run_forward(module: nn.Module, recipe: Recipe, activation_dtype: torch.dtype, reading: str) -> tuple[Any, Any]:
    """Call forward with the inputs of `reading`; returns (what it returned, the x it was given)."""
    arguments = forward_arguments(recipe, activation_dtype, module_device(module), reading)
    given = next((arguments[name] for name, role in recipe.forward_call.roles if role == "x"), None)
    return module(**arguments), given


def call_forward(module: nn.Module, recipe: Recipe, activation_dtype: torch.dtype) -> Tables:
    """Call forward as a model would: x in the activation dtype on the module's device, exact int64 positions."""
    reading = recipe.forward_call.reading
    output, given = _run_forward(module, recipe, activation_dtype, reading)
    if reading == TABLES:
        returned = first_tensor(output)
        unchanged = returned is not None and given is not None and returned.shape == given.shape
        if unchanged and torch.equal(returned, given.to(returned.dtype)):
            raise CannotBuild("forward returns its input unchanged")
        tables = tables_from_output(output, recipe.positions)
    else:
        tables = rotated_tables(output, given, reading, recipe.positions)
    return dataclasses.replace(tables, returned=returned_dtypes(output))


def construct(recipe: Recipe) -> nn.Module:
    """The module in eval mode, as inference runs it: a vision RoPE jitters its patch coordinates in training.

    Memory the class leaves uninitialised (`torch.empty`, `nn.Parameter(torch.Tensor(n))`, for a model's init to fill)
    reads as NaN, not as whatever the allocator held: a class whose output depends on it is reported, the same way on
    every run, instead of measured on garbage or read as zeros."""
    with _uninitialised_memory_as_nan():
        return recipe.cls(**recipe.init_kwargs).eval()


@contextlib.contextmanager
def _uninitialised_memory_as_nan() -> Iterator[None]:
    enabled, warn_only = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    # Deterministic mode fills new floating storage with NaN; warn_only keeps ops with no deterministic kernel going.
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


def _read_call(module: nn.Module, recipe: Recipe) -> tuple[Recipe, Tables]:
    """The recipe with its reading settled, and its fp32 tables."""
    if recipe.forward_call.x_kind != ACTIVATION:
        return recipe, call_forward(module, recipe, torch.float32)
    reading = _reading(module, recipe)
    settled = dataclasses.replace(recipe, forward_call=dataclasses.replace(recipe.forward_call, reading=reading))
    return settled, call_forward(module, settled, torch.float32)


def _reading(module: nn.Module, recipe: Recipe) -> str:
    """How the output of a forward that takes an activation is read. One that changes with its input's values applies
    the rotation: it is read as such, in the layout whose unit pairs it keeps at one length; any other returns tables.
    Only the first tensor of each output is kept while the other forward runs: an activation-shaped output can be the
    largest thing a probe's run holds, and the tables are read from a forward of their own."""
    halves, pairs = (
        first_tensor(_run_forward(module, recipe, torch.float32, layout)[0]) for layout in (TABLES, ROTATED_PAIRS)
    )
    if not depends_on_input(halves, pairs):
        return TABLES
    # The input of TABLES is unit pairs in the rotate_half layout.
    for layout, output in ((ROTATED_HALVES, halves), (ROTATED_PAIRS, pairs)):
        if is_rotation(output, layout, recipe.positions):
            return layout
    raise CannotBuild("forward changes with its input, but not as a rotation of its pairs")


# A vision RoPE reads the grid from its input's shape; it is given a feature map of 1 x N patches (the positions run
# along the width). Finding the input that makes N patches takes a few tries: grow the height until there is one
# row of patches, then scale the width by the patches it gave.
_GRID_TRIES = 12
_MAX_PATCH = 64  # pixels of a patch side, at most


def _rows(output: Any) -> int:
    table = first_tensor(output)
    return table.numel() // table.shape[-1] if table.dim() and table.shape[-1] else 0


def _feature_map_call(module: nn.Module, recipe: Recipe) -> tuple[Recipe, Tables]:
    positions = recipe.positions
    height, width, last_rows = 1, positions, None
    for _ in range(_GRID_TRIES):
        call = dataclasses.replace(recipe.forward_call, x_shape=(1, 3, height, width), x_kind=FEATURE_MAP)
        trial = dataclasses.replace(recipe, forward_call=call)
        try:
            rows = _rows(_run_forward(module, trial, torch.float32, TABLES)[0])
        except Exception:
            if last_rows:  # it failed at a size other than too small a height
                raise
            rows = 0  # a feature map smaller than one patch: some classes raise rather than return nothing
        if rows == positions:
            return trial, call_forward(module, trial, torch.float32)
        if rows == last_rows and rows:
            raise CannotBuild(f"its output of {rows} rows does not follow the feature map's size")
        last_rows = rows
        if rows == 0:
            height *= 2
        else:
            scaled = round(width * positions / rows)
            width = scaled if scaled != width else width + (1 if rows < positions else -1)
        if height > _MAX_PATCH or width > _MAX_PATCH * positions:
            break
    raise CannotBuild(f"no feature map gave 1 x {positions} patches in {_GRID_TRIES} tries")


def _fixed_length_call(module: nn.Module, recipe: Recipe) -> tuple[Recipe, Tables]:
    """A table whose length the class fixes, the same whatever the input's length (a vision grid of its config's
    image and patch sizes): measured over its own rows, the first axis."""
    shorter = dataclasses.replace(recipe.forward_call, x_shape=(1, recipe.positions // 2, HEAD_DIM))
    shapes = {
        tuple(first_tensor(_run_forward(module, trial, torch.float32, TABLES)[0]).shape)
        for trial in (recipe, dataclasses.replace(recipe, forward_call=shorter))
    }
    [shape] = shapes if len(shapes) == 1 else [()]
    if len(shape) < 2 or shape[0] < 2:
        raise CannotBuild("its table's length does not follow the input's")
    fixed = dataclasses.replace(recipe, positions=shape[0])
    return fixed, call_forward(module, fixed, torch.float32)


# Which way of calling forward worked for a class (and layer type) the last time, by its place in the list of ways:
# the probe builds each class at small sizes first, and at full size a way that failed there, which may take far
# more memory than the one that works, is not tried before the one that worked.
_WORKED: dict[tuple[type[nn.Module], str | None], int] = {}


def _first_working_call(module: nn.Module, construction: Recipe, layer_type: str | None) -> tuple[Recipe, Tables]:
    variant = None if layer_type is None else f"layer_type={layer_type}"
    calls = _forward_calls(construction.cls, construction.positions, layer_type)
    first = dataclasses.replace(construction, forward_call=calls[0], variant=variant)
    ways = [functools.partial(_read_call, recipe=dataclasses.replace(first, forward_call=call)) for call in calls]
    ways.append(functools.partial(_fixed_length_call, recipe=first))
    if not any(role == "positions" for _, role in calls[0].roles):
        ways.append(functools.partial(_feature_map_call, recipe=first))
    key = (construction.cls, layer_type)
    worked = _WORKED.get(key)
    order = [worked] if worked is not None and worked < len(ways) else []
    order += [index for index in range(len(ways)) if index != worked]
    reasons = {}
    for index in order:
        try:
            found = ways[index](module)
        except Exception as error:
            reasons[index] = describe(error)
            continue
        _WORKED[key] = index
        return found
    raise CannotBuild(f"forward: {reasons[min(reasons)]}")


_CONSTRUCTOR = "constructor: "


def _recipes_of(construction: Recipe) -> list[tuple[Recipe, Tables] | CannotBuild]:
    """Build the class as `construction` says and find a forward call for each of its layer types; CannotBuild with
    the first reason when none works."""
    try:
        module = construct(construction)
    except Exception as error:
        raise CannotBuild(f"{_CONSTRUCTOR}{describe(error)}") from error
    found: list[tuple[Recipe, Tables] | CannotBuild] = []
    for layer_type in _layer_types(construction.cls, module, construction):
        try:
            found.append(_first_working_call(module, construction, layer_type))
        except CannotBuild as error:
            found.append(CannotBuild(f"layer_type={layer_type}: {error}") if layer_type else error)
    if not any(not isinstance(entry, CannotBuild) for entry in found):
        raise CannotBuild(str(found[0]))
    return found


def find_recipes(cls: type[nn.Module], positions: int) -> list[tuple[Recipe, Tables] | CannotBuild]:
    """Find how to build the class and call it, trying each way under plain float32; each recipe comes with its
    fp32 tables. A class with per-layer-type tables gets one entry per layer type (a CannotBuild where that type
    fails). A config the class rejects is repaired from what the class's error says, one retry at a time. Raises
    CannotBuild with the reason of the likeliest way when no way works.
    """
    reasons: list[str] = []
    for construction in _constructions(cls, positions):
        if isinstance(construction, str):
            reasons.append(construction)
            continue
        repairs = ConfigRepairs(construction)
        attempt: Recipe | None = construction
        failures: list[str] = []
        while attempt is not None:
            try:
                return _recipes_of(attempt)
            except CannotBuild as error:
                failures.append(str(error))
                attempt = repairs.after(str(error))
        # The first failure of the farthest stage reached: once a repair lets the class be built, why its forward
        # fails says more than why the unrepaired config could not build it.
        reasons.append(min(failures, key=lambda failure: failure.startswith(_CONSTRUCTOR)))
    raise CannotBuild(reasons[0] if reasons else "no way to construct it")


def replay(found: list[tuple[Recipe, Tables] | CannotBuild]) -> None:
    """Build and call each found recipe once more under plain float32: what the recipes themselves take, without
    the tries that found them (for the memory estimate, which the tries, different at each size, would skew)."""
    for entry in found:
        if not isinstance(entry, CannotBuild):
            recipe, _ = entry
            call_forward(construct(recipe), recipe, torch.float32)
