"""Probe every rotary class of the targets under every selected trigger."""

from __future__ import annotations

import functools
import gc
import os
from collections.abc import Callable, Iterator, Sequence

import torch
from torch import nn

from rope_lint.engine import linux_libc_function, map_files
from rope_lint.probe.build import (
    CannotBuild,
    Recipe,
    Tables,
    call_forward,
    construct,
    describe,
    find_recipes,
    replay,
)
from rope_lint.probe.cost import runtime_cost
from rope_lint.probe.discover import Discovery, discovered, qualified_name, quiet_model_code
from rope_lint.probe.memory import SMALL_POSITIONS, Allocations, OverBudget, allocations, extrapolate, same_ops
from rope_lint.probe.reference import reference_for
from rope_lint.probe.report import (
    CLEAN,
    ERROR,
    EXCEEDS,
    UNAVAILABLE,
    ClassResult,
    ProbeReport,
    TriggerResult,
    Yardstick,
)
from rope_lint.probe.sizes import DEFAULT_BUDGET, format_size
from rope_lint.probe.triggers import TRIGGERS, Trigger, TriggerUnavailable

# Called before each class with (index from 1, number of classes or None while more are being found, class name).
Progress = Callable[[int, int | None, str], None]
# The most classes probed at once: `--max-memory` bounds what each takes, so a run may take this many times that.
PARALLEL_CLASSES = 4
# Classes probed by one forked process before a fresh one takes the next: tables of many sizes leave the heap
# fragmented, and a long-lived process's later classes peak higher. transformers 5.24.0 under three triggers, the
# largest process's peak: 573 to 590 MiB in long-lived processes (3 runs), 536 to 571 MiB in processes of 16 classes
# (7 runs) for 3 to 4 s more system time (forks copying the pages they write); fewer classes a process do no better
# (4: 557 and 562 MiB, 8: 546 to 574 MiB) and cost more (4: 6 s more wall time), more do worse (32: 583, 64: 586).
CLASSES_PER_PROCESS = 16


# glibc's malloc maps a block on its own only from a size that follows the largest mapped block freed so far (up to 32
# MiB); a smaller block comes from the heap, and once freed it stays in the process under the objects allocated after
# it. A class's float64 tables and its own tensors of 8 to 32 MiB ([4096, 256] to [4096, 1024]) then raised a forked
# process's footprint class after class. Fixed at 8 MiB, such blocks are mapped and given back when freed.
# transformers 5.24.0 under three triggers, the largest process's peak, interleaved with the code before: 496 MiB
# (479 to 512, 10 runs) against 516 (501 to 524), for 0.5 s more of 11; with every module imported before the first
# fork (each process starting from the parent's largest), 516 to 534 MiB against 562 to 591 (4 runs each). A threshold
# of 4 MiB took 1.5 s more and peaked no lower; one of 16 MiB peaked higher.
LARGE_BLOCK = 8 * 2**20
_M_MMAP_THRESHOLD = -3  # mallopt's parameter, as glibc's malloc.h numbers it


def _large_blocks_mapped() -> None:
    """For the rest of this process and those it forks, each block of LARGE_BLOCK bytes or more that glibc's malloc
    gives is mapped on its own (see LARGE_BLOCK); nothing where the C library has no mallopt."""
    mallopt = linux_libc_function("mallopt")
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, LARGE_BLOCK)


def _release_memory() -> None:
    """Free what the last class left in reference cycles (a module, a traceback holding a forward's frames and
    tensors) before the next one runs, rather than whenever the collector's thresholds say. glibc's malloc_trim after
    each class was tried too: on transformers 5.24.0 it cost 3-4 s of system time (freed pages faulted in again by
    the next class) and did not lower the peak beyond run-to-run noise."""
    gc.collect()


def tables_under(trigger: Trigger, recipe: Recipe) -> Tables:
    """Build the class under the trigger and read its tables as a model would use them."""
    with trigger.construction():
        module = construct(recipe)
    module = trigger.after_construction(module)
    with trigger.forward(module):
        return call_forward(module, recipe, trigger.activation_dtype)


def _probe_recipe(
    result: ClassResult,
    recipe: Recipe,
    fp32_tables: Tables,
    triggers: Sequence[Trigger],
    threshold: float,
    curves: bool = False,
) -> None:
    result.construction, result.positions, result.dim = recipe.style, recipe.positions, fp32_tables.cos.shape[1]
    try:
        reference = reference_for(recipe, fp32_tables)
    except ValueError as error:
        result.reason = f"no float64 reference: {error}"
        return
    result.reference, result.reference_note = reference.kind, reference.note
    result.textbook = reference.textbook
    yardstick = Yardstick(reference.tables, threshold, curves)
    result.triggers.extend(_measured_under(trigger, recipe, fp32_tables, yardstick) for trigger in triggers)


def _measured_under(trigger: Trigger, recipe: Recipe, fp32_tables: Tables, yardstick: Yardstick) -> TriggerResult:
    """The recipe's tables under one trigger against the yardstick. A function of its own so that one trigger's
    tables are freed before the next trigger's are built."""
    try:
        # The fp32 trigger is exactly the trial build that found the recipe; its tables are reused.
        tables = fp32_tables if trigger.name == "fp32" else tables_under(trigger, recipe)
    except TriggerUnavailable as error:
        return TriggerResult(trigger.name, UNAVAILABLE, reason=str(error))
    except Exception as error:  # the class itself fails under this trigger: a finding of its own
        return TriggerResult(trigger.name, ERROR, reason=describe(error))
    expected = yardstick.reference.cos.shape
    if tables.cos.shape != expected:
        reason = f"tables of shape {tuple(tables.cos.shape)}, expected {tuple(expected)}"
        return TriggerResult(trigger.name, ERROR, reason=reason)
    measurement = yardstick.measure(tables)
    return TriggerResult(trigger.name, CLEAN if measurement.first_wrong_position is None else EXCEEDS, measurement)


def recipes_within_budget(
    cls: type[nn.Module], positions: int, budget: int
) -> list[tuple[Recipe, Tables] | CannotBuild]:
    """find_recipes at full size, once runs at small sizes estimate that it fits in `budget` bytes (see memory's
    docstring); CannotBuild with the estimate when it does not. A class that cannot be built at a small size is not
    tried at full size, where nothing would bound what it takes: that error is its reason. The full-size run still
    stops once its allocations add up past the budget, for a class that outgrows its estimate. At 256 positions or
    fewer there is nothing smaller to estimate from, and the guarded run is all."""
    over = f"over the --max-memory budget of {format_size(budget)}"
    runs: list[tuple[int, Allocations]] = []
    for size in SMALL_POSITIONS:
        if size >= positions or (len(runs) >= 2 and same_ops(runs[-2][1], runs[-1][1])):
            break
        try:
            found = allocations(functools.partial(find_recipes, cls, size), budget)[0]
            # The estimate is of the recipes found, replayed: the tries that found them differ from size to size.
            runs.append((size, allocations(functools.partial(replay, found), budget)[1]))
        except OverBudget:
            raise CannotBuild(f"allocated {over} already at {size} positions") from None
    if len(runs) >= 2:
        estimate = extrapolate(runs[-2], runs[-1], positions)
        if estimate.size > budget:
            raise CannotBuild(f"{estimate.describe(positions)}, {over}: not run at full size")
    try:
        return allocations(functools.partial(find_recipes, cls, positions), budget)[0]
    except OverBudget:
        raise CannotBuild(f"stopped: allocated {over} at {positions} positions") from None


def probe_class(
    cls: type[nn.Module],
    triggers: Sequence[Trigger],
    positions: int,
    threshold: float,
    budget: int = DEFAULT_BUDGET,
    runtime: bool = False,
    curves: bool = False,
) -> list[ClassResult]:
    """One result per table the class provides (one per layer type for per-layer-type classes); with `runtime`,
    each measured one's run-time cost too (see cost.py); with `curves`, each measurement's error at each position
    (for --plot)."""
    name = qualified_name(cls)
    try:
        recipes = recipes_within_budget(cls, positions, budget)
    except Exception as error:  # CannotBuild, or anything the class raised while we inspected it
        return [ClassResult(name, reason=describe(error))]
    results = []
    while recipes:
        entry = recipes.pop(0)  # out of the list once probed: a layer type's tables are freed before the next's
        if isinstance(entry, CannotBuild):
            results.append(ClassResult(name, reason=str(entry)))
            continue
        recipe, fp32_tables = entry
        result = ClassResult(f"{name}[{recipe.variant}]" if recipe.variant else name)
        _probe_recipe(result, recipe, fp32_tables, triggers, threshold, curves)
        if runtime and result.measured:
            result.runtime = runtime_cost(recipe)
        results.append(result)
    return results


def probe(
    targets: Sequence[str],
    trigger_names: Sequence[str],
    positions: int,
    threshold: float,
    progress: Progress | None = None,
    budget: int = DEFAULT_BUDGET,
    runtime: bool = False,
    curves: bool = False,
) -> ProbeReport:
    """Discover the targets' rotary classes and probe each (`curves`: see probe_class). Raises discover.TargetError
    for a usage error. From then on, glibc maps each block of LARGE_BLOCK bytes or more on its own in this process."""
    triggers = [TRIGGERS[name] for name in trigger_names]
    discovery = Discovery()
    # The tables are small ([N, D]); on a few cores OpenMP's thread hand-offs cost 10-30x the work itself.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    _large_blocks_mapped()
    measure = functools.partial(
        probe_class, triggers=triggers, positions=positions, threshold=threshold, budget=budget, runtime=runtime,
        curves=curves,
    )  # fmt: skip
    work = functools.partial(_probe_one, measure=measure, discovery=discovery, progress=progress)
    try:
        # Forked processes probe the classes found while the next modules are imported here: transformers 5.24.0's
        # imports took 13 s of one core, while the other idled.
        entries = enumerate(_frozen_when_found(discovered(targets, discovery)), start=1)
        by_class = map_files(work, entries, _processes(triggers), items_per_process=CLASSES_PER_PROCESS)
    finally:
        gc.unfreeze()
        torch.set_num_threads(threads)
    results = [result for class_results in by_class for result in class_results]
    return ProbeReport(positions, threshold, list(trigger_names), results, discovery.import_failures)


def _frozen_when_found(classes: Iterator[type[nn.Module]]) -> Iterator[type[nn.Module]]:
    """The classes, each once what the imports made so far is collected and frozen: it lives to the end, and frozen,
    it is not traversed again by the collection after each class (0.25 s each for transformers' 287 modules, none
    frozen), nor copied into a forked process that touches it. A collection traverses only what is not frozen yet."""
    for cls in classes:
        gc.collect()
        gc.freeze()
        yield cls


def _processes(triggers: Sequence[Trigger]) -> int:
    """How many classes are probed at once, each in a process forked from this one: up to `PARALLEL_CLASSES`, one per
    core; one where a process cannot be forked, or where a trigger cannot run forked (DeepSpeed's process group).
    `--runtime-cost` counts copies and graph breaks, not time: it forks too (transformers 5.24.0, two triggers, two
    cores: 77.0 s in one process, 36.5 s forked, the same report byte for byte)."""
    if not hasattr(os, "fork") or not all(trigger.forks for trigger in triggers):
        return 1
    return min(os.cpu_count() or 1, PARALLEL_CLASSES)


def _probe_one(
    entry: tuple[int, type[nn.Module]],
    measure: Callable[[type[nn.Module]], list[ClassResult]],
    discovery: Discovery,
    progress: Progress | None,
) -> list[ClassResult]:
    """One class of a probe's run (`entry`: its place from 1, and the class), measured by `measure` (`probe_class`
    with the run's settings); `discovery` as it was when the class was handed out (in a forked process, a copy)."""
    index, cls = entry
    if progress is not None:
        progress(index, len(discovery.classes) if discovery.complete else None, qualified_name(cls))
    with quiet_model_code():
        class_results = measure(cls)
        for result in class_results:
            result.found_by = discovery.found_by[qualified_name(cls)]
    _release_memory()
    return class_results
