"""`rope-lint probe --output-format markdown`: a GitHub table per class, read back as a table."""

from __future__ import annotations

import re

import torch

from rope_lint.cli import main
from rope_lint.probe.markdown import cell, render_markdown
from rope_lint.probe.report import ERROR, ClassResult, Measurement, ProbeReport, TriggerResult

SAFE = "fixtures/probe/rotary_classes.py:SafeRotaryEmbedding"
LEGACY = "fixtures/probe/rotary_classes.py:LegacyRotaryEmbedding"
HEADER = ["condition", "max error", "first wrong position", "share wrong", "result"]


def cells(row: str) -> list[str]:
    """A GitHub table row's cells, split on the `|` that are not escaped, with the escapes undone."""
    assert row.startswith("|") and row.endswith("|"), row
    return [part.strip().replace("\\|", "|") for part in re.split(r"(?<!\\)\|", row[1:-1])]


def tables(markdown: str) -> dict[str, list[list[str]]]:
    """Each `### `class`` heading's table, as its header and body rows of cells; checks the separator row and that
    every row has the header's number of cells."""
    rows: dict[str, list[list[str]]] = {}
    heading = ""
    for line in markdown.splitlines():
        if line.startswith("### "):
            heading = re.match(r"### `([^`]+)`", line).group(1)
        elif line.startswith("|"):
            rows.setdefault(heading, []).append(cells(line))
    found = {}
    for heading, (header, separator, *body) in rows.items():
        assert all(re.fullmatch(r":?-{3,}:?", part) for part in separator), separator
        assert all(len(row) == len(header) == len(separator) for row in body)
        found[heading] = [header, *body]
    return found


def test_a_table_per_class_then_the_summary(in_repo, capsys):
    code = main(
        ["probe", LEGACY, SAFE, "--trigger", "fp32,zero-init-bf16", "--positions", "512", "--output-format", "markdown"]
    )
    assert code == 1
    markdown = capsys.readouterr().out
    found = tables(markdown)
    assert list(found) == ["rotary_classes.LegacyRotaryEmbedding", "rotary_classes.SafeRotaryEmbedding"]
    for rows in found.values():
        assert rows[0] == HEADER
        assert [row[0] for row in rows[1:]] == ["fp32", "zero-init-bf16"]
    legacy = dict((row[0], row) for row in found["rotary_classes.LegacyRotaryEmbedding"][1:])
    assert float(legacy["zero-init-bf16"][1]) > 0.5  # positions past 256 land on their neighbours
    first_wrong, share, result = legacy["zero-init-bf16"][2:]
    assert (first_wrong, result) == ("257", "exceeds")
    assert share.endswith("%") and float(share[:-1]) > 0
    assert legacy["fp32"][2:] == ["-", "0.00%", "clean"]
    safe = dict((row[0], row) for row in found["rotary_classes.SafeRotaryEmbedding"][1:])
    assert float(safe["zero-init-bf16"][1]) < 4e-3 and safe["zero-init-bf16"][4] == "clean"
    assert "### `rotary_classes.LegacyRotaryEmbedding`: exceeds" in markdown
    last = markdown.strip().splitlines()[-1]
    assert last.startswith("**Summary:** 2 classes measured") and "1 exceed 0.004 under zero-init-bf16 (1)" in last


def test_a_pipe_in_a_reason_stays_inside_its_cell():
    measurement = Measurement(1e-3, 2e-3, None, 0.0, torch.zeros(4))
    result = ClassResult("m.Rotary", construction="config", positions=4, dim=2)
    result.triggers = [
        TriggerResult("fp32", "clean", measurement),
        TriggerResult("to-bf16", ERROR, reason="returned a | b\nnot a table"),
    ]
    report = ProbeReport(4, 4e-3, ["fp32", "to-bf16"], [result], [])
    rows = tables(render_markdown([("", report)]))["m.Rotary"]
    assert rows[1] == ["fp32", "0.002", "-", "0.00%", "clean"]
    assert rows[2] == ["to-bf16", "-", "-", "-", "error: returned a | b not a table"]
    assert cell("a\\|b") == "a\\\\\\|b"  # a backslash of the text is not taken for the pipe's escape


def test_an_unbuilt_class_gets_a_line_not_a_table():
    report = ProbeReport(4, 4e-3, ["fp32"], [ClassResult("m.Broken", reason="forward raised | oops")], [])
    markdown = render_markdown([("", report)])
    assert "*not built:* forward raised \\| oops" in markdown
    assert tables(markdown) == {}
