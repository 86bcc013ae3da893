"""Which stores hold rotary tables, and which of those the class guards (issue 20): the shared answers of
`rotary.table_stores` and `rotary.guarded`, beyond RPL202's own examples; and the casts of tables that RPL201 does
not read (its Known problems)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from rope_lint.engine import Settings, check_source
from rope_lint.rules import select_rules
from rope_lint.rules.analysis import rotary
from rope_lint.rules.analysis.context import FileContext

TRIGGERS = tuple(trigger.decode() for trigger in rotary.STORE_TRIGGERS)


def context(source: str) -> FileContext:
    source = textwrap.dedent(source)
    return FileContext("module.py", source, ast.parse(source), TRIGGERS)


RECOMPUTED_IN_FORWARD = """
    import torch

    class ScaledRotary(torch.nn.Module):
        def __init__(self, dim):
            super().__init__()
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
            self.register_buffer("inv_freq", tensor=inv_freq, persistent=False)

        def forward(self, x, positions, factors):
            shape = torch.arange(0, x.shape[-1], 2, device=x.device).float() / x.shape[-1]
            self.inv_freq = 1.0 / (factors * 10000**shape)
            return torch.outer(positions.float(), self.inv_freq).cos()
    """

METADATA_ONLY = """
    import torch

    class RotaryEmbedding(torch.nn.Module):
        def __init__(self, dim):
            super().__init__()
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2) / dim))
            self.register_buffer("inv_freq", inv_freq)
            self.dim = dim

        def forward(self, n):
            return table(n, self.dim, dtype=self.inv_freq.dtype, device=self.inv_freq.device)
    """

LIVE = """
    import torch

    class RotaryEmbedding(torch.nn.Module):
        def __init__(self, dim):
            super().__init__()
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2) / dim))
            self.register_buffer("inv_freq", inv_freq)

        def forward(self, x, positions):
            return torch.outer(positions.float(), self.inv_freq).cos()
    """

# A forward that computes the table anew where a cast rounded it, and reads it only where it is float32.
READ_WHERE_FLOAT32 = """
    import torch

    class RotaryEmbedding(torch.nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dim = dim
            self.register_buffer("inv_freq", self._inv_freq(), persistent=False)

        def _inv_freq(self):
            return 1.0 / (10000 ** (torch.arange(0, self.dim, 2).float() / self.dim))

        def forward(self, x, positions):
            if self.inv_freq.dtype {test} torch.float32:
                inv_freq = {first}
            else:
                inv_freq = {second}
            return torch.outer(positions.float(), inv_freq).cos()
    """
ANEW, HELD = "self._inv_freq().to(x.device)", "self.inv_freq"


@pytest.mark.parametrize(
    ("source", "guarded"),
    [
        pytest.param(RECOMPUTED_IN_FORWARD, True, id="forward-recomputes-before-use"),
        pytest.param(METADATA_ONLY, True, id="only-dtype-and-device-read"),
        pytest.param(LIVE, False, id="values-read"),
        pytest.param(READ_WHERE_FLOAT32.format(test="!=", first=ANEW, second=HELD), True, id="read-unless-not-float32"),
        pytest.param(READ_WHERE_FLOAT32.format(test="==", first=HELD, second=ANEW), True, id="read-where-float32"),
        pytest.param(READ_WHERE_FLOAT32.format(test="==", first=ANEW, second=HELD), False, id="read-where-not-float32"),
    ],
)
def test_a_buffer_whose_values_nothing_reads_is_guarded(source: str, guarded: bool) -> None:
    ctx = context(source)
    [store] = [store for store in rotary.table_stores(ctx) if store.as_buffer]
    assert rotary.guarded(ctx, store) is guarded


def test_a_read_elsewhere_in_the_text_keeps_the_buffer_live() -> None:
    """A name the parsed code does not account for (here a `getattr` by string) counts as a read."""
    ctx = context(METADATA_ONLY.replace("return table(", 'getattr(self, "inv_freq")\n            return table('))
    [store] = rotary.table_stores(ctx)
    assert not rotary.guarded(ctx, store)


def test_an_apply_rebuild_from_a_cast_buffer_is_no_guard() -> None:
    """`_apply` rebuilds the cos/sin cache after the cast, but from `inv_freq`, which the cast rounded."""
    ctx = context(
        """
        import torch

        class RotaryEmbedding(torch.nn.Module):
            def __init__(self, dim, n):
                super().__init__()
                self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))
                self._build(n)

            def _build(self, n):
                freqs = torch.outer(torch.arange(n).float(), self.inv_freq)
                self.register_buffer("cos_cached", freqs.cos(), persistent=False)

            def _apply(self, fn, recurse=True):
                super()._apply(fn, recurse)
                self._build(self.cos_cached.shape[0])
                return self

            def forward(self, x):
                return self.cos_cached.to(x.dtype)
        """
    )
    stores = {store.name: store for store in rotary.table_stores(ctx) if store.as_buffer}
    assert not rotary.guarded(ctx, stores["cos_cached"])


@pytest.mark.parametrize(
    ("name", "says_table"),
    [
        ("inv_freq", True),
        ("freqs", True),
        ("pos_frequencies", True),
        ("freqs_cos", True),
        ("rope_sin", True),
        ("freqs_cis", True),
        ("freq_embed", False),
        ("cosine_schedule", False),
        ("position_ids", False),
        # A count, even of frequencies; after `_per_` a name gives the unit, not what it holds.
        ("num_freqs", False),
        ("n_freqs", False),
        ("num_bands_per_freq", False),
        ("band_freqs", True),
        ("sin_pos", True),
    ],
)
def test_names_that_say_table(name: str, says_table: bool) -> None:
    assert rotary.names_table(name) is says_table


def test_tables_the_codemod_does_not_know_come_without_its_rewrite() -> None:
    ctx = context(
        """
        import torch

        class Positions(torch.nn.Module):
            def __init__(self, dim, n):
                super().__init__()
                freqs = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
                self.register_buffer("inv_freq", freqs, persistent=False)
                self.register_buffer("angles", torch.outer(torch.arange(n).float(), freqs), persistent=False)

            def forward(self, pos):
                return self.angles[pos].cos()
        """
    )
    assert {store.name: store.rewritten for store in rotary.table_stores(ctx)} == {"inv_freq": True, "angles": False}


def test_a_store_of_integers_or_bools_is_no_table_whatever_its_name() -> None:
    # `module.to(torch.bfloat16)` casts floating tensors only: a mask, a count of one and an int64 enumeration are
    # stored exactly, and the floating store beside them stays a table.
    ctx = context(
        """
        import torch

        class BandSplit(torch.nn.Module):
            def __init__(self, bank, n):
                super().__init__()
                in_band = bank > 0
                self.register_buffer("mask_freq", in_band, persistent=False)
                self.register_buffer("count_freq", in_band.sum(-1), persistent=False)
                self.register_buffer("peak_freq", bank.argmax(-1), persistent=False)
                self.register_buffer("pos_freq", torch.arange(n), persistent=False)
                self.register_buffer("flags_freq", in_band & (bank < 1), persistent=False)
                self.register_buffer("band_freqs", bank.sum(-1), persistent=False)

            def forward(self, x):
                return torch.outer(self.pos_freq.float(), self.band_freqs).cos()[self.mask_freq]
        """
    )
    assert [store.name for store in rotary.table_stores(ctx)] == ["band_freqs"]


def test_a_table_read_into_a_name_that_sounds_integral_stays_a_table() -> None:
    # Only the code says a store holds integers: `sin_pos` and `cos_pos` hold what another module's functions return,
    # and a name's last word (`pos`) says nothing of a table's dtype here.
    ctx = context(
        """
        import torch
        from .tables import rotary_cos, rotary_sin

        class RotaryEmbedding(torch.nn.Module):
            def __init__(self, dim, n):
                super().__init__()
                sin_pos = rotary_sin(dim, n)
                cos_pos = rotary_cos(dim, n)
                self.register_buffer("sin_pos", sin_pos, persistent=False)
                self.register_buffer("cos_pos", cos_pos, persistent=False)

            def forward(self, x):
                return x * self.cos_pos + x * self.sin_pos
        """
    )
    assert [store.name for store in rotary.table_stores(ctx)] == ["sin_pos", "cos_pos"]


def test_a_table_computed_from_what_a_later_method_stores_is_a_table() -> None:
    # `rebuild` comes first in the class and reads the angles that `__init__` keeps below it: the class's methods are
    # read a second time, where a read found less than the class holds in the end.
    ctx = context(
        """
        import torch

        class WaveRotaryEmbedding(torch.nn.Module):
            def rebuild(self, dtype):
                self.register_buffer("waves", self.phases.cos().to(dtype), persistent=False)

            def __init__(self, dim, length):
                super().__init__()
                steps = 1.0 / 10000 ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)
                self.phases = torch.outer(torch.arange(length, dtype=torch.int64).float(), steps)

            def forward(self, x):
                return x * self.waves[: x.shape[-2]].to(x.dtype)
        """
    )
    assert [store.name for store in rotary.table_stores(ctx)] == ["waves"]


KNOWN_MISSES_OF_THE_CAST_RULE = """
    import torch

    class CastBeforeTheStore(torch.nn.Module):
        def __init__(self, dim, n, dtype):
            super().__init__()
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
            emb = torch.outer(torch.arange(n, dtype=torch.int64).float(), inv_freq)
            cos = emb.cos().to(dtype)  # cast under another name
            self.register_buffer("cos_cached", cos, persistent=False)
            self.register_buffer("sin_cached", emb.to(dtype).sin(), persistent=False)  # the angles cast

        def forward(self, x, n):
            return self.cos_cached[:n].to(x.dtype), self.sin_cached[:n].to(x.dtype)

    class ComplexTable(torch.nn.Module):
        def __init__(self, dim, n):
            super().__init__()
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
            angles = torch.outer(torch.arange(n, dtype=torch.int64).float(), inv_freq)
            self.freqs_cis = torch.polar(torch.ones_like(angles), angles).to(torch.complex32)

        def forward(self, x, n):
            return self.freqs_cis[:n]
    """


def test_the_casts_that_rpl201_lists_under_known_problems_are_missed_and_the_buffers_still_flagged() -> None:
    source = textwrap.dedent(KNOWN_MISSES_OF_THE_CAST_RULE)
    found = check_source("module.py", source, Settings(select_rules(["RPL201", "RPL202"], []), Path(".")))
    assert [(d.code, d.start.line) for d in found] == [("RPL202", 10), ("RPL202", 11)]
    # The same stores cast on the way in are flagged.
    direct = source.replace("emb.to(dtype).sin()", "emb.sin().to(dtype)").replace(", cos,", ", cos.to(dtype),")
    found = check_source("module.py", direct, Settings(select_rules(["RPL201"], []), Path(".")))
    assert [d.start.line for d in found] == [10, 11]
    # A complex table is no table to the rules.
    assert [store.name for store in rotary.table_stores(context(KNOWN_MISSES_OF_THE_CAST_RULE))] == [
        "cos_cached",
        "sin_cached",
    ]
