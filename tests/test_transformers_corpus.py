"""transformers 4.37.2 against the manual fix of PR #28760 (in 4.38.0): what rope-lint flags, and what its fix does.

Both wheels come from PyPI into the git-ignored test cache; a failed download fails these tests.
"""

from __future__ import annotations

import ast
import difflib
import re
import shutil
from pathlib import Path

import pytest
from helpers import REPO, enumeration_cast, rope_lint, unpacked_wheel

from rope_lint.diagnostics import Diagnostic
from rope_lint.engine import Settings, check_paths
from rope_lint.files import Excludes, discover
from rope_lint.rules import select_rules
from rope_lint.rules.analysis import enumerations
from rope_lint.rules.analysis.context import FileContext

# Measured with this test; the README and docs/measurements.md quote them.
EXPECTED_HAZARD_LINES = 94  # changed arange lines that enumerate in a floating dtype
# Of them, explicit float32 in code that only forward reaches: exact there (issue 20, false-alarm shape 7), so not
# RPL101's hazards but the informational RPL104's notes, which PR #28760's stricter policy changed too.
NOTE_LINES = 11
NOT_HAZARD_LINES = 24  # changed arange lines that could not (tests/data/pr28760_not_hazards.txt)
# Genuine float enumerations that the PR missed: 3 in a floating dtype, 3 integer enumerations times a Python float
# (RPL103), in the default dtype (PatchTST's and PatchTSMixer's sinusoid timescales and Whisper's `sinusoids`), and 5
# integer enumerations cast to their rotary class's `inv_freq` dtype (`.type_as(self.inv_freq)`: CLVP, ESM,
# SeamlessM4T, Wav2Vec2-BERT, Wav2Vec2-Conformer), bf16 once `module.to(torch.bfloat16)` has cast the buffer; and 4
# grids of points one apart in an activation's dtype (RPL105: Mask2Former's and OneFormer's reference points,
# `torch.linspace(0.5, height - 0.5, height, dtype=valid_ratios.dtype)`, whose ratios are computed in
# `source_flatten.dtype`), half-integers that bf16 rounds above 128.
FINDINGS_BEYOND_THE_PR = 15
CAST_FINDINGS = 5  # of them, the casts, which get no fix
LINSPACE_FINDINGS = 4  # and the grids, which get none either
NOTES_BEYOND_THE_PR = 2  # explicit float32 after construction that the PR left (RPL104)
EXPLICIT_FLOAT32 = re.compile(r"dtype=torch\.float(32)?\b")
# An enumeration that a product makes floating (the other operand, a Python float, is read by RPL103's analysis).
TIMES_AN_ENUMERATION = re.compile(r"\*\s*torch\.arange\(|torch\.arange\([^()]*\)\s*\*")
# An integer enumeration cast right after it to a floating dtype (RPL101 reads the dtype).
CAST_ENUMERATION = re.compile(r"torch\.arange\(.*\)\.(to|type_as|type|half|bfloat16)\(")
# A grid of points one apart: `torch.linspace(0.5, h - 0.5, h, ...)`, `torch.linspace(0, w - 1, w, ...)`.
LINSPACE_GRID = re.compile(r"torch\.linspace\((0\.5|0), (\w+) - (0\.5|1), \2, dtype=")
# `fix --unsafe-fixes --select RPL1`: the findings fixed, and those left because an int64 rewrite needs the start and
# the step proven integral (the end may be rounded up: `math.ceil(self.max_seq_len_cached)`) and no other rewrite
# applies.
FIXED_FINDINGS = 84
UNPROVEN_FINDINGS = 5
# Near-misses in 4.37.2 that must stay silent: `dtype=` of an integer tensor.
INTEGER_DTYPE_SITES = [
    ("models/layoutlmv2/modeling_layoutlmv2.py", "bbox.dtype"),
    ("models/vits/modeling_vits.py", "predicted_lengths.dtype"),
    ("models/cpmant/modeling_cpmant.py", "dtype"),  # `dtype, device = input_ids.dtype, input_ids.device` above
]


@pytest.fixture(scope="module")
def old_tree() -> Path:
    return unpacked_wheel("transformers", "4.37.2") / "transformers"


@pytest.fixture(scope="module")
def new_tree() -> Path:
    return unpacked_wheel("transformers", "4.38.0") / "transformers"


@pytest.fixture(scope="module")
def findings(old_tree: Path) -> list[Diagnostic]:
    """The float-enumeration family (RPL1xx), which is what PR #28760 fixed by hand."""
    files = discover([str(old_tree)], Excludes([], old_tree))
    return check_paths(files, Settings(select_rules(["RPL1"], []), old_tree))


@pytest.fixture(scope="module")
def notes(old_tree: Path) -> list[Diagnostic]:
    """The informational RPL104, which only its full code selects."""
    files = discover([str(old_tree)], Excludes([], old_tree))
    return check_paths(files, Settings(select_rules(["RPL104"], []), old_tree))


@pytest.fixture(scope="module")
def changed(old_tree: Path, new_tree: Path) -> list[tuple[str, int, str]]:
    """(file, old line number, old line) for each `torch.arange` line that 4.38.0 replaced or removed."""
    changed = []
    for old_file in sorted(old_tree.rglob("*.py")):
        relative = old_file.relative_to(old_tree).as_posix()
        new_file = new_tree / relative
        if not new_file.exists():
            continue
        old_lines, new_lines = old_file.read_text().splitlines(), new_file.read_text().splitlines()
        if old_lines == new_lines:
            continue
        matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
        for tag, first, last, _, _ in matcher.get_opcodes():
            if tag in ("replace", "delete"):
                changed += [
                    (relative, n + 1, old_lines[n].strip()) for n in range(first, last) if "arange" in old_lines[n]
                ]
    return changed


def not_hazards() -> set[tuple[str, str]]:
    rows = (REPO / "tests" / "data" / "pr28760_not_hazards.txt").read_text().splitlines()
    return {tuple(row.split("\t")[:2]) for row in rows if row and not row.startswith("#")}


def lines_covered(findings: list[Diagnostic], root: Path) -> set[tuple[str, int]]:
    return {
        (Path(d.path).relative_to(root).as_posix(), line)
        for d in findings
        for line in range(d.start.line, d.end.line + 1)
    }


def test_flags_every_hazardous_line_that_the_pr_changed(old_tree, changed, findings, notes) -> None:
    excluded = not_hazards()
    hazards = [(path, line, text) for path, line, text in changed if (path, text) not in excluded]
    covered = lines_covered(findings, old_tree)
    noted = lines_covered(notes, old_tree)
    missed = [site for site in hazards if site[:2] not in covered | noted]
    found = len(hazards) - len(missed)
    by_notes = [site for site in hazards if site[:2] in noted]
    print(f"PR #28760 hazardous arange lines flagged: {found} / {len(hazards)} ({len(by_notes)} by RPL104's notes)")
    assert missed == []
    assert len(hazards) == EXPECTED_HAZARD_LINES
    # A line is a hazard or a note, never both: RPL104 stands exactly where RPL101 does not.
    assert not covered & noted
    assert len(by_notes) == NOTE_LINES
    for path, _, text in by_notes:
        assert EXPLICIT_FLOAT32.search(text), f"{path}: {text}"
    assert len(changed) - len(hazards) == NOT_HAZARD_LINES
    # Every listed non-hazard really is among the changed lines, so the list cannot hide a miss by going stale.
    assert excluded <= {(path, text) for path, _, text in changed}


def lines_beyond_the_pr(found: list[Diagnostic], changed: list[tuple[str, int, str]], root: Path) -> list[str]:
    """The `torch.arange` and `torch.linspace` lines of the findings on lines that the PR did not change."""
    changed_lines = {(path, line) for path, line, _ in changed}
    lines = [
        Path(d.path).read_text().splitlines()[d.start.line - 1].strip()
        for d in found
        if not lines_covered([d], root) & changed_lines
    ]
    assert all("torch.arange" in line or "torch.linspace" in line for line in lines), lines
    return lines


def test_findings_beyond_the_pr_are_real_float_enumerations(old_tree, changed, findings) -> None:
    beyond = lines_beyond_the_pr(findings, changed, old_tree)
    for line in beyond:
        floating = "dtype=torch.float" in line or ".0," in line or TIMES_AN_ENUMERATION.search(line)
        assert floating or CAST_ENUMERATION.search(line) or LINSPACE_GRID.search(line), f"not an enumeration: {line}"
    assert sum(bool(CAST_ENUMERATION.search(line)) for line in beyond) == CAST_FINDINGS
    assert sum(bool(LINSPACE_GRID.search(line)) for line in beyond) == LINSPACE_FINDINGS
    print(f"findings beyond the PR (false alarms: 0): {len(beyond)}")
    assert len(beyond) == FINDINGS_BEYOND_THE_PR


def test_notes_beyond_the_pr_are_explicit_float32_enumerations(old_tree, changed, notes) -> None:
    beyond = lines_beyond_the_pr(notes, changed, old_tree)
    for line in beyond:
        assert EXPLICIT_FLOAT32.search(line), f"not explicit float32: {line}"
    print(f"RPL104 notes beyond the PR: {len(beyond)}")
    assert len(beyond) == NOTES_BEYOND_THE_PR


@pytest.mark.parametrize(("relative", "dtype"), INTEGER_DTYPE_SITES)
def test_silent_on_the_dtype_of_an_integer_tensor(old_tree, findings, relative, dtype) -> None:
    tree = ast.parse((old_tree / relative).read_text())
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and ast.unparse(node.func) == "torch.arange"
        and any(kw.arg == "dtype" and ast.unparse(kw.value) == dtype for kw in node.keywords)
    ]
    assert calls, f"the near-miss dtype={dtype} is no longer in {relative}"
    flagged = {(d.start.line, d.start.column) for d in findings if d.path.endswith(relative)}
    assert not flagged & {(call.lineno, call.col_offset) for call in calls}


def test_findings_without_a_fix_are_casts_grids_or_enumerations_not_proven_integral(old_tree, findings) -> None:
    unfixed = [d for d in findings if d.fix is None]
    print(
        f"findings without a fix (casts, grids, or start or step not proven integral): {len(unfixed)} / {len(findings)}"
    )
    assert len(unfixed) == UNPROVEN_FINDINGS + CAST_FINDINGS + LINSPACE_FINDINGS
    assert len(findings) - len(unfixed) == FIXED_FINDINGS
    grids = [d for d in unfixed if d.code == "RPL105"]
    casts = [d for d in unfixed if d.code == "RPL101" and enumeration_cast(d.path, d.start.line, d.start.column)]
    assert (len(casts), len(grids)) == (CAST_FINDINGS, LINSPACE_FINDINGS)
    for d in unfixed:
        if d in casts or d in grids:
            continue
        source = Path(d.path).read_text()
        ctx = FileContext(d.path, source, ast.parse(source), ("arange",))
        [call] = [c for c in ctx.calls("torch.arange") if (c.lineno, c.col_offset) == (d.start.line, d.start.column)]
        assert enumerations.end_rounding(ctx, call) is None, f"{d.path}:{d.start.line}"


def test_fix_of_the_whole_tree(old_tree, findings, tmp_path: Path) -> None:
    tree = tmp_path / "transformers"
    shutil.copytree(old_tree, tree)
    first = rope_lint("fix", "--unsafe-fixes", "--select", "RPL1", str(tree))
    # Exit 1: findings remain.
    assert first.returncode == 1, first.stdout[-2000:] + first.stderr[-2000:]
    assert len(findings) == FIXED_FINDINGS + UNPROVEN_FINDINGS + CAST_FINDINGS + LINSPACE_FINDINGS
    assert (
        f"Fixed {FIXED_FINDINGS} findings, {UNPROVEN_FINDINGS + CAST_FINDINGS + LINSPACE_FINDINGS} remaining."
        in first.stdout
    )

    flagged = {(Path(d.path).relative_to(old_tree).as_posix(), d.start.line, d.end.line) for d in findings}
    fixed_bytes = {}
    for new_file in sorted(tree.rglob("*.py")):
        relative = new_file.relative_to(tree).as_posix()
        fixed_bytes[relative] = new_file.read_bytes()
        new_text = new_file.read_text()
        ast.parse(new_text, filename=relative)  # every file still compiles
        old_lines = (old_tree / relative).read_text().splitlines()
        new_lines = new_text.splitlines()
        if old_lines == new_lines:
            continue
        ranges = [(start, end) for path, start, end in flagged if path == relative]
        matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
        for tag, first_line, last_line, inserted_first, inserted_last in matcher.get_opcodes():
            # Old lines are 1-based first_line+1..last_line; an insertion sits between first_line and first_line+1.
            touched = range(first_line + 1, last_line + 1) if tag != "insert" else [first_line, first_line + 1]
            if tag == "insert" and new_lines[inserted_first:inserted_last] in (["import math"], ["import math", ""]):
                continue  # the import that an end rounded with `math.ceil` needs
            if tag != "equal":
                assert any(start <= n <= end for n in touched for start, end in ranges), f"{relative}:{touched}"

    second = rope_lint("fix", "--unsafe-fixes", "--select", "RPL1", str(tree))
    assert second.returncode == 1
    assert f"Fixed 0 findings, {UNPROVEN_FINDINGS + CAST_FINDINGS + LINSPACE_FINDINGS} remaining." in second.stdout
    assert {p.relative_to(tree).as_posix(): p.read_bytes() for p in sorted(tree.rglob("*.py"))} == fixed_bytes
