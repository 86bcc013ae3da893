"""The text screens (`rope_lint.prefilter.screens`): a screen may only drop an occurrence that no rule can flag, since a
dropped occurrence is never parsed."""

from __future__ import annotations

from pathlib import Path

import pytest

from rope_lint.engine import Settings, check_source
from rope_lint.prefilter import PrefilterSpec, combined_screens
from rope_lint.prefilter.candidates import Occurrences, Screen
from rope_lint.prefilter.screens import (
    arange_may_be_hazard,
    exp_may_be_hazard,
    log_may_be_hazard,
    rotary_name_may_be_class,
)
from rope_lint.rules import ALL_RULES, select_rules
from rope_lint.rules.analysis.rotary import may_store_a_table
from rope_lint.rules.base import Invalid, Rule

SCREENED_RULES = [rule for rule in ALL_RULES if rule.prefilter.screen is not None]


def screened(code: str, trigger: bytes = b"arange", screen: Screen = arange_may_be_hazard) -> list[bool]:
    data = code.encode()
    return [screen(data, position) for position in _positions(data, trigger)]


def found_lines(code: str, select: str) -> list[tuple[str, int]]:
    """The code and line of each finding of the `select`ed rules in `code`."""
    found = check_source("model.py", code, Settings(select_rules([select], []), Path(".")))
    return [(d.code, d.start.line) for d in found]


def _positions(data: bytes, word: bytes) -> list[int]:
    positions, start = [], data.find(word)
    while start != -1:
        positions.append(start)
        start = data.find(word, start + 1)
    return positions


def test_the_common_triggers_are_screened() -> None:
    assert {trigger for rule in SCREENED_RULES for trigger in rule.prefilter.triggers} >= {b"arange", b"log(", b"exp("}


@pytest.mark.parametrize(
    ("rule", "example"),
    [(rule, example) for rule in SCREENED_RULES for example in rule.examples if isinstance(example, Invalid)],
    ids=lambda value: value.code if isinstance(value, type) else value.code.splitlines()[-1][:40],
)
def test_every_flagged_example_passes_its_rules_screen(rule: type[Rule], example: Invalid) -> None:
    data = example.code.encode()
    triggers, screen = rule.prefilter.triggers, rule.prefilter.screen
    positions = [p for trigger in triggers for p in range(len(data)) if data.startswith(trigger, p)]
    assert any(screen(data, position) for position in positions)


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
        "t = torch.arange(0, d, 2) * -(math.log(10000.0) / d)\n",  # arithmetic with a Python float: RPL103
        "t = -step * torch.arange(n)\n",  # the float may be a name
        "ids = torch.arange(n, device=device).expand(b, n) * 2\n",  # an int here; `* 2 * 0.5` the text cannot tell
        't = torch.arange(len("x"))\n',  # a string inside the call: left in doubt
        "t = torch.arange(\n",  # an unclosed call
        # A cast right after, which may give the integer enumeration a floating dtype (RPL101).
        "t = torch.arange(n, dtype=torch.int64, device=device).to(dtype)\n",
        "t = torch.arange(n).to(x.device, x.dtype)\n",
        "t = torch.arange(n).to(half)\n",  # a name the text cannot tell from a device's
        "t = torch.arange(n, device=x.device).type_as(self.inv_freq)\n",
        "t = torch.arange(n).bfloat16()\n",
        "t = torch.arange(\n    n, dtype=torch.int64\n)\n    .to(dtype)\n",
        # Another library's name, rebound to torch by an `as` beside its import, or reached through another name.
        "import torch as np\nimport numpy as np\nt = np.arange(n) / n\n",
        "import numpy as np\nt = model.np.arange(n) / n\n",
        "import jax.numpy\nt = jax.numpy.arange(n) / n\n",
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
        "ids = torch.arange(n, device=device).expand(b, n) < lengths[:, None]\n",
        "ids = np.arange(n)\n",
        "ids = torch.arange(n).to(device)\n",  # a move to a device keeps the dtype
        "ids = torch.arange(n).to(x.device, non_blocking=True)\n",
        "ids = torch.arange(n).to(device=hidden_states.device)\n",
        "ids = torch.arange(n).long()\n",
        "ids = torch.arange(\n    n + 1, dtype=torch.int32, device=d\n)  # a copy here\nfirst = ids[:-1] / 2\n",
    ],
)
def test_integer_enumerations_outside_arithmetic_are_dropped(code: str) -> None:
    assert screened(code) == [False]


@pytest.mark.parametrize(
    "code",
    [
        "import numpy as np\nt = np.arange(n) / n\n",
        "import jax.numpy as jnp\nt = jnp.arange(n, dtype=jnp.float32) * 0.5\n",
        "from jax import numpy as jnp  # JAX\nt = jnp.arange(n) / n\n",
        "import numpy\nt = numpy.arange(0.0, n, 0.5)\n",
    ],
)
def test_another_librarys_arange_is_dropped(code: str) -> None:
    """The RPL1xx rules read `torch.arange` alone, by the names the file's imports bind: an `arange` called on a name
    bound to NumPy or JAX's NumPy is none, whatever its arguments."""
    assert screened(code) == [False]
    assert found_lines(code, "RPL1") == []


def test_a_forward_with_only_dropped_enumerations_is_not_parsed_but_its_neighbour_is() -> None:
    """A syntax error inside the dropped function goes unnoticed: it was never parsed. The hazard beside it is
    found all the same."""
    code = (
        "import torch\n\n\n"
        "def forward(x):\n"
        "    ids = torch.arange(x.shape[1], dtype=torch.long, device=x.device)\n"
        "    return ids +\n\n\n"
        "def table(n):\n"
        "    return torch.arange(n, dtype=torch.bfloat16)\n"
    )
    assert found_lines(code, "RPL1") == [("RPL101", 10)]


@pytest.mark.parametrize(
    ("code", "kept"),
    [
        ("y = torch.log(torch.sum(torch.exp(x), dim=-1))\n", True),
        ("y = torch.log(1 + x)\n", True),
        ("y = torch.log(torch.sigmoid(x))\n", True),
        ("y = torch.log(F.softmax(x, dim=-1))\n", True),
        ("y = x.exp().sum(-1).log()\n", True),  # a method's receiver: a call
        ("y = (\n    x.exp()\n    .log1p()\n)\n", True),  # a chain across lines: its receiver is the call above
        ("y = x.exp()  # a comment: left in doubt\\\n    .log()\n", True),
        ("y = torch.log(\n    probs  # a comment: left in doubt\n)\n", True),
        ("from torch.nn.functional import softmax as sm\ny = torch.log(sm(x, dim=-1))\n", True),  # a renamed inner
        ("y = lse.log_()\n", True),  # an in-place merge reads the statements before it
        ("scale = math.log(self.max_distance / self.max_exact)\n", False),
        ("y = torch.log(probs.clamp(min=eps))\n", False),
        ("y = scale.log()\n", False),
    ],
)
def test_the_log_screen_keeps_what_a_log_rule_reads(code: str, kept: bool) -> None:
    assert any(screened(code, b"log", log_may_be_hazard)) is kept


@pytest.mark.parametrize(
    ("code", "kept"),
    [
        ("d = torch.exp(log_duration) - 1\n", True),
        ("d = (torch.exp(x)) - 1\n", True),
        ("d = x.exp() - 1\n", True),
        ("p = torch.exp(logits)\n", False),
        ("p = torch.exp(logits) * mask\n", False),
        ("d = (\n    torch.exp(x)  # a comment before the operator\n    - 1\n)\n", True),
        ("p = torch.exp(logits)  # a comment, then the next statement\nq = -p\n", False),
    ],
)
def test_the_exp_screen_keeps_a_subtraction(code: str, kept: bool) -> None:
    assert screened(code, b"exp(", exp_may_be_hazard) == [kept]


@pytest.mark.parametrize(
    ("code", "kept"),
    [
        ("class LlamaRotaryEmbedding(nn.Module):\n", True),
        ("class Scaled(LlamaRotaryEmbedding):  # a subclass, by its base\n", True),
        ("    class NestedRopeCache:\n", True),
        ("        kwargs = {'sin': sin}  # Specific to RoPE models\n", False),
        ('    """Applies Rotary Position Embedding to the query and key tensors."""\n', False),
        ("        self.rotary_emb = LlamaRotaryEmbedding(config)\n", False),
    ],
)
def test_the_rotary_name_screen_keeps_class_headers_only(code: str, kept: bool) -> None:
    positions = [p for word in (b"Rotary", b"Rope", b"RoPE") for p in _positions(code.encode(), word)]
    assert [rotary_name_may_be_class(code.encode(), position) for position in positions] == [kept]


def test_the_rotary_name_screen_keeps_every_table() -> None:
    code = b"        freqs = torch.outer(t, self.inv_freq)  # RoPE\n"
    assert rotary_name_may_be_class(code, code.find(b"inv_freq"))


def test_an_attention_forward_that_only_mentions_rope_is_not_parsed() -> None:
    """Its comment names RoPE, but RPL203 reads rotary classes only: the forward (here with a syntax error) is
    left out, and the rotary class beside it is checked."""
    code = (
        "import torch\n\n\n"
        "class RotaryEmbedding(torch.nn.Module):\n"
        "    def __init__(self, dim, device=None):\n"
        "        self.inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, device=device).float() / dim))\n\n\n"
        "class Attention(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        kwargs = {'sin': sin}  # Specific to RoPE models\n"
        "        return x +\n"
    )
    assert found_lines(code, "RPL203") == [("RPL203", 6)]


# A file of NumPy code: words of table math (`arange`, `exp(`, `cos(`) and no table name, no store of a tensor on a
# module (`PrefilterSpec.requires` of the rules that read table stores).
NUMPY_GRID = """\
import numpy as np


def sinusoid_grid(n, dim):
    positions = np.arange(n)[:, None]
    steps = np.arange(0, dim, 2)
    frequencies = np.exp(-steps / dim)
    return np.cos(positions * frequencies)
"""


def test_table_math_marks_nothing_in_a_file_that_cannot_store_a_table() -> None:
    """RPL201 and RPL202 read table stores, which a file without a table's name or a store of a tensor on a module
    cannot hold: their triggers there mark nothing, and the file is not parsed, unless another rule's screen keeps a
    word. With a store added, the same words mark the function again."""
    settings = Settings(select_rules(["ALL"], []), Path("."))
    occurrences = Occurrences.of_text(NUMPY_GRID, settings.screens, settings.groups)
    assert occurrences.positions(settings.triggers) and occurrences.triggered(settings.triggers) == []
    stored = NUMPY_GRID + "\n\ndef keep(module, grid):\n    module.register_buffer('grid', grid)\n"
    occurrences = Occurrences.of_text(stored, settings.screens, settings.groups)
    assert len(occurrences.triggered(("arange",))) == 2


@pytest.mark.parametrize(
    ("rule", "example"),
    [
        (rule, example)
        for rule in ALL_RULES
        if rule.prefilter.requires is not None
        for example in rule.examples
        if isinstance(example, Invalid)
    ],
    ids=lambda value: value.code if isinstance(value, type) else value.code.splitlines()[-1][:40],
)
def test_every_flagged_example_meets_its_rules_requirement(rule: type[Rule], example: Invalid) -> None:
    assert rule.prefilter.requires(Occurrences(example.code.encode()))


# A model file whose only stores are position ids and weights: it cannot store a table.
POSITION_IDS = """\
import torch
from torch import nn


class Embeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(config.hidden_size))  # using a single precision cosine-free scale
        self.register_buffer("position_ids", torch.arange(config.max_position_embeddings).expand((1, -1)))

    def forward(self, x):
        return torch.exp(self.scale) * x + torch.einsum("bd,d->bd", x, self.scale)
"""


@pytest.mark.parametrize(
    ("added", "may_store"),
    [
        ("", False),
        ("inv_freq = None\n", True),  # a table's name
        ("class PartialRotary(nn.Module):\n    pass\n", True),  # a rotary class's name
        ("y = angles.cos()\n", True),
        ("z = torch.exp(1j * angles)\n", True),  # a complex exponential
        ("self.register_buffer('bandFreqs', b)\n", True),  # a name that `names_table` reads, in any case
        ("self.emb_cos = e\n", True),
        ("sin1 = e\n", True),
    ],
)
def test_a_file_may_store_a_table_where_something_says_so(added: str, may_store: bool) -> None:
    """RPL201 and RPL202 flag table stores: a file that names no table, or stores no tensor on a module, or has
    nothing that says a store holds a table (a rotary class's name, cos/sin, a complex exponential, a name such as
    `freqs`), cannot hold one, and their words of table math (`arange`, `exp(`, `einsum(`) mark nothing there."""
    code = POSITION_IDS + added
    assert may_store_a_table(Occurrences(code.encode())) is may_store
    settings = Settings(select_rules(["RPL2"], []), Path("."))
    occurrences = Occurrences.of_text(code, settings.screens, settings.groups)
    assert bool(occurrences.triggered(("arange", "exp(", "einsum("))) is may_store


def test_a_trigger_is_kept_where_any_rule_taking_it_keeps_it() -> None:
    """Of the rules that take a trigger, one whose requirement the file meets and that has no screen keeps every
    occurrence; one whose requirement it lacks keeps none; one with a screen keeps what its screen lets through."""
    needs_a_store = PrefilterSpec(triggers=(b"exp(",), requires=lambda occurrences: b"store" in occurrences.data)
    subtraction = PrefilterSpec(triggers=(b"exp(",), screen=exp_may_be_hazard)
    keep = combined_screens([needs_a_store, subtraction], ["exp("])["exp("]
    code = "a = torch.exp(x)\nb = torch.exp(y) - 1\n"
    for text, kept in ((code, [code.index("exp(y")]), ("store = 1\n" + code, None)):
        occurrences = Occurrences(text.encode())
        positions = occurrences.positions(("exp(",))
        assert keep(occurrences, positions) == (positions if kept is None else kept)
