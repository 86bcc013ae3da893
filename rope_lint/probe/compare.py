"""`--compare BEFORE_DIR`: the TARGETs probed as they are ("after") and as they were ("before"), side by side.

BEFORE_DIR is a copy of the tree the targets live in, as it was before the change (a checkout of the base branch,
an unpacked release). The before side's targets are the same TARGETs, read there:

- a TARGET that is a path (it exists here) is taken relative to the current folder and read at the same relative
  path under BEFORE_DIR; a path outside the current folder has no counterpart there, which is a usage error;
- a TARGET that is a module or package name is imported with BEFORE_DIR first on the import path.

Both sides import modules of the same names (the same package, twice), so the before side runs in a process of its
own (`python -m rope_lint.probe.compare JOB RESULT`), while the after side runs in this one; the worker hands its
report back pickled. Classes are matched by module and class name (`report.paired_classes`); one found on a
single side is shown as absent on the other.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rope_lint
from rope_lint.probe.discover import TargetError
from rope_lint.probe.report import CLEAN, ProbeReport, class_json, paired_classes, trigger_cells
from rope_lint.probe.runner import probe

SIDES = ("before", "after")


class BeforeSideError(Exception):
    """The before side's process stopped without a report; the message says how."""


@dataclass
class Comparison:
    before_dir: str
    before: ProbeReport
    after: ProbeReport

    def to_json(self) -> dict[str, Any]:
        shared = ("positions", "threshold", "triggers")
        sides = {"before": self.before.to_json(), "after": self.after.to_json()}
        return {
            "before_dir": self.before_dir,
            **{key: sides["after"][key] for key in shared},
            "classes": [
                {"class": name}
                | {
                    side: None if result is None else class_json(result)
                    for side, result in zip(SIDES, pair, strict=True)
                }
                for name, pair in paired_classes([self.before, self.after])
            ],
            # Everything else of each side's report: its import failures, statuses and summary.
            **{
                side: {key: value for key, value in entry.items() if key not in (*shared, "classes")}
                for side, entry in sides.items()
            },
        }

    def render_table(self) -> str:
        header = f"{'class / trigger':<28} {'max error before -> after':>26} {'first wrong':>14} {'wrong':>17}  result"
        lines = [header, "-" * len(header), f"before: {self.before_dir}"]
        for name, (before, after) in paired_classes([self.before, self.after]):
            after_status = "absent" if after is None else after.status
            before_status = "absent" if before is None else before.status
            # The after side decides the exit status: its status in capitals unless clean, as in the plain table.
            lines.append(
                f"{name}  [{after_status if after_status == CLEAN else after_status.upper()}] (before: {before_status})"
            )
            # A trigger's failure is on its row; a class that was not built has no rows of its own to say why.
            lines += [
                f"  {side}: not built: {result.reason}"
                for side, result in (("before", before), ("after", after))
                if result is not None and not result.triggers
            ]
            for trigger in self.after.trigger_names:
                cells = [trigger_cells(result, trigger) for result in (before, after)]
                columns = [" -> ".join(side[column] for side in cells) for column in range(4)]
                lines.append(f"  {trigger:<26} {columns[0]:>26} {columns[1]:>14} {columns[2]:>17}  {columns[3]}")
        for side, report in (("before", self.before), ("after", self.after)):
            lines += [
                f"{side}: {failure.module}: failed to import: {failure.reason}" for failure in report.import_failures
            ]
        lines += ["", f"before: {self.before.summary_line()}", f"after:  {self.after.summary_line()}"]
        return "\n".join(lines)


def before_targets(targets: Sequence[str], before_dir: Path, here: Path) -> list[str]:
    """The TARGETs as the before side names them (see the module's docstring). Raises TargetError for a path that
    lies outside `here`, the current folder."""
    mapped = []
    for target in targets:
        source, colon, class_name = target.rpartition(":")
        # Read the way discover reads a TARGET: `source:ClassName`, or all of it; a path is one that exists.
        if not (source and class_name.isidentifier()):
            source, colon, class_name = target, "", ""
        if not Path(source).exists():
            mapped.append(target)
            continue
        # Lexically (not resolving links): the path as the user wrote it, relative to where they stand.
        inside = os.path.relpath(os.path.abspath(source), os.path.abspath(here))
        if inside == os.pardir or inside.startswith(os.pardir + os.sep):
            raise TargetError(f"{target}: lies outside the current folder, so --compare cannot find it in BEFORE_DIR")
        mapped.append(str(before_dir.resolve() / inside) + colon + class_name)
    return mapped


def probe_compared(before_dir: Path, targets: Sequence[str], **options: Any) -> Comparison:
    """Probe the targets here and in `before_dir` at once, both with runner.probe's keyword `options` (the progress
    shown is this side's). Raises discover.TargetError for a usage error on either side, BeforeSideError when the
    before side's process stops without a report."""
    job = {
        "before_dir": str(before_dir.resolve()),
        "targets": before_targets(targets, before_dir, Path.cwd()),
        **{name: value for name, value in options.items() if name != "progress"},
    }
    with tempfile.TemporaryDirectory(prefix="rope-lint-compare-") as temporary:
        folder = Path(temporary)
        job_file, result_file, log_file = folder / "job.json", folder / "result.pickle", folder / "stderr.txt"
        job_file.write_text(json.dumps(job))
        environment = dict(os.environ)
        # The worker runs this rope_lint, wherever it was imported from (ahead of an installed one, as PYTHONPATH comes
        # before site-packages), and the user's PYTHONPATH keeps its order.
        home = str(Path(rope_lint.__file__).resolve().parents[1])
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [environment.get("PYTHONPATH"), home]))
        with log_file.open("w") as log:
            # Its stderr (model code's chatter, or a crash) is kept aside: only its last line is reported, on failure.
            worker = subprocess.Popen(
                [sys.executable, "-m", "rope_lint.probe.compare", str(job_file), str(result_file)],
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
            try:
                after = probe(targets, **options)
                worker.wait()
            finally:
                if worker.poll() is None:  # the after side failed: the before side's report is not wanted
                    worker.kill()
                    worker.wait()
        if not result_file.exists():
            lines = [line for line in log_file.read_text(errors="replace").splitlines() if line.strip()]
            ending = lines[-1] if lines else "no message"
            raise BeforeSideError(f"the probe of {before_dir} exited with {worker.returncode}: {ending}")
        before = pickle.loads(result_file.read_bytes())
    if isinstance(before, TargetError):
        raise TargetError(f"in {before_dir}: {before}")
    return Comparison(str(before_dir), before, after)


def _work(job_file: Path, result_file: Path) -> None:
    """The before side's process: probe the job's targets with BEFORE_DIR first on the import path."""
    job = json.loads(job_file.read_text())
    sys.path.insert(0, job.pop("before_dir"))
    targets = job.pop("targets")
    try:
        outcome: ProbeReport | TargetError = probe(targets, **job)
    except TargetError as error:
        outcome = error
    # Written aside and renamed, so that a report is there whole or not at all.
    partial = result_file.with_suffix(".partial")
    partial.write_bytes(pickle.dumps(outcome))
    partial.replace(result_file)


if __name__ == "__main__":
    _work(Path(sys.argv[1]), Path(sys.argv[2]))
