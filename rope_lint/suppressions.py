"""Comments that silence a finding on their line: our own `# rope-lint: ignore[...]`, and ruff's `# noqa`.

transformers' own linting rejects `# noqa` in model files, so our comment is our own; `# noqa: RPL101` is
honoured too for projects that use it.
"""

from __future__ import annotations

import re

# Compiled on first use, by `re`'s cache: most findings are on lines that name neither word.
_SUPPRESSION = (
    r"#\s*(?:rope-lint:\s*ignore(?:\[(?P<ours>[^\]]*)\])?|noqa(?::\s*(?P<noqa>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?)"
)


def suppressed_codes(line: str) -> set[str] | None:
    """The codes a line silences; an empty set means every code; None means nothing is silenced."""
    lowered = line.lower()
    if "noqa" not in lowered and "rope-lint" not in lowered:
        return None
    found: set[str] | None = None
    for match in re.finditer(_SUPPRESSION, line, re.IGNORECASE):
        codes = match.group("ours") if match.group("ours") is not None else match.group("noqa")
        if codes is None:
            return set()
        found = (found or set()) | {code.strip() for code in re.split(r"[\s,]+", codes) if code.strip()}
    return found


def is_suppressed(code: str, lines: list[str], start_line: int, end_line: int) -> bool:
    """Whether a comment on any line of the finding's range silences its code."""
    for number in range(start_line, min(end_line, len(lines)) + 1):
        codes = suppressed_codes(lines[number - 1])
        if codes is not None and (not codes or code in codes):
            return True
    return False
