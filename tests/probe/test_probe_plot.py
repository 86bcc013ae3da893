"""`rope-lint probe --plot DIR`: the figures are written, at their sizes, with something drawn in them; without
matplotlib, one line and exit 2 before anything is probed."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy
from matplotlib import colors, image
from test_probe_compare import OPTIONS

from rope_lint.cli import main
from rope_lint.probe.plot import PLOT_INSTALL_HINT, figure_names
from rope_lint.probe.runner import probe

SAFE = "fixtures/probe/rotary_classes.py:SafeRotaryEmbedding"
LEGACY = "fixtures/probe/rotary_classes.py:LegacyRotaryEmbedding"
# Each trigger keeps its colour: zero-init-bf16 is the fourth of TRIGGER_NAMES, matplotlib's C3.
ZERO_INIT_COLOUR = numpy.array(colors.to_rgb("C3"))


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the PNG header (the IHDR chunk)."""
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n" and header[12:16] == b"IHDR"
    return struct.unpack(">II", header[16:24])


def pixels(path: Path) -> numpy.ndarray:
    return image.imread(path)[..., :3]


def coloured(path: Path, colour: numpy.ndarray) -> int:
    """How many pixels are (nearly) `colour`."""
    return int((numpy.abs(pixels(path) - colour).max(axis=-1) < 0.05).sum())


def assert_drawn(path: Path) -> None:
    drawn = pixels(path)
    assert len(numpy.unique(drawn.reshape(-1, 3), axis=0)) > 20
    assert drawn.std() > 0.05


def test_a_figure_per_class_and_a_summary(in_repo, tmp_path, capsys):
    folder = tmp_path / "figures"  # made by the probe
    assert main(["probe", LEGACY, SAFE, *OPTIONS, "--plot", str(folder)]) == 1
    assert capsys.readouterr().err == f"rope-lint probe: wrote 3 figures to {folder}\n"
    legacy = folder / "rotary_classes.LegacyRotaryEmbedding.png"
    safe = folder / "rotary_classes.SafeRotaryEmbedding.png"
    summary = folder / "summary.png"
    assert sorted(folder.iterdir()) == sorted([legacy, safe, summary])
    assert png_size(legacy) == png_size(safe) == (800, 450)
    assert png_size(summary) == (800, 300)  # 3 inches high at least, 100 dpi
    for path in (legacy, safe, summary):
        assert_drawn(path)
    # The zero-init-bf16 curve is drawn: it jumps to ~1 from position 257 on the legacy class, a tall block of its
    # colour; on the safe class it is a flat line.
    assert coloured(legacy, ZERO_INIT_COLOUR) > 3 * coloured(safe, ZERO_INIT_COLOUR) > 0


def test_compared_figures_have_a_panel_per_side(compare_trees, tmp_path, capsys):
    folder = tmp_path / "figures"
    assert main(["probe", f"{compare_trees}.py", *OPTIONS, "--compare", "../before", "--plot", str(folder)]) == 0
    classes = ("RotaryEmbedding", "NewRotaryEmbedding", "OldRotaryEmbedding")
    expected = sorted([*(f"{compare_trees}.{name}.png" for name in classes), "summary.png"])
    assert sorted(path.name for path in folder.iterdir()) == expected
    rotary = folder / f"{compare_trees}.RotaryEmbedding.png"
    assert png_size(rotary) == (1200, 450)
    assert png_size(folder / "summary.png") == (1600, 300)
    assert_drawn(rotary)
    # Before, the legacy class's zero-init-bf16 curve fills the left panel from position 257; after, a flat line.
    left, right = pixels(rotary)[:, :600], pixels(rotary)[:, 600:]
    near = [int((numpy.abs(half - ZERO_INIT_COLOUR).max(axis=-1) < 0.05).sum()) for half in (left, right)]
    assert near[0] > 3 * near[1] > 0


def test_the_curve_is_each_positions_largest_cos_error_and_kept_only_for_a_plot(in_repo):
    [result] = probe([LEGACY], ["zero-init-bf16"], 512, 4e-3, curves=True).classes
    measurement = result.triggers[0].measurement
    curve = measurement.cos_error_by_position
    assert curve.shape == (512,)
    assert curve.max().item() == numpy.float32(measurement.cos_max_abs_error)
    assert curve[:257].max().item() < 4e-3 < curve[257].item()
    [result] = probe([LEGACY], ["zero-init-bf16"], 512, 4e-3).classes
    assert result.triggers[0].measurement.cos_error_by_position is None


def test_file_names_are_safe_and_unique():
    names = ["m.A[x/y]", "m.A[x:y]", "m.a[x/y]", "summary", "..hidden", "m.Ünïcode"]
    files = figure_names(names)
    assert all(
        name.endswith(".png") and set(name) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        for name in files.values()
    )
    lowered = [name.lower() for name in files.values()]
    assert len(set(lowered)) == len(names) and "summary.png" not in lowered
    assert files["m.A[x/y]"] == "m.A_x_y.png" and files["m.A[x:y]"] == "m.A_x_y-2.png"
    assert not any(name.startswith(".") for name in files.values())


def test_without_matplotlib_one_line_and_exit_2_before_probing(probe_cli, tmp_path):
    folder = tmp_path / "figures"
    # A target that names nothing: the matplotlib check comes first, so its line is the one printed.
    run = probe_cli("no_such_module_anywhere", "--plot", str(folder), blocked=["matplotlib"])
    assert run.returncode == 2
    assert run.stderr == PLOT_INSTALL_HINT + "\n"
    assert "pip install 'rope-lint[plot]'" in run.stderr
    assert run.stdout == ""
    assert not folder.exists()


def test_a_plot_path_that_is_a_file_is_one_line_and_exit_2(in_repo, tmp_path, capsys):
    taken = tmp_path / "taken.png"
    taken.write_text("")
    assert main(["probe", SAFE, "--plot", str(taken)]) == 2
    assert capsys.readouterr().err == f"rope-lint probe: error: --plot {taken}: not a folder\n"
