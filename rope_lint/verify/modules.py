"""A changed module class, original and fixed, built at small sizes and run side by side: a class that is not
rotary, or a rotary class the probe cannot build and read tables from.

The class is built from its config class the way the probe builds a rotary class (`probe.build`'s config candidates
and small config, then the config class's own defaults), or from its constructor's other parameters as a function's
arguments are derived (`functions`); a class of more than `MAX_ELEMENTS` parameter and buffer elements (counted on
the meta device first) is not built. Its forward is called on inputs derived from the signature and the config:
pixel values of the config's image size, masks of ones (per token, per patch or per pixel), token and position ids,
boxes within the image, hidden states of the config's hidden size, a feature map's shape, and the scalars a function
would get. The first inputs the original accepts are given to both; in fp32 their outputs must agree to within
`compare.TOLERANCE` (relative), or differ only by rounding (`compare.agreement`: both modules run in float64 agree),
with the same structure, dtypes and shapes, and their `state_dict`s must have the same keys and shapes; built under a
default device, the fixed class must keep its tensors where the original does (`compare.placement_difference`).
"""

from __future__ import annotations

import copy
import functools
import inspect
import itertools
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from rope_lint.output.fix_report import FAILED, NOT_BUILT, VERIFIED
from rope_lint.probe.build import (
    CannotBuild,
    ForwardCall,
    Recipe,
    config_candidates,
    config_parameter,
    construct,
    describe,
    parameters_after_self,
    small_config,
)
from rope_lint.verify.compare import (
    Incomparable,
    Mismatch,
    agreement,
    in_float64,
    placement_difference,
    relative_difference,
    state_dict_difference,
)
from rope_lint.verify.functions import GUESS, TENSOR, NotCallable, shown_arguments, value_for

# The small config's max_position_embeddings, and the inputs' batch and sequence length, within it.
POSITIONS = 64
BATCH, SEQUENCE = 2, 16
# Config classes tried, likeliest first, each at small sizes and then at its defaults.
CONFIG_CANDIDATES = 3
# The most parameter and buffer elements a module is built with (80 MB in fp32, and it is built three times): a class
# that is a whole model at its config's default sizes would take gigabytes and minutes.
MAX_ELEMENTS = 20_000_000
# Forward inputs tried on each built module before the next way of building it.
INPUT_TRIES = 24
# Config attributes that give the width of hidden states, the image side and its patch, likeliest first.
HIDDEN_NAMES = ("hidden_size", "d_model", "embed_dim", "embedding_dim", "dim", "n_embd", "hidden_dim")
IMAGE_NAMES = ("image_size", "img_size")
PATCH_NAMES = ("patch_size",)


def is_module_class(value: object) -> bool:
    """Whether a value is an `nn.Module` subclass, which `check_module` can build and run."""
    return isinstance(value, type) and issubclass(value, nn.Module)


def check_module(original_cls: type[nn.Module], fixed_cls: type[nn.Module]) -> tuple[str, str]:
    """(status, detail): build both classes as the original first builds and runs, and compare (see the module)."""
    try:
        init_kwargs, inputs, built_from = _first_run(original_cls)
    except CannotBuild as error:
        return NOT_BUILT, f"as a module: {error}"
    where = f"built as a module from {built_from}, called with {shown_arguments(inputs)}"
    original_module, expected = _run(original_cls, init_kwargs, inputs)
    try:
        fixed_module, result = _run(fixed_cls, init_kwargs, inputs)
    except Exception as error:
        return FAILED, f"the fixed module fails in fp32 where the original runs ({where}): {describe(error)}"
    try:
        difference = relative_difference(expected, result, "forward output")
    except Mismatch as mismatch:
        return FAILED, f"fp32 {mismatch} ({where})"
    except Incomparable as incomparable:
        return NOT_BUILT, f"as a module: {where}, but its {incomparable}"
    in_float64_outputs = functools.partial(_in_float64, original_cls, fixed_cls, init_kwargs, inputs)
    agreed = agreement(expected, result, difference, in_float64_outputs)
    if agreed is None:
        return FAILED, f"fp32 forward outputs differ by {difference:.3g} relative ({where})"
    state_dicts = state_dict_difference(original_module, fixed_module)
    if state_dicts is not None:
        return FAILED, f"{state_dicts} ({where})"
    placement = placement_difference(
        lambda: _construct(original_cls, init_kwargs), lambda: _construct(fixed_cls, init_kwargs)
    )
    if placement is not None:
        return FAILED, f"{placement} ({where})"
    return VERIFIED, f"{agreed}, same state_dict keys and shapes, {where}"


def _run(
    cls: type[nn.Module], init_kwargs: dict[str, Any], inputs: dict[str, Any], dtype: torch.dtype = torch.float32
) -> tuple[nn.Module, Any]:
    """The module built (its parameters and buffers then made `dtype`) and called, each from a copy of what is given,
    with the global RNG seeded the same for the parameters it draws and for anything its forward draws."""
    torch.manual_seed(0)
    module = _construct(cls, init_kwargs).to(dtype)
    torch.manual_seed(0)
    with torch.no_grad():
        return module, module(**copy.deepcopy(inputs))


def _in_float64(
    original_cls: type[nn.Module], fixed_cls: type[nn.Module], init_kwargs: dict[str, Any], inputs: dict[str, Any]
) -> tuple[Any, Any]:
    """What each module returns built as `_run` builds it, then made float64, on the inputs in float64
    (`compare.agreement`)."""
    return tuple(_run(cls, init_kwargs, in_float64(inputs), torch.float64)[1] for cls in (original_cls, fixed_cls))


def _construct(cls: type[nn.Module], init_kwargs: dict[str, Any]) -> nn.Module:
    """As the probe constructs a class (eval mode, uninitialised memory as NaN), from a copy of the arguments: a
    module may change its config while it is built."""
    style = "config" if config_parameter(cls) in init_kwargs else "old-style"
    unused_call = ForwardCall((), (), (), ())  # the module's forward is called here, not by the probe
    return construct(Recipe(cls, copy.deepcopy(init_kwargs), unused_call, None, POSITIONS, style, None, None, 1.0))


def _first_run(cls: type[nn.Module]) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The constructor arguments and forward inputs that the class first builds and runs with, and what it was built
    from; CannotBuild with the first reason when no way works."""
    if cls.forward is nn.Module.forward:
        raise CannotBuild("it defines no forward to run (a base class)")
    reasons: list[str] = []
    for init_kwargs, built_from in _constructions(cls):
        try:
            elements = _elements_on_meta(cls, init_kwargs)
            if elements is not None and elements > MAX_ELEMENTS:
                reasons.append(f"constructor ({built_from}): {elements:,} elements, over the {MAX_ELEMENTS:,} built")
                continue
            torch.manual_seed(0)
            module = _construct(cls, init_kwargs)
        except Exception as error:
            reasons.append(f"constructor ({built_from}): {describe(error)}")
            continue
        sizes = _Sizes(init_kwargs, init_kwargs.get(config_parameter(cls)))
        for inputs in itertools.islice(_input_sets(cls, sizes), INPUT_TRIES):
            try:
                torch.manual_seed(0)
                with torch.no_grad():
                    module(**copy.deepcopy(inputs))
            except Exception as error:  # this guess of the inputs does not suit the module; try the next
                reasons.append(f"forward ({built_from}): {describe(error)}")
                continue
            return init_kwargs, inputs, built_from
    raise CannotBuild(reasons[0] if reasons else "no way to construct it")


def _elements_on_meta(cls: type[nn.Module], init_kwargs: dict[str, Any]) -> int | None:
    """The module's parameter and buffer elements, counted on a copy built on the meta device (no memory, no time),
    or None where it reads values while it is built, which meta tensors do not have: it is then built for real. Any
    other error is the constructor's own, raised here before a real build allocates what the meta one did not."""
    try:
        with torch.device("meta"):
            module = cls(**copy.deepcopy(init_kwargs))
    except Exception as error:
        if "meta" in str(error).lower():
            return None
        raise
    return sum(tensor.numel() for tensor in (*module.parameters(), *module.buffers()))


def _constructions(cls: type[nn.Module]) -> Iterator[tuple[dict[str, Any], str]]:
    """Constructor keyword arguments to try, likeliest first, each with a word on what it was built from: the
    required parameters, then also the optional ones (default None) whose name says what they take (`padding_idx`)."""
    parameters = _parameters(cls.__init__)
    config_name = config_parameter(cls)
    required, optional = {}, {}
    for parameter in parameters:
        if parameter.name == config_name:
            continue
        if parameter.default is not inspect.Parameter.empty:
            value = _named_scalar(parameter) if parameter.default is None else None
            if value is not None:
                optional[parameter.name] = value
            continue
        try:
            value = value_for(parameter)
        except NotCallable as reason:
            raise CannotBuild(f"constructor {reason}") from reason
        if value is GUESS or value is TENSOR:
            raise CannotBuild(f"constructor parameter {parameter.name!r} has no known value")
        required[parameter.name] = value
    variants = [(required, "")]
    if optional:
        variants.append(({**required, **optional}, " and " + ", ".join(f"{k}={v!r}" for k, v in optional.items())))
    if config_name is None:
        yield from ((kwargs, f"its signature{given}") for kwargs, given in variants)
        return
    candidates = config_candidates(cls)[:CONFIG_CANDIDATES]
    if not candidates:
        raise CannotBuild("takes a config, but no config class was found next to it")
    for config_cls in candidates:
        for config_of, how in ((lambda c: small_config(c, POSITIONS), "small"), (lambda c: c(), "defaults")):
            try:
                config = config_of(config_cls)
            except Exception:  # a config that cannot be made this way offers nothing to build from
                continue
            for kwargs, given in variants:
                yield {config_name: config, **kwargs}, f"{config_cls.__name__} ({how}){given}"


def _named_scalar(parameter: inspect.Parameter) -> Any:
    """The value a parameter's name or annotation decides (a length, an index, a dtype), or None where they decide
    none or only a flag."""
    try:
        value = value_for(parameter)
    except NotCallable:
        return None
    return None if value is GUESS or value is TENSOR or isinstance(value, bool) else value


def _parameters(function: Any) -> list[inspect.Parameter]:
    """The named parameters after `self` (no `*args` or `**kwargs`); CannotBuild when the signature cannot be read."""
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [parameter for parameter in parameters_after_self(function) if parameter.kind in named]


class _Sizes:
    """The sizes inputs are made at: the config's (or the constructor's) hidden width, image side, patch and
    vocabulary, with small defaults where it names none."""

    def __init__(self, init_kwargs: dict[str, Any], config: Any) -> None:
        self.hidden = self._first(config, init_kwargs, HIDDEN_NAMES) or 64
        self.image = self._first(config, init_kwargs, IMAGE_NAMES) or 32
        self.patch = min(self._first(config, init_kwargs, PATCH_NAMES) or 8, self.image)
        self.channels = self._first(config, init_kwargs, ("num_channels", "in_channels")) or 3
        self.vocabulary = self._first(config, init_kwargs, ("vocab_size",)) or 100

    @staticmethod
    def _first(config: Any, init_kwargs: dict[str, Any], names: tuple[str, ...]) -> int | None:
        for name in names:
            try:
                value = getattr(config, name, None) if config is not None else None
            except Exception:  # a per-layer or derived attribute that refuses to be read
                value = None
            value = init_kwargs.get(name) if value is None else value
            if isinstance(value, (list, tuple)) and value:
                value = value[0]  # an image size given as (height, width): square images of the first
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return None

    @property
    def patches(self) -> int:
        return max(self.image // self.patch, 1)


def _input_sets(cls: type[nn.Module], sizes: _Sizes) -> Iterator[dict[str, Any]]:
    """Forward keyword arguments to try, likeliest first: the required parameters' candidates in turn, then the
    same with the optional parameters whose name says what they take (a mask, ids, pixel values, a length)."""
    generator = torch.Generator().manual_seed(0)
    required, optional = [], []
    for parameter in _parameters(cls.forward):
        if parameter.default is inspect.Parameter.empty:
            required.append((parameter.name, _candidates(parameter, sizes, generator)))
        elif parameter.default is None and (recognised := _recognised(parameter, sizes, generator)):
            optional.append((parameter.name, recognised))
    for chosen in (required, required + optional) if optional else (required,):
        names = [name for name, _ in chosen]
        for values in itertools.product(*(candidates for _, candidates in chosen)):
            yield dict(zip(names, values, strict=True))


def _candidates(parameter: inspect.Parameter, sizes: _Sizes, generator: torch.Generator) -> list[Any]:
    """The values to try for a required forward parameter; CannotBuild when it can be given none."""
    recognised = _recognised(parameter, sizes, generator)
    if recognised:
        return recognised
    try:
        value = value_for(parameter)
    except NotCallable as reason:
        raise CannotBuild(f"forward {reason}") from reason
    if value is not GUESS and value is not TENSOR:
        return [value]
    batch, sequence, side, patches = BATCH, SEQUENCE, sizes.image, sizes.patches
    # Hidden states of tokens, then of a grid of patches (channels last), values per token or per item, an image.
    shapes = [
        (batch, sequence, sizes.hidden),
        (batch, patches, patches, sizes.hidden),
        (batch, sequence),
        (batch,),
        (batch, sizes.channels, side, side),
    ]
    return [torch.randn(shape, generator=generator) for shape in shapes]


def _recognised(parameter: inspect.Parameter, sizes: _Sizes, generator: torch.Generator) -> list[Any]:
    """Values for a parameter whose name or annotation says what it takes, or [] for one that does not."""
    name, annotation = parameter.name, str(parameter.annotation)
    batch, sequence, side, patches = BATCH, SEQUENCE, sizes.image, sizes.patches
    if name.endswith("mask"):
        # Nothing masked: a mask per token, per patch, or per pixel; a boolean one first where it is annotated so.
        masks = [
            torch.ones(batch, sequence, dtype=torch.int64),
            torch.ones(batch, patches, patches, dtype=torch.bool),
            torch.ones(batch, side, side, dtype=torch.int64),
        ]
        return sorted(masks, key=lambda mask: mask.dtype != torch.bool) if "Bool" in annotation else masks
    if name.endswith(("box", "boxes")):
        # Boxes per token, (x, y, width, height) or corners, as fractions of the image: positive, within it.
        return [0.05 + 0.9 * torch.rand((batch, sequence, 4), generator=generator)]
    if "pixel" in name or name in ("image", "images"):
        return [torch.randn((batch, sizes.channels, side, side), generator=generator)]
    if name.endswith("_ids"):
        if "position" in name:
            return [torch.arange(sequence).expand(batch, sequence)]
        if name == "input_ids":
            return [torch.randint(0, min(sizes.vocabulary, 1000), (batch, sequence), generator=generator)]
        return [torch.zeros(batch, sequence, dtype=torch.int64)]  # a type or segment id: the first one
    if name == "shape" or "Size" in annotation:
        # The shape of a feature map whose positions are encoded: channels of the hidden width, a grid of patches.
        return [torch.Size((batch, sizes.hidden, patches, patches))]
    value = _named_scalar(parameter) if parameter.default is None else None
    return [] if value is None else [value]
