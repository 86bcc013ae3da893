"""Explicit float32 that a constructor runs by a path the call graph must follow (issue 20, shape 7): each stays
RPL101's hazard, however the constructor reaches it. Found by a review of the change that made code the rules do not
see run RPL104's note; each of these was a note then."""

from __future__ import annotations

from pathlib import Path

import pytest

from rope_lint.engine import Settings, check_source
from rope_lint.rules import select_rules

HELPER = "import torch\nfrom torch import nn\n\n\ndef helper(n):\n    return torch.arange(n, dtype=torch.float32)\n\n\n"
MODEL = "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"

REACHED_AT_CONSTRUCTION = {
    "kept on self, then called": MODEL + "        self.make = helper\n        self.table = self.make(8)\n",
    "kept on self, then passed": MODEL + "        self.make = helper\n        self.table = list(map(self.make, [8]))\n",
    "a module-level registry filled by item": 'REGISTRY = {}\nREGISTRY["a"] = helper\n\n\n'
    + MODEL
    + '        self.table = REGISTRY["a"](8)\n',
    "a local list": MODEL + "        makers = []\n        makers.append(helper)\n        self.table = makers[0](8)\n",
    "a nested class's method": "class M(nn.Module):\n    class Inner:\n        def __call__(self, n):\n"
    "            return helper(n)\n\n    def __init__(self):\n        super().__init__()\n"
    "        self.table = self.Inner()(8)\n",
    # Named in a method's decorator alone, which runs as the class is defined: the lines of its call graph start at
    # the decorator, not at the `def`.
    "a method's decorator": MODEL + "\n    @wrapped(helper)\n    def forward(self, x):\n        return x\n",
    "a call where a type test takes its type": "def kinds():\n    helper(8)\n    return (int,)\n\n\n"
    + MODEL
    + "        self.ok = isinstance(self, kinds())\n",
}


@pytest.mark.parametrize("name", list(REACHED_AT_CONSTRUCTION))
def test_code_a_constructor_reaches_is_a_hazard(name: str) -> None:
    code = HELPER + REACHED_AT_CONSTRUCTION[name]
    found = check_source("model.py", code, Settings(select_rules(["RPL101", "RPL104"], []), Path(".")))
    assert [(d.code, d.start.line) for d in found] == [("RPL101", 6)]


def test_a_method_read_with_spaces_before_its_name_is_still_read() -> None:
    code = (
        "import torch\nfrom torch import nn\n\n\n"
        + MODEL
        + "        self.table = self. positions(8)\n\n"
        + "    def positions(self, n):\n        return torch.arange(n, dtype=torch.float32)\n"
    )
    found = check_source("model.py", code, Settings(select_rules(["RPL101", "RPL104"], []), Path(".")))
    assert [d.code for d in found] == ["RPL101"]


REGISTERED = {
    "by a call": "def helper(n):\n    return torch.arange(n, dtype=torch.float32)\n\n\nkeep(helper)\n",
    "by a decorator": "@keep\ndef helper(n):\n    return torch.arange(n, dtype=torch.float32)\n",
}


@pytest.mark.parametrize("spelling", list(REGISTERED))
def test_a_helper_handed_to_a_registry_at_module_level_is_not_run_by_it(spelling: str) -> None:
    """timm 1.0.31, vision_transformer_sam.py: `register_notrace_function(get_rel_pos)` at module level hands the
    function to a registry, as the decorator `@register_notrace_function` would; only `forward` calls it, so its
    explicit float32 is RPL104's note, spelled either way."""
    code = (
        "import torch\nfrom torch import nn\n\n\ndef keep(fn):\n    return fn\n\n\n"
        + REGISTERED[spelling]
        + "\n\n"
        + MODEL
        + "        self.scale = 1.0\n\n    def forward(self, x):\n        return x + helper(x.shape[1])\n"
    )
    found = check_source("model.py", code, Settings(select_rules(["RPL101", "RPL104"], []), Path(".")))
    assert [d.code for d in found] == ["RPL104"]
