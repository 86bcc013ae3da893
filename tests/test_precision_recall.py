"""Precision and recall of the RPL1 (enumerations) and RPL2 (rotary tables) families (issue 20), as the README gives
them.

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

import csv
from pathlib import Path
from typing import Any

from helpers import REPO, install_release

from rope_lint.engine import Settings, check_paths
from rope_lint.files import Excludes, discover
from rope_lint.rules import select_rules

TRIAGE = REPO / "tests" / "data" / "diffusers-0.42.1-check-triage.tsv"
FAMILIES = ("RPL1", "RPL2")


def findings(root: Path, select: str) -> list[Any]:
    files = discover([str(root)], Excludes([], root))
    return check_paths(files, Settings(select_rules([select], []), root))


def triage() -> list[dict[str, str]]:
    with TRIAGE.open(newline="") as table:
        return list(csv.DictReader(table, delimiter="\t"))


# The README's table: per family, (reported, true among them, debatable, false, true in all: found or missed).
DIFFUSERS: dict[str, tuple[int, int, int, int, int]] = {}


def test_diffusers_findings_are_those_the_hand_triage_calls_real() -> None:
    site = install_release("diffusers", "0.42.1")
    rows = triage()
    verdict = {(row["path"], int(row["line"]), row["code"]): row["verdict"] for row in rows}
    counts = {}
    for family in FAMILIES:
        found_here = findings(site / "diffusers", family)
        reported = {(Path(d.path).relative_to(site).as_posix(), d.start.line, d.code) for d in found_here}
        untriaged = sorted(key for key in reported if key not in verdict)
        false_alarms = sorted(key for key in reported if verdict.get(key) == "false")
        assert untriaged == [] and false_alarms == []
        true = {key for key, said in verdict.items() if key[2].startswith(family) and said == "true"}
        found = true & reported
        debatable = {key for key in reported if verdict[key] == "debatable"}
        counts[family] = (len(reported), len(found), len(debatable), 0, len(true))
        print(
            f"diffusers {family}: {len(reported)} reported, {len(found)} true, {len(debatable)} debatable; "
            f"precision {len(found) / len(reported):.0%}, recall {len(found)}/{len(true)}"
        )
    assert counts == DIFFUSERS
