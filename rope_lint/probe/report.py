"""Error metrics of a table against its reference, the result records, and their table and JSON forms.

Each class gets one status, the first of these that applies:

- `unbuilt`: nothing of it was measured. It could not be constructed, its forward could not be called or returned
  nothing readable as positions x frequencies under plain float32, it has no float64 reference, or it would take
  more than the memory budget at full size. Its `reason` says which.
- `failed`: built and measured under plain float32, but under some trigger it raised or returned something that is
  not a table of the reference's shape. Its `reason` names the first such trigger and what happened; each
  trigger's own entry has the detail.
- `exceeds`: measured under every trigger that can run here, and over the threshold under at least one.
- `clean`: measured under every trigger that can run here, and within the threshold under each.

A trigger that cannot run here at all (`unavailable`: DeepSpeed missing) says nothing about the class and leaves its
status alone. `unbuilt` and `failed` classes are the unmeasured ones.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from rope_lint.probe.build import Tables
from rope_lint.probe.cost import RuntimeCost
from rope_lint.probe.discover import FOUND_BY_COMPUTATION, FOUND_BY_NAME, ImportFailure
from rope_lint.probe.readings import largest_magnitude

# Statuses of a trigger's result.
CLEAN = "clean"
EXCEEDS = "exceeds"
ERROR = "error"  # the class raised, or returned no readable table, under this trigger
UNAVAILABLE = "unavailable"  # the trigger cannot run here (DeepSpeed missing)
# Statuses of a class that are not a trigger's (see the module's docstring).
UNBUILT = "unbuilt"
FAILED = "failed"
CLASS_STATUSES = (CLEAN, EXCEEDS, UNBUILT, FAILED)
NOT_MEASURED = "-"  # a figure that was not measured, in the tables that show several


@dataclass(frozen=True)
class Measurement:
    """How far one trigger's tables are from the reference."""

    cos_max_abs_error: float
    sin_max_abs_error: float
    first_wrong_position: int | None  # first position with a wrong cos/sin element (see measure)
    wrong_fraction: float  # of all cos and sin elements, the share that is wrong
    # The largest cos error at each position, float32 [N], for --plot's curves; None without. Kept only for a plot:
    # a small tensor kept per measurement holds the allocator's heap, and took the probe of 5.24.0 from 1.2 to 1.6 GB.
    cos_error_by_position: torch.Tensor | None = field(default=None, repr=False, compare=False)

    @property
    def max_error(self) -> float:
        return max(self.cos_max_abs_error, self.sin_max_abs_error)


# Elements of a table compared at once (2 MB of float64): a yardstick works through the rows in blocks of about this
# size, so that its temporaries (errors, limits, wrong flags: several times the block) stay small whatever the
# table's width. Over whole [4096, 1024] tables they took 170 MB at once.
_BLOCK_ELEMENTS = 1 << 18


class Yardstick:
    """Float64 reference tables, and the error past which an element of them is wrong: `threshold` times
    max(1, |reference value|). The threshold is one bf16 rounding of values up to 1, and tables scaled above 1
    (YaRN's attention factor) round more coarsely. Made once per class, for all its triggers; with `curves`, each
    measurement keeps its error at each position."""

    def __init__(self, reference: Tables, threshold: float, curves: bool = False) -> None:
        self.reference, self.threshold, self.curves = reference, threshold, curves
        # Most tables stay within [-1, 1]: their limit is the threshold itself, with no per-element limit to compute.
        self._within_one = all(
            largest_magnitude(table) <= 1.0 for table in (reference.cos, reference.sin) if table.numel()
        )

    def _errors(self, table: torch.Tensor, reference: torch.Tensor) -> tuple[torch.Tensor, float, torch.Tensor | None]:
        """(|table - reference| with NaN as infinite, its largest value, which elements are wrong) for one block of
        rows. Which are wrong is None where the largest error is within the threshold: no element's limit is below it,
        so no element needs comparing."""
        error = torch.sub(table, reference).abs_()
        largest = error.max().item()
        if math.isnan(largest):  # a NaN is the maximum of any tensor that holds one
            largest = math.inf
            error.nan_to_num_(nan=math.inf)
        if largest <= self.threshold:
            return error, largest, None
        limit = self.threshold if self._within_one else reference.abs().clamp_(min=1.0).mul_(self.threshold)
        return error, largest, error > limit

    def measure(self, tables: Tables) -> Measurement:
        """Compare float64 tables with the reference; NaN counts as an infinite error."""
        rows, width = tables.cos.shape
        block = max(1, _BLOCK_ELEMENTS // max(1, width))
        cos_max = sin_max = -math.inf
        wrong, first_wrong, by_position = 0, None, []
        for start in range(0, rows, block):
            part = slice(start, start + block)
            cos_error, cos_largest, cos_wrong = self._errors(tables.cos[part], self.reference.cos[part])
            _, sin_largest, sin_wrong = self._errors(tables.sin[part], self.reference.sin[part])
            cos_max, sin_max = max(cos_max, cos_largest), max(sin_max, sin_largest)
            flags = [flag for flag in (cos_wrong, sin_wrong) if flag is not None]
            counts = sum(torch.count_nonzero(flag).item() for flag in flags)
            wrong += counts
            if first_wrong is None and counts:
                either = flags[0] if len(flags) == 1 else flags[0] | flags[1]
                first_wrong = start + int(either.any(dim=1).nonzero()[0].item())
            if self.curves:
                by_position.append(cos_error.amax(dim=1).float())
        return Measurement(
            cos_max_abs_error=cos_max,
            sin_max_abs_error=sin_max,
            first_wrong_position=first_wrong,
            wrong_fraction=wrong / (tables.cos.numel() + tables.sin.numel()),
            cos_error_by_position=torch.cat(by_position) if self.curves else None,
        )


@dataclass(frozen=True)
class TriggerResult:
    trigger: str
    status: str  # CLEAN, EXCEEDS, ERROR or UNAVAILABLE
    measurement: Measurement | None = None
    reason: str | None = None


@dataclass
class ClassResult:
    """One class: how it was built and measured, or why it was not."""

    name: str  # module.qualname
    reason: str | None = None  # set when nothing of the class was measured (it is unbuilt)
    construction: str | None = None  # "old-style" or "config"
    reference: str | None = None  # "float64 build" or "textbook"
    reference_note: str | None = None
    textbook: str | None = None  # the float64 build against a textbook RoPE (see reference.Reference.textbook)
    found_by: str | None = None  # "name", "computation" or "target" (see discover.FOUND_BY_*)
    positions: int | None = None
    dim: int | None = None  # width of the cos/sin table
    triggers: list[TriggerResult] = field(default_factory=list)
    runtime: RuntimeCost | None = None  # with --runtime-cost, for a measured class

    @property
    def status(self) -> str:
        if self.reason is not None or not self.triggers:
            return UNBUILT
        if self.failed_triggers:
            return FAILED
        return EXCEEDS if self.exceeding_triggers else CLEAN

    @property
    def measured(self) -> bool:
        """Measured under every trigger that can run here (clean or exceeds)."""
        return self.status in (CLEAN, EXCEEDS)

    @property
    def unmeasured_reason(self) -> str | None:
        """Why the class is unbuilt or failed; None when it was measured."""
        failed = self.failed_triggers
        if self.reason is not None or not failed:
            return self.reason
        first = next(result for result in self.triggers if result.status == ERROR)
        also = f" (also under {', '.join(failed[1:])})" if failed[1:] else ""
        return f"under {first.trigger}: {first.reason}{also}"

    @property
    def exceeding_triggers(self) -> list[str]:
        return [result.trigger for result in self.triggers if result.status == EXCEEDS]

    @property
    def failed_triggers(self) -> list[str]:
        return [result.trigger for result in self.triggers if result.status == ERROR]


@dataclass
class ProbeReport:
    positions: int
    threshold: float
    trigger_names: list[str]
    classes: list[ClassResult]
    import_failures: list[ImportFailure]

    @property
    def exceeds(self) -> bool:
        """Over the threshold under some trigger: a failed class's exceeding triggers count too."""
        return any(result.exceeding_triggers for result in self.classes)

    def status_counts(self) -> dict[str, int]:
        counts = Counter(result.status for result in self.classes)
        return {status: counts[status] for status in CLASS_STATUSES}

    def summary_line(self) -> str:
        counts = self.status_counts()
        measured = counts[CLEAN] + counts[EXCEEDS]
        parts = [_count(measured, "class", "classes") + " measured", f"{counts[UNBUILT]} not built"]
        if counts[FAILED]:
            parts.append(f"{counts[FAILED]} failed under a trigger")
        found_by = Counter(result.found_by for result in self.classes)
        if found_by[FOUND_BY_COMPUTATION]:  # what discovery by computation adds to the names
            by_name, by_computation = found_by[FOUND_BY_NAME], found_by[FOUND_BY_COMPUTATION]
            parts.append(f"{by_name} found by name, {by_computation} only by computation")
        if self.import_failures:
            parts.append(_count(len(self.import_failures), "module", "modules") + " failed to import")
        exceeding = [result for result in self.classes if result.exceeding_triggers]
        counts = Counter(trigger for result in exceeding for trigger in result.exceeding_triggers)
        verdict = f"{len(exceeding)} exceed {self.threshold:g}"
        if counts:
            verdict += " under " + ", ".join(f"{name} ({count})" for name, count in counts.items())
        return ", ".join(parts) + "; " + verdict

    def by_name(self) -> dict[str, ClassResult]:
        return {result.name: result for result in self.classes}

    def to_json(self) -> dict[str, Any]:
        return {
            "positions": self.positions,
            "threshold": self.threshold,
            "triggers": self.trigger_names,
            "classes": [class_json(result) for result in self.classes],
            "import_failures": [
                {"module": failure.module, "reason": failure.reason} for failure in self.import_failures
            ],
            "exceeds": self.exceeds,
            "statuses": self.status_counts(),
            "summary": self.summary_line(),
        }

    def render_table(self) -> str:
        header = f"{'class / trigger':<40} {'cos err':>10} {'sin err':>10} {'first wrong':>11} {'wrong':>8}  result"
        lines = [header, "-" * len(header)]
        for result in self.classes:
            status = result.status
            # Findings and failures in capitals, so that they stand out from the clean ones.
            lines.append(f"{result.name}  [{status if status == CLEAN else status.upper()}]")
            if status == UNBUILT:
                lines.append(f"  not built: {result.reason}")
                continue
            lines.append(
                f"  ({result.construction}, N={result.positions}, D={result.dim}, reference: {result.reference}"
                + (f"; {result.reference_note}" if result.reference_note else "")
                + (f"; textbook: {result.textbook}" if result.textbook else "")
                + ")"
            )
            lines.extend(_trigger_row(trigger_result) for trigger_result in result.triggers)
            if result.runtime is not None:
                lines.append(f"  run time: {result.runtime.describe()}")
        if self.import_failures:
            lines += ["", "modules that failed to import:"]
            lines += [f"  {failure.module}: {failure.reason}" for failure in self.import_failures]
        lines += ["", self.summary_line()]
        return "\n".join(lines)


def trigger_cells(result: ClassResult | None, trigger: str) -> tuple[str, str, str, str]:
    """One trigger's max error (the larger of cos and sin), first wrong position, share wrong and result, as text
    for the markdown and --compare tables: NOT_MEASURED where nothing was measured, the result `absent` for a class
    the report does not have (one side of a comparison), and the class's status where no trigger ran (unbuilt)."""
    if result is None:
        return NOT_MEASURED, NOT_MEASURED, NOT_MEASURED, "absent"
    entry = next((item for item in result.triggers if item.trigger == trigger), None)
    if entry is None:
        return NOT_MEASURED, NOT_MEASURED, NOT_MEASURED, result.status
    if entry.measurement is None:
        return NOT_MEASURED, NOT_MEASURED, NOT_MEASURED, f"{entry.status}: {entry.reason}"
    measurement = entry.measurement
    first = NOT_MEASURED if measurement.first_wrong_position is None else str(measurement.first_wrong_position)
    return f"{measurement.max_error:.3g}", first, f"{measurement.wrong_fraction:.2%}", entry.status


def paired_classes(reports: Sequence[ProbeReport]) -> list[tuple[str, list[ClassResult | None]]]:
    """The classes of several probes of one tree (before and after a change, the current one last), matched by module
    and class name: each name once, with its result in each report (None where absent). The current report's classes
    come first, in its order; then those it no longer has."""
    sides = [report.by_name() for report in reports]
    names = dict.fromkeys(name for side in reversed(sides) for name in side)
    return [(name, [side.get(name) for side in sides]) for name in names]


def _count(number: int, singular: str, plural: str) -> str:
    return f"{number} {singular if number == 1 else plural}"


def _number(value: float) -> float | str:
    """JSON has no infinity or NaN; those are written as the strings "inf" and "nan"."""
    return value if math.isfinite(value) else str(value)


def class_json(result: ClassResult) -> dict[str, Any]:
    """One class's JSON entry (also each side's in a --compare report)."""
    triggers = {}
    for trigger_result in result.triggers:
        entry: dict[str, Any] = {"status": trigger_result.status, "reason": trigger_result.reason}
        if trigger_result.measurement is not None:
            measurement = trigger_result.measurement
            entry |= {
                "cos_max_abs_error": _number(measurement.cos_max_abs_error),
                "sin_max_abs_error": _number(measurement.sin_max_abs_error),
                "first_wrong_position": measurement.first_wrong_position,
                "wrong_fraction": measurement.wrong_fraction,
            }
        triggers[trigger_result.trigger] = entry
    return {
        "class": result.name,
        "status": result.status,
        "built": result.construction is not None,
        "measured": result.measured,
        "reason": result.unmeasured_reason,
        "construction": result.construction,
        "reference": result.reference,
        "reference_note": result.reference_note,
        "textbook": result.textbook,
        "found_by": result.found_by,
        "positions": result.positions,
        "dim": result.dim,
        "triggers": triggers,
        "runtime": None if result.runtime is None else _runtime_json(result.runtime),
    }


def _runtime_json(cost: RuntimeCost) -> dict[str, Any]:
    return {
        "cross_device_copies": cost.copies,
        "compiled_cross_device_copies": cost.compiled_copies,
        "compiles": cost.compiles,
        "graph_breaks": None if cost.graph_breaks is None else list(cost.graph_breaks),
        "problems": list(cost.problems),
    }


def _trigger_row(result: TriggerResult) -> str:
    if result.measurement is None:
        return f"  {result.trigger:<38} {'':>10} {'':>10} {'':>11} {'':>8}  {result.status}: {result.reason}"
    measurement = result.measurement
    first_wrong = "-" if measurement.first_wrong_position is None else str(measurement.first_wrong_position)
    verdict = result.status.upper() if result.status == EXCEEDS else result.status  # make findings stand out
    return (
        f"  {result.trigger:<38} {measurement.cos_max_abs_error:>10.4g} {measurement.sin_max_abs_error:>10.4g}"
        f" {first_wrong:>11} {measurement.wrong_fraction:>8.2%}  {verdict}"
    )
