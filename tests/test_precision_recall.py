"""Precision and recall of the RPL1 (enumerations) and RPL2 (rotary tables) families (issue 20), as
docs/measurements.md gives them.

diffusers 0.42.1: every RPL1 and RPL2 finding, and every miss found by looking for the issue's miss shapes, was
triaged by hand (tests/data/diffusers-0.42.1-check-triage.tsv: true, debatable or false, with a reason; a miss is a
row whose shape starts with `miss:`). The check must report every row called true or debatable that it reports today,
none called false, and nothing the triage does not list.

transformers 4.37.2 and 5.24.0, RPL2, by class: a rotary class is hazardous when the probe measures it over the
threshold under `zero-init-bf16` or `to-bf16`; the family finds it when it reports an RPL2 finding in the class.
Precision: the measured classes with a finding that are hazardous, over the measured classes with a finding; recall:
the hazardous classes with a finding, over the hazardous classes.
"""

from __future__ import annotations

import ast
import csv
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, class_of, enumeration_cast, install_release, module_of
from releases import NEW, OLD

from rope_lint.engine import Settings, check_paths
from rope_lint.files import Excludes, discover
from rope_lint.rules import select_rules

TRIAGE = REPO / "tests" / "data" / "diffusers-0.42.1-check-triage.tsv"
README = REPO / "README.md"
FAMILIES = ("RPL1", "RPL2")


def findings(root: Path, select: str) -> list[Any]:
    files = discover([str(root)], Excludes([], root))
    return check_paths(files, Settings(select_rules([select], []), root))


def triage() -> list[dict[str, str]]:
    with TRIAGE.open(newline="") as table:
        return list(csv.DictReader(table, delimiter="\t"))


# docs/measurements.md's table: per family, (reported, true among them, debatable, false, true in all: found or missed).
DIFFUSERS: dict[str, tuple[int, int, int, int, int]] = {"RPL1": (36, 27, 7, 2, 27), "RPL2": (59, 52, 7, 0, 52)}
# The false alarms left, by the triage's shape: issue 20 asks for none of its shapes (`fa:*`); these are the ones
# that stay (docs/measurements.md, "Precision and recall").
FALSE_ALARMS_LEFT: dict[str, int] = {
    # Not issue 20's shapes: a module built inside a pipeline call, a small exact enumeration.
    "new:runtime-module": 1,
    "new:small-exact": 1,
}


def test_diffusers_findings_are_those_the_hand_triage_calls_real() -> None:
    """Every finding is triaged; every true row the rules find, and the false alarms they still raise, are those
    that docs/measurements.md gives."""
    site = install_release("diffusers", "0.42.1")
    rows = triage()
    by_key = {(row["path"], int(row["line"]), row["code"]): row for row in rows}
    counts, left = {}, {}
    for family in FAMILIES:
        found_here = findings(site / "diffusers", family)
        reported = {(Path(d.path).relative_to(site).as_posix(), d.start.line, d.code) for d in found_here}
        assert sorted(key for key in reported if key not in by_key) == []  # nothing the triage does not list
        said = [by_key[key]["verdict"] for key in reported]
        true = [key for key, row in by_key.items() if key[2].startswith(family) and row["verdict"] == "true"]
        counts[family] = (len(reported), said.count("true"), said.count("debatable"), said.count("false"), len(true))
        for key in reported:
            if by_key[key]["verdict"] == "false":
                left[by_key[key]["shape"]] = left.get(by_key[key]["shape"], 0) + 1
        print(f"diffusers {family}: (reported, true, debatable, false, true in all) = {counts[family]}")
    print(f"false alarms left by shape: {left}")
    assert counts == DIFFUSERS
    assert left == FALSE_ALARMS_LEFT
    figures = " | ".join(
        precision_and_recall(reported, true, all_true) for reported, true, _, _, all_true in counts.values()
    )
    assert f"| diffusers 0.42.1, by finding (triaged by hand) | {figures} |" in README.read_text()


def precision_and_recall(reported: int, true: int, all_true: int) -> str:
    """As the README's rows give them: "precision, recall", the precision to a tenth of a percent."""
    return f"{100 * true / reported:.1f}".removesuffix(".0") + f"%, {true} of {all_true}"


# transformers 5.24.0, RPL1: a hand triage of random samples (tests/data/transformers-5.24.0-rpl1-*.tsv), since the
# tree has hundreds of findings, most of them copies of one another. Lines are compared with their whitespace removed.
# - precision: 60 of the 78 distinct flagged line texts that the rules flagged when the sample was drawn
#   (`random.Random(20)`), each true, debatable or false;
# - recall: 60 of the 112 distinct texts of the calls that could enumerate in a floating dtype and were not flagged
#   then (`random.Random(21)`), each a miss or fine.
# The docs' figures: (distinct texts flagged now, sampled texts still flagged, true among them, misses in the
# recall sample, misses the rules flag now).
RPL1_SAMPLES = (72, 38, 26, 9, 9)
CANDIDATE_TEXTS = 112


def sample(name: str) -> list[dict[str, str]]:
    with (REPO / "tests" / "data" / f"transformers-5.24.0-rpl1-{name}-sample.tsv").open(newline="") as table:
        return list(csv.DictReader(table, delimiter="\t"))


@pytest.fixture(scope="module")
def newest_rpl1() -> list[Any]:
    """The RPL1 findings on transformers 5.24.0."""
    return findings(install_release("transformers", NEW) / "transformers", "RPL1")


def line_text(finding: Any) -> str:
    """The finding's first line, its whitespace removed: how the triage tables name a line."""
    return "".join(Path(finding.path).read_text().splitlines()[finding.start.line - 1].split())


def test_transformers_newest_release_rpl1_precision_and_recall_from_the_hand_triaged_samples(newest_rpl1) -> None:
    flagged = {line_text(d) for d in newest_rpl1}
    precision = [row for row in sample("precision") if row["text"] in flagged]
    true = [row for row in precision if row["verdict"] == "true"]
    misses = [row for row in sample("recall") if row["verdict"] == "miss"]
    caught = [row for row in misses if row["text"] in flagged]
    found = len(flagged) * len(true) / len(precision)
    missed = CANDIDATE_TEXTS * (len(misses) - len(caught)) / 60
    print(
        f"transformers {NEW} RPL1: {len(flagged)} distinct flagged texts; precision {len(true)}/{len(precision)} "
        f"sampled; misses {len(misses)}/60 sampled candidates, {len(caught)} flagged now; implied recall "
        f"{found / (found + missed):.0%}"
    )
    assert (len(flagged), len(precision), len(true), len(misses), len(caught)) == RPL1_SAMPLES


# RPL101's integer enumerations cast afterwards to a dtype that can be bf16, and RPL105's grids of points one apart
# (both flagged since the samples were drawn), each distinct line triaged by hand
# (tests/data/transformers-5.24.0-rpl101-casts-triage.tsv, tests/data/transformers-5.24.0-rpl105-triage.tsv). The docs'
# figures: (true distinct lines, distinct lines, true findings, findings).
CASTS_TRIAGED = (11, 12, 44, 59)
GRIDS_TRIAGED = (5, 7, 26, 28)


def as_triaged(found: Counter[str], table: str) -> tuple[int, int, int, int]:
    """The figures of the findings' distinct lines, `found` (by text, with their occurrences), once each is checked to
    be a row of the hand triage `table` (tests/data/), and the triage to list nothing else."""
    with (REPO / "tests" / "data" / table).open(newline="") as rows_file:
        rows = list(csv.DictReader(rows_file, delimiter="\t"))
    assert found == {row["text"]: int(row["occurrences"]) for row in rows}
    true = [row for row in rows if row["verdict"] == "true"]
    return len(true), len(rows), sum(int(row["occurrences"]) for row in true), sum(found.values())


def test_transformers_newest_release_rpl101_casts_are_those_triaged_by_hand(newest_rpl1) -> None:
    casts = Counter(
        line_text(d)
        for d in newest_rpl1
        if d.code == "RPL101" and enumeration_cast(d.path, d.start.line, d.start.column)
    )
    counted = as_triaged(casts, "transformers-5.24.0-rpl101-casts-triage.tsv")
    print(f"transformers {NEW} RPL101 casts: (true lines, lines, true findings, findings) = {counted}")
    assert counted == CASTS_TRIAGED


def test_transformers_newest_release_rpl105_grids_are_those_triaged_by_hand(newest_rpl1) -> None:
    grids = Counter(line_text(d) for d in newest_rpl1 if d.code == "RPL105")
    counted = as_triaged(grids, "transformers-5.24.0-rpl105-triage.tsv")
    print(f"transformers {NEW} RPL105 grids: (true lines, lines, true findings, findings) = {counted}")
    assert counted == GRIDS_TRIAGED


# The docs' figures, by class (module docstring): (measured classes with a finding, the hazardous among them,
# hazardous classes), per release and family. Precision: the second over the first; recall: the second over the third.
BY_CLASS: dict[tuple[str, str], tuple[int, int, int]] = {
    (OLD, "RPL1"): (34, 34, 34),
    (OLD, "RPL2"): (30, 30, 34),
    (NEW, "RPL1"): (249, 248, 253),
    (NEW, "RPL2"): (254, 251, 253),
}
HAZARD_TRIGGERS = ("zero-init-bf16", "to-bf16")


@pytest.mark.slow
@pytest.mark.parametrize("version", [OLD, NEW])
def test_transformers_rotary_classes_found_by_each_family(
    version: str, unfixed_probe: Callable[[str], dict[str, Any]]
) -> None:
    site = install_release("transformers", version)
    report = unfixed_probe(version)
    hazardous = {
        entry["class"]: any(entry["triggers"][name]["status"] == "exceeds" for name in HAZARD_TRIGGERS)
        for entry in report["classes"]
        if entry.get("triggers")
    }
    counts = {}
    # Only the files of measured classes are parsed, each once: parsing every file with a finding took most of this.
    measured_modules = {module_of(name) for name in hazardous}
    trees: dict[Path, ast.Module] = {}
    for family in FAMILIES:
        flagged = set()
        for finding in findings(site / "transformers", family):
            path = Path(finding.path)
            module = ".".join(path.relative_to(site).with_suffix("").parts)
            if module not in measured_modules:
                continue
            if path not in trees:
                trees[path] = ast.parse(path.read_text())
            tree = trees[path]
            flagged |= {
                f"{module}.{node.name}"
                for node in tree.body
                if isinstance(node, ast.ClassDef) and node.lineno <= finding.start.line <= (node.end_lineno or 0)
            }
        with_finding = {name for name in hazardous if class_of(name) in flagged}
        found = {name for name in with_finding if hazardous[name]}
        counts[family] = (len(with_finding), len(found), sum(hazardous.values()))
        print(f"transformers {version} {family} by class: {counts[family]}")
    assert {(version, family): value for family, value in counts.items()} == {
        key: value for key, value in BY_CLASS.items() if key[0] == version
    }
    figures = " | ".join(precision_and_recall(*counts[family]) for family in FAMILIES)
    assert f"| transformers {version}, by rotary class (against the probe) | {figures} |" in README.read_text()
