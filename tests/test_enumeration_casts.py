"""RPL101's casts: an integer enumeration that a cast right after gives a dtype that can be bf16
(`torch.arange(n, dtype=torch.int64).to(dtype)`, the form PR #28760 wrote by hand), which rounds the positions as an
enumeration in that dtype does."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import rope_lint

from rope_lint.rules.analysis import enumerations
from rope_lint.rules.analysis.context import FileContext

torch = pytest.importorskip("torch")


def only_arange(code: str) -> tuple[FileContext, ast.Call]:
    source = f"import torch\ndef f(x, ids, n: int, dtype: torch.dtype):\n    return {code}\n"
    ctx = FileContext("module.py", source, ast.parse(source), ("arange",))
    [call] = ctx.calls("torch.arange")
    return ctx, call


def test_an_integer_enumeration_cast_to_bf16_rounds_the_positions_above_256() -> None:
    positions = torch.arange(4096, dtype=torch.int64).to(torch.bfloat16)
    assert positions[256].item() == 256 and positions[257].item() != 257
    assert positions.unique().numel() < 4096 / 2


@pytest.mark.parametrize(
    ("code", "integral"),
    [
        ("torch.arange(n)", True),
        ("torch.arange(n, dtype=torch.int32)", True),
        ("torch.arange(n, dtype=ids.dtype)", True),  # the dtype of indices
        ("torch.arange(0, n, 2.0)", False),  # a float bound gives the default dtype
        ("torch.arange(n * 0.5)", False),
        ("torch.arange(n, dtype=torch.float32)", False),
        ("torch.arange(n, dtype=x.dtype)", False),
    ],
)
def test_which_enumerations_are_integer(code: str, integral: bool) -> None:
    assert enumerations.is_integer_enumeration(*only_arange(code)) is integral


@pytest.mark.parametrize(
    ("code", "method", "argument"),
    [
        ("torch.arange(n).to(dtype)", "to", "dtype"),
        ("torch.arange(n).to(dtype=x.dtype)", "to", "x.dtype"),
        ("torch.arange(n).to(x.device, x.dtype)", "to", "x.dtype"),
        ("torch.arange(n).type(torch.bfloat16)", "type", "torch.bfloat16"),
        ("torch.arange(n).type_as(x)", "type_as", "x"),  # the tensor, whose dtype it takes
        ("torch.arange(n).bfloat16()", "bfloat16", None),
        ("torch.arange(n).to(x.device)", None, None),  # a move
        ("torch.arange(n).to(x)", None, None),  # a tensor's dtype and device: not read (Known problems)
        ("torch.arange(n).float()", None, None),  # float32, exact
        ("torch.arange(n)[None].to(dtype)", None, None),  # not right after the call (Known problems)
    ],
)
def test_the_casts_that_rpl101_reads(code: str, method: str | None, argument: str | None) -> None:
    found = enumerations.cast_after(*only_arange(code))
    if method is None:
        assert found is None
        return
    assert found is not None
    cast, given = found
    assert cast.func.attr == method  # type: ignore[attr-defined]
    assert (None if given is None else ast.unparse(given)) == argument


def test_fix_leaves_a_cast_as_it_is_and_reports_it(tmp_path: Path) -> None:
    path = tmp_path / "sine.py"
    source = (
        "import torch\n\n\n"
        "def sine_positions(hidden_states, n: int):\n"
        "    return torch.arange(n, dtype=torch.int64, device=hidden_states.device).to(hidden_states.dtype)\n"
    )
    path.write_text(source)
    run = rope_lint("fix", "--unsafe-fixes", str(path))
    assert run.returncode == 1
    assert "Fixed 0 findings, 1 remaining." in run.stdout
    assert path.read_text() == source
