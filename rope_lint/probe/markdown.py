"""`--output-format markdown`: the report as GitHub Markdown, for a pull request.

A table per class, one row per condition (trigger): its max error (the larger of the cos and sin errors), first wrong
position, share of wrong elements and result; with `--compare`, each of those is two columns, before and after. A
class measured on no side gets a line instead of a table. Then the summary line (one per side).
"""

from __future__ import annotations

from collections.abc import Sequence

from rope_lint.probe.report import ProbeReport, paired_classes, trigger_cells

_COLUMNS = ("max error", "first wrong position", "share wrong", "result")


def cell(text: str) -> str:
    """Text that stays inside one cell of a GitHub table (or one line of a paragraph): `|` and `\\` escaped, lines
    joined."""
    return " ".join(text.replace("\\", "\\\\").replace("|", "\\|").split())


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render_markdown(sides: Sequence[tuple[str, ProbeReport]]) -> str:
    """One report, as [("", report)], or a comparison, as [("before", before), ("after", after)]."""
    labels = [label for label, _ in sides]
    reports = [report for _, report in sides]
    last = reports[-1]
    lines = [
        "## rope-lint probe",
        "",
        f"Positions 0..{last.positions - 1}; an element is wrong when its error exceeds {last.threshold:g}.",
    ]
    header = ["condition"] + [f"{column} {label}".strip() for column in _COLUMNS for label in labels]
    for name, results in paired_classes(reports):
        statuses = " → ".join(
            f"{label} {'absent' if result is None else result.status}".strip()
            for label, result in zip(labels, results, strict=True)
        )
        lines += ["", f"### `{name}`: {statuses}", ""]
        lines += [
            f"*{label + ': ' if label else ''}not built:* {cell(result.unmeasured_reason or '')}"
            for label, result in zip(labels, results, strict=True)
            if result is not None and not result.triggers
        ]
        if not any(result is not None and result.triggers for result in results):
            continue
        if lines[-1]:
            lines.append("")
        lines += [_row(header), _row(["---"] * len(header))]
        for trigger in last.trigger_names:
            per_side = [[cell(text) for text in trigger_cells(result, trigger)] for result in results]
            lines.append(_row([trigger] + [cells[column] for column in range(len(_COLUMNS)) for cells in per_side]))
    for label, report in sides:
        if report.import_failures:
            lines += ["", f"Modules that failed to import{' ' + label if label else ''}:", ""]
            lines += [f"- `{failure.module}`: {cell(failure.reason)}" for failure in report.import_failures]
    for label, report in sides:
        lines += ["", f"**{(label or 'summary').capitalize()}:** {cell(report.summary_line())}"]
    return "\n".join(lines)
