"""`--plot DIR`: figures of a probe, as PNG files.

- one per class (`<module.Class>.png`, sanitised): the largest cos error at each position under each condition, on a
  log scale, with the threshold; with `--compare`, a panel per side (before, after) sharing the scale, each condition
  in its own colour on both;
- `summary.png`: a classes x conditions heat map of the max error (cos or sin), one panel per side, the values
  written in the cells while there are few of them; grey where nothing was measured.

matplotlib is the optional `plot` extra, imported here only, and only once figures are asked for. The figures are
`matplotlib.figure.Figure`s saved directly, never pyplot's: no GUI backend is touched (PNGs render with Agg) and no
global state is left behind.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rope_lint.probe import TRIGGER_NAMES

if TYPE_CHECKING:
    from matplotlib.colors import Colormap
    from matplotlib.figure import Figure

    from rope_lint.probe.report import ClassResult, ProbeReport, TriggerResult

PLOT_INSTALL_HINT = "rope-lint probe --plot needs matplotlib: pip install 'rope-lint[plot]'"
DPI = 100
CLASS_FIGURE_INCHES = ((8.0, 4.5), (12.0, 4.5))  # one side, two sides (--compare): 800 x 450, 1200 x 450 pixels
SUMMARY_WIDTH_INCHES = 8.0  # per side
SUMMARY_HEIGHT_INCHES = (1.5, 0.3, 3.0)  # fixed part, per class, at least
ANNOTATED_CELLS = 120  # per panel; more and the numbers would not fit their cells
# Errors are drawn on a log scale, between these.
ERROR_FLOOR, ERROR_CEILING = 1e-12, 10.0
SUMMARY_NAME = "summary.png"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def missing_matplotlib() -> str | None:
    """The line to print when matplotlib cannot be imported; None when it can."""
    try:
        import matplotlib  # noqa: F401  (only checks that the optional extra is installed)
    except ImportError:
        return PLOT_INSTALL_HINT
    return None


def figure_names(names: Sequence[str]) -> dict[str, str]:
    """A PNG file name for each class name: characters other than letters, digits, `.`, `_` and `-` become `_`,
    and a name taken already (case aside, for case-insensitive file systems; `summary.png` among them) gets `-2`,
    `-3`, ..."""
    taken = {SUMMARY_NAME.lower()}
    files = {}
    for name in names:
        stem = _UNSAFE.sub("_", name).strip("._")[:150] or "class"
        candidate, number = f"{stem}.png", 1
        while candidate.lower() in taken:
            number += 1
            candidate = f"{stem}-{number}.png"
        taken.add(candidate.lower())
        files[name] = candidate
    return files


def _summary_size(classes: int, sides: int) -> tuple[int, int]:
    """summary.png's width and height in pixels."""
    fixed, per_class, least = SUMMARY_HEIGHT_INCHES
    return round(SUMMARY_WIDTH_INCHES * sides * DPI), round(max(least, fixed + per_class * classes) * DPI)


def write_figures(directory: Path, sides: Sequence[tuple[str, ProbeReport]]) -> list[Path]:
    """One report, as [("", report)], or a comparison, as [("before", before), ("after", after)]: write the figures
    into `directory` (made if missing) and return their paths, the summary's last. A class measured on no side has
    no curve to draw and gets no figure of its own."""
    from matplotlib.figure import Figure  # the optional extra: only here

    from rope_lint.probe.report import paired_classes  # imports torch, which the matplotlib check does without

    directory.mkdir(parents=True, exist_ok=True)
    reports = [report for _, report in sides]
    pairs = paired_classes(reports)
    names = figure_names([name for name, _ in pairs])
    written = []
    for name, results in pairs:
        if any(_measured_triggers(result) for result in results):
            figure = Figure(figsize=CLASS_FIGURE_INCHES[len(sides) - 1], dpi=DPI, layout="constrained")
            _draw_curves(figure, name, [label for label, _ in sides], results, reports[-1].threshold)
            written.append(_save(figure, directory / names[name]))
    width, height = _summary_size(len(pairs), len(sides))
    figure = Figure(figsize=(width / DPI, height / DPI), dpi=DPI, layout="constrained")
    _draw_summary(figure, sides, [name for name, _ in pairs])
    written.append(_save(figure, directory / SUMMARY_NAME))
    return written


def _save(figure: Figure, path: Path) -> Path:
    figure.savefig(path, dpi=DPI)
    return path


def _measured_triggers(result: ClassResult | None) -> list[TriggerResult]:
    return [] if result is None else [entry for entry in result.triggers if entry.measurement is not None]


def _colour(trigger: str) -> str:
    # Each condition keeps its colour from figure to figure.
    return f"C{TRIGGER_NAMES.index(trigger) % 10}"


def _draw_curves(
    figure: Figure, name: str, labels: Sequence[str], results: Sequence[ClassResult | None], threshold: float
) -> None:
    """One panel per side, sharing the y axis; each trigger one line, in its colour on every panel."""
    import numpy

    curves = [
        [(entry.trigger, entry.measurement.cos_error_by_position.numpy()) for entry in _measured_triggers(result)]
        for result in results
    ]
    # A log scale has no 0 (position 0's cos is exact): zeros are drawn on the axis, just below the least error.
    positive = [curve[curve > 0].min() for side in curves for _, curve in side if (curve > 0).any()]
    bottom = max(ERROR_FLOOR, 0.5 * min(positive, default=ERROR_FLOOR))
    panels = figure.subplots(1, len(labels), squeeze=False, sharey=True)[0]
    for axes, label, side in zip(panels, labels, curves, strict=True):
        for trigger, curve in side:
            # NaN is an infinite error (see Yardstick.measure): drawn at the top of the scale rather than dropped.
            curve = numpy.clip(numpy.nan_to_num(curve, nan=ERROR_CEILING, posinf=ERROR_CEILING), bottom, ERROR_CEILING)
            axes.plot(curve, color=_colour(trigger), linewidth=0.8, label=trigger)
        axes.axhline(threshold, color="grey", linestyle=":", linewidth=1, label=f"threshold {threshold:g}")
        axes.set_yscale("log")
        axes.set_ylim(bottom=bottom)
        axes.set_xlabel("position")
        axes.set_title(label or None, fontsize=10)
        axes.grid(True, which="major", alpha=0.3)
    panels[0].set_ylabel("largest |cos error| over the frequencies")
    panels[-1].legend(fontsize=7, loc="best")
    figure.suptitle(name, fontsize=10)


def _draw_summary(figure: Figure, sides: Sequence[tuple[str, ProbeReport]], names: Sequence[str]) -> None:
    import numpy
    from matplotlib.colors import LogNorm

    triggers = sides[-1][1].trigger_names
    grids = []
    for _, report in sides:
        results = report.by_name()
        grid = numpy.full((len(names), len(triggers)), numpy.nan)
        for row, name in enumerate(names):
            for entry in _measured_triggers(results.get(name)):
                grid[row, triggers.index(entry.trigger)] = max(entry.measurement.max_error, ERROR_FLOOR)
        grids.append(numpy.ma.masked_invalid(numpy.minimum(grid, ERROR_CEILING)))
    values = [value for grid in grids for value in grid.compressed()]
    low = min(values, default=ERROR_FLOOR)
    norm = LogNorm(vmin=low, vmax=max(max(values, default=low), low * 10))
    axes_list = figure.subplots(1, len(sides), squeeze=False, sharey=True)[0]
    for axes, (label, _), grid in zip(axes_list, sides, grids, strict=True):
        image = axes.imshow(grid, norm=norm, cmap=_colour_map(), aspect="auto", interpolation="nearest")
        axes.set_xticks(range(len(triggers)), triggers, rotation=30, ha="right", fontsize=8)
        axes.set_yticks(range(len(names)), names, fontsize=7)
        axes.set_title(f"max error{' ' + label if label else ''} (grey: not measured)", fontsize=9)
        if grid.size <= ANNOTATED_CELLS:
            for (row, column), value in numpy.ndenumerate(grid.filled(numpy.nan)):
                if not math.isnan(value):
                    # Light text on the dark end of the map, dark on the light end.
                    dark = norm(value) < 0.5
                    axes.text(
                        column,
                        row,
                        f"{value:.1e}",
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="white" if dark else "black",
                    )
    figure.colorbar(image, ax=list(axes_list), label="max |error|")


def _colour_map() -> Colormap:
    from matplotlib import colormaps

    return colormaps["viridis"].with_extremes(bad="lightgrey")
