"""The text screen of the RPL1xx rules (`enumerations.may_be_hazard`): it may only drop an `arange` that no rule
can flag, since a dropped occurrence is never parsed."""

from __future__ import annotations

from pathlib import Path

import pytest

from rope_lint.engine import Settings, check_source
from rope_lint.enumerations import may_be_hazard
from rope_lint.rule import Invalid
from rope_lint.rules import ALL_RULES, select_rules

ARANGE_RULES = [rule for rule in ALL_RULES if b"arange" in rule.triggers]


def screened(code: str) -> list[bool]:
    data = code.encode()
    positions, start = [], data.find(b"arange")
    while start != -1:
        positions.append(start)
        start = data.find(b"arange", start + 1)
    return [may_be_hazard(data, position) for position in positions]


@pytest.mark.parametrize(
    "example",
    [example for rule in ARANGE_RULES for example in rule.examples if isinstance(example, Invalid)],
    ids=lambda example: example.code.splitlines()[-1][:40],
)
def test_every_flagged_example_passes_the_screen(example: Invalid) -> None:
    assert any(screened(example.code))


@pytest.mark.parametrize(
    "code",
    [
        "t = torch.arange(4096.0)\n",  # a float literal
        "t = torch.arange(1e4)\n",  # exponent notation
        "t = torch.arange(n, dtype=torch.float32)\n",
        "t = torch.arange(n, dtype=hidden_states.dtype)\n",  # a dtype the text cannot tell
        "t = torch.arange(n) / n\n",
        "t = torch.arange(n, dtype=torch.long)[None, :] / n\n",
        "t = torch.arange(n).to(device) / n\n",
        "t = (torch.arange(n)) / n\n",
        "t = n / torch.arange(1, n)\n",
        "t = n / (\n    torch.arange(1, n)\n)\n",
        "t = (\n    torch.arange(n)  # positions\n    / n\n)\n",  # a comment between the call and its operator
        "t = (\n    n /  # scale\n    torch.arange(1, n)\n)\n",
        't = torch.arange(len("x"))\n',  # a string inside the call: left in doubt
        "t = torch.arange(\n",  # an unclosed call
    ],
)
def test_what_a_rule_could_flag_is_kept(code: str) -> None:
    assert screened(code) == [True]


@pytest.mark.parametrize(
    "code",
    [
        "ids = torch.arange(n, dtype=torch.long, device=device)\n",
        "ids = torch.arange(\n    past, past + n, dtype=torch.int64, device=x.device\n).unsqueeze(0)\n",
        "ids = torch.arange(n)\n",
        "ids = torch.arange(n, device=device).expand(b, n) * 2\n",
        "ids = np.arange(n)\n",
    ],
)
def test_integer_enumerations_outside_a_division_are_dropped(code: str) -> None:
    assert screened(code) == [False]


def test_a_forward_with_only_dropped_enumerations_is_not_parsed_but_its_neighbour_is() -> None:
    """A syntax error inside the dropped function goes unnoticed: it was never parsed. The hazard beside it is
    found all the same."""
    code = (
        "import torch\n\n\n"
        "def forward(x):\n"
        "    ids = torch.arange(x.shape[1], dtype=torch.long, device=x.device)\n"
        "    return ids +\n\n\n"
        "def table(n):\n"
        "    return torch.arange(n, dtype=torch.float32)\n"
    )
    found = check_source("model.py", code, Settings(select_rules(["RPL1"], []), Path(".")))
    assert [(d.code, d.start.line) for d in found] == [("RPL101", 10)]
