"""The README stays short and the docs stay true (issue 22): docs/rules.md is what `rope-lint rule` prints, and every
relative link leads to a file, and a heading, that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import REPO, rope_lint

from rope_lint.rules import ALL_RULES

PAGES = [REPO / "README.md", REPO / "bench" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_readme_is_under_8_kb() -> None:
    assert len((REPO / "README.md").read_bytes()) < 8 * 1024


def test_rules_page_is_what_rope_lint_rule_all_prints() -> None:
    result = rope_lint("rule", "--all")
    assert result.returncode == 0
    assert result.stdout == (REPO / "docs" / "rules.md").read_text(), "regenerate: rope-lint rule --all > docs/rules.md"


@pytest.mark.parametrize("code", [rule.code for rule in ALL_RULES])
def test_rules_page_holds_each_rule_as_rope_lint_rule_prints_it(code: str) -> None:
    """Each rule's page section is `rope-lint rule CODE`'s output with its headings one level down (Python comments
    in its code blocks left as they are)."""
    printed = rope_lint("rule", code).stdout.rstrip("\n")
    lines, in_code = [], False
    for line in printed.split("\n"):
        in_code ^= line.startswith("```")
        lines.append("#" + line if line.startswith("#") and not in_code else line)
    section = "\n".join(lines)
    assert section.startswith(f"## {code} ")
    assert "\n### What it does\n" in section and "\n### Fix safety\n" in section
    assert f"\n{section}\n" in (REPO / "docs" / "rules.md").read_text()


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    headings = re.findall(r"(?m)^#+ (.+)$", text)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_relative_links_lead_to_files_and_headings_that_exist(page: Path) -> None:
    targets = [target for target in LINK.findall(page.read_text()) if "://" not in target]
    assert page.name != "README.md" or page.parent != REPO or targets, "the README links to the docs"
    for target in targets:
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.is_file(), f"{page.name}: {target}"
        if anchor:
            assert anchor in anchors(linked), f"{page.name}: {target}"


def test_every_docs_page_is_linked_from_the_readme() -> None:
    readme = (REPO / "README.md").read_text()
    for page in (REPO / "docs").glob("*.md"):
        assert f"(docs/{page.name})" in readme, page.name
