"""`rope-lint probe --compare BEFORE_DIR`: the targets probed as they are and as BEFORE_DIR has them, side by side.

The trees are conftest's `compare_trees`; the figures drawn from them are in test_probe_plot.py.
"""

from __future__ import annotations

import json

import pytest
from test_probe_markdown import cells, tables

from rope_lint.cli import main

OPTIONS = ["--trigger", "fp32,zero-init-bf16", "--positions", "512"]


def probe(*args: str) -> int:
    return main(["probe", *args])


def test_json_pairs_classes_by_name_and_the_exit_status_is_the_after_sides(compare_trees, capsys):
    # Before, two classes exceed; after, none does: 0.
    assert probe(f"{compare_trees}.py", *OPTIONS, "--compare", "../before", "--output-format", "json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["before_dir"] == "../before"
    assert (report["positions"], report["triggers"]) == (512, ["fp32", "zero-init-bf16"])
    pairs = {entry["class"]: entry for entry in report["classes"]}
    assert list(pairs) == [
        f"{compare_trees}.RotaryEmbedding",
        f"{compare_trees}.NewRotaryEmbedding",
        f"{compare_trees}.OldRotaryEmbedding",
    ]
    rotary = pairs[f"{compare_trees}.RotaryEmbedding"]
    assert rotary["before"]["triggers"]["zero-init-bf16"]["first_wrong_position"] == 257
    assert rotary["after"]["triggers"]["zero-init-bf16"]["first_wrong_position"] is None
    assert (rotary["before"]["status"], rotary["after"]["status"]) == ("exceeds", "clean")
    assert pairs[f"{compare_trees}.NewRotaryEmbedding"]["before"] is None
    assert pairs[f"{compare_trees}.OldRotaryEmbedding"]["after"] is None
    assert pairs[f"{compare_trees}.OldRotaryEmbedding"]["before"]["status"] == "exceeds"
    assert report["before"]["statuses"]["exceeds"] == 2 and report["after"]["statuses"]["exceeds"] == 0
    assert (report["before"]["exceeds"], report["after"]["exceeds"]) == (True, False)


def test_markdown_has_a_before_and_an_after_column_for_each_figure(compare_trees, capsys):
    assert probe(f"{compare_trees}.py", *OPTIONS, "--compare", "../before", "--output-format", "markdown") == 0
    markdown = capsys.readouterr().out
    found = tables(markdown)
    header, fp32, zero_init = found[f"{compare_trees}.RotaryEmbedding"]
    figures = ["max error", "first wrong position", "share wrong", "result"]
    assert header == ["condition"] + [f"{figure} {side}" for figure in figures for side in ("before", "after")]
    row = dict(zip(header, zero_init, strict=True))
    assert (row["condition"], row["first wrong position before"], row["first wrong position after"]) == (
        "zero-init-bf16",
        "257",
        "-",
    )
    assert float(row["max error before"]) > 0.5 > 4e-3 > float(row["max error after"])
    assert (row["result before"], row["result after"]) == ("exceeds", "clean")
    assert fp32[-2:] == ["clean", "clean"]
    # A class on one side only: the other side's cells say it is absent.
    old = dict(zip(header, found[f"{compare_trees}.OldRotaryEmbedding"][2], strict=True))
    assert (old["result before"], old["result after"], old["max error after"]) == ("exceeds", "absent", "-")
    assert f"### `{compare_trees}.RotaryEmbedding`: before exceeds → after clean" in markdown
    before, after = [line for line in markdown.splitlines() if line.startswith("**")]
    assert before.startswith("**Before:** 2 classes measured") and "2 exceed 0.004" in before
    assert after.startswith("**After:** 2 classes measured") and "0 exceed 0.004" in after
    assert cells(f"| {before} |") == [before]  # no stray pipe in the summary


def test_table_shows_before_and_after_on_each_row(compare_trees, capsys):
    assert probe(f"{compare_trees}.py", *OPTIONS, "--compare", "../before") == 0
    table = capsys.readouterr().out
    assert f"{compare_trees}.RotaryEmbedding  [clean] (before: exceeds)" in table
    assert f"{compare_trees}.NewRotaryEmbedding  [clean] (before: absent)" in table
    [row] = [line for line in table.splitlines() if line.strip().startswith("zero-init-bf16") and "257 -> -" in line]
    assert "exceeds -> clean" in row
    assert "\nbefore: 2 classes measured" in table and "\nafter:  2 classes measured" in table


def test_a_module_target_is_imported_from_before_dir_first(fixture_module, tmp_path, monkeypatch, capsys):
    # By name, not by path: the package is found on the import path, where BEFORE_DIR comes first on the before side.
    package = "compare_package_by_name"
    for side, fixture_class in (("before", "LegacyRotaryEmbedding"), ("after", "SafeRotaryEmbedding")):
        (tmp_path / side / package).mkdir(parents=True)
        (tmp_path / side / package / "__init__.py").write_text("")
        fixture_module(tmp_path / side / package / "modeling.py", {"RotaryEmbedding": fixture_class})
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path / "after"))
    target = f"{package}.modeling"
    assert probe(target, *OPTIONS, "--compare", "before", "--output-format", "json") == 0
    [entry] = json.loads(capsys.readouterr().out)["classes"]
    assert entry["class"] == f"{package}.modeling.RotaryEmbedding"
    assert (entry["before"]["status"], entry["after"]["status"]) == ("exceeds", "clean")


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_before_dir_that_is_not_a_folder_is_one_line_and_exit_2(in_repo, tmp_path, capsys, kind):
    before = tmp_path / "before"
    if kind == "file":
        before.write_text("")
    assert probe("fixtures/probe/rotary_classes.py:SafeRotaryEmbedding", "--compare", str(before)) == 2
    output = capsys.readouterr()
    expected = "not a folder" if kind == "file" else "no such folder"
    assert output.err == f"rope-lint probe: error: --compare {before}: {expected}\n"
    assert output.out == ""


def test_a_path_outside_the_current_folder_has_no_counterpart(compare_trees, tmp_path, capsys):
    assert probe(str(tmp_path / "before" / f"{compare_trees}.py"), "--compare", "../before") == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "lies outside the current folder" in error


def test_a_target_missing_from_before_dir_is_a_usage_error(compare_trees, tmp_path, capsys):
    (tmp_path / "after" / "added.py").write_text("import torch\n")
    assert probe("added.py", *OPTIONS, "--compare", "../before") == 2
    error = capsys.readouterr().err
    assert error.startswith("rope-lint probe: error: in ../before: ") and error.count("\n") == 1


def test_a_before_side_that_dies_is_one_line_and_exit_2(compare_trees, tmp_path, capsys):
    # os._exit: no exception that the probe could catch and report; the process just ends.
    (tmp_path / "before" / f"{compare_trees}.py").write_text("import os\nos._exit(3)\n")
    assert probe(f"{compare_trees}.py", *OPTIONS, "--compare", "../before") == 2
    error = capsys.readouterr().err
    assert error == "rope-lint probe: error: the probe of ../before exited with 3: no message\n"
