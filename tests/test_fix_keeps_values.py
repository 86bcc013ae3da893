"""The float-enumeration fixes keep what correct code computes (issue 15, shapes 1 and 2).

Shape 1: an int64 rewrite of an enumeration whose bounds are not integral loses an element or raises, so it is
offered only where `enumerations.end_rounding` finds one that keeps the elements: every bound proven integral, or all
but the end, which is then rounded up with `math.ceil`. Shape 2: a dtype is never lowered. Each fixture function is
run from the hazard file and from what `rope-lint fix --unsafe-fixes` makes of it now, in fp32 (and in float64,
where a runtime dtype could be lowered), and the results must have the same values, dtype and shape; a finding
without a fix is shown to have none, and to be one where the int64 rewrite would have changed the result.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from helpers import REPO, load_module

from rope_lint import api
from rope_lint.rules.analysis import enumerations, rotary
from rope_lint.rules.analysis.context import FileContext

torch = pytest.importorskip("torch")

HAZARDS = REPO / "fixtures" / "hazards"
FIXTURES = ("enumeration_bounds.py", "enumeration_dtypes.py")


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[ModuleType, ModuleType, api.FixReport]]:
    """For each fixture: the hazard module, the module that the fix makes of it now, and the fix's report."""
    folder = tmp_path_factory.mktemp("enumerations")
    found = {}
    for name in FIXTURES:
        copy = folder / name
        shutil.copy(HAZARDS / name, copy)
        report = api.fix([str(copy)], api.Options(select=["RPL1"]), unsafe=True)
        stem = name.removesuffix(".py")
        found[name] = (load_module(HAZARDS / name, f"{stem}_original"), load_module(copy, f"{stem}_fixed"), report)
    return found


def assert_same(original: torch.Tensor, fixed: torch.Tensor) -> None:
    assert fixed.dtype == original.dtype
    assert fixed.shape == original.shape
    assert torch.equal(fixed, original)


def hidden(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(dtype)


# (fixture, function, arguments): each run in the original and the fixed module.
CALLS = [
    # Bounds not proven integral: the finding stays without an int64 fix, and the code computes what it did.
    ("enumeration_bounds.py", "centred_offsets", (3,)),
    ("enumeration_bounds.py", "centred_offsets", (2.5,)),
    ("enumeration_bounds.py", "exponents", (8,)),
    ("enumeration_bounds.py", "strided", (10, 2)),
    ("enumeration_bounds.py", "strided", (3, 0.5)),
    # Proven integral but for the end, which is rounded up (`math.ceil`): the int64 rewrite, with the same values.
    ("enumeration_bounds.py", "stretched", (4.5,)),
    ("enumeration_bounds.py", "stretched", (4,)),
    # Proven integral: the int64 rewrite, with the same values.
    ("enumeration_bounds.py", "by_length", ([0] * 300,)),
    ("enumeration_bounds.py", "by_shape", (hidden(2, 517),)),
    ("enumeration_bounds.py", "by_size", (hidden(2, 3, 301),)),
    ("enumeration_bounds.py", "by_annotation", (300, 7)),
    ("enumeration_bounds.py", "by_names", (hidden(3, 600, 40), 520)),
    ("enumeration_bounds.py", "by_rounding", (31.7,)),
    # The dtype comes back as it was, never lower: float64 stays float64 (far above float32's 2**24).
    ("enumeration_dtypes.py", "exact_far_positions", (2**53 - 16,)),
    ("enumeration_dtypes.py", "double_positions", ([0] * 1000,)),
    ("enumeration_dtypes.py", "unproven_double", (0, 7)),
    ("enumeration_dtypes.py", "unproven_double", (0.5, 7)),
    ("enumeration_dtypes.py", "like_input", (hidden(2, 300),)),
    ("enumeration_dtypes.py", "like_input", (hidden(2, 300, dtype=torch.float64),)),
    ("enumeration_dtypes.py", "in_dtype", (300,)),
    ("enumeration_dtypes.py", "in_dtype", (300, torch.float64)),
    # A dtype that only a guess calls floating: an integer one stays integer, a floating one is promoted as above.
    ("enumeration_dtypes.py", "frame_offsets", (torch.tensor([3, 0, 5]), 4)),
    ("enumeration_dtypes.py", "frame_offsets", (hidden(300), 4)),
    ("enumeration_dtypes.py", "bit_weights", (12, torch.int32)),
    ("enumeration_dtypes.py", "bit_weights", (12, torch.float64)),
]


@pytest.mark.parametrize(
    ("fixture", "function", "arguments"),
    CALLS,
    ids=[f"{function}-{index}" for index, (_, function, _) in enumerate(CALLS)],
)
def test_fixed_function_returns_what_the_original_did(pairs, fixture: str, function: str, arguments: tuple) -> None:
    original, fixed, _ = pairs[fixture]
    assert_same(getattr(original, function)(*arguments), getattr(fixed, function)(*arguments))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fixed_modules_return_what_the_originals_did(pairs, dtype: torch.dtype) -> None:
    """The classes, built alike, in fp32 and in float64: a runtime dtype is promoted, never lowered."""
    for fixture, build, argument in [
        ("enumeration_bounds.py", lambda m: m.PositionTable(64, 16), hidden(2, 16)),
        ("enumeration_dtypes.py", lambda m: m.Positions(16, 64), hidden(2, 16)),
    ]:
        original, fixed, _ = pairs[fixture]
        results = []
        for module in (original, fixed):
            torch.manual_seed(0)
            results.append(build(module).to(dtype)(argument.to(dtype)))
        assert_same(*results)


def test_a_low_precision_dtype_is_raised_to_float32_with_the_values_it_rounded(pairs) -> None:
    """bf16 comes back as float32 (an unsafe fix): the exact positions, which bf16 rounds above 256."""
    original, fixed, _ = pairs["enumeration_dtypes.py"]
    before, after = original.half_positions(600), fixed.half_positions(600)
    assert (before.dtype, after.dtype) == (torch.bfloat16, torch.float32)
    assert after.shape == before.shape
    assert torch.equal(after, torch.arange(600, dtype=torch.float64).float())
    assert torch.equal(after.to(torch.bfloat16), before)


# Where the int64 rewrite would have changed the result: the arguments that show it, per unfixed function.
UNFIXED = {
    ("enumeration_bounds.py", "centred_offsets"): (3,),
    ("enumeration_bounds.py", "exponents"): (8,),
    ("enumeration_bounds.py", "strided"): (3, 0.5),
}


def function_lines(path: Path) -> dict[str, int]:
    """The line of the `torch.arange` call in each top-level function of a fixture."""
    lines = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef):
            calls = [n for n in ast.walk(node) if isinstance(n, ast.Call) and ast.unparse(n.func) == "torch.arange"]
            lines[node.name] = calls[0].lineno
    return lines


@pytest.mark.parametrize(("fixture", "function"), sorted(UNFIXED))
def test_no_int64_fix_where_it_would_change_the_result(pairs, fixture: str, function: str) -> None:
    report = api.check([str(HAZARDS / fixture)], api.Options(select=["RPL1"]), cache=False)
    line = function_lines(HAZARDS / fixture)[function]
    at_line = [d for d in report.findings if d.start.line == line]
    assert len(at_line) == 1 and at_line[0].fix is None
    _, fixed, fix_report = pairs[fixture]
    assert function_lines(Path(fixed.__file__))[function] in {d.start.line for d in fix_report.remaining}

    # The int64 rewrite that was refused: same source, `dtype=torch.int64`, then `.float()`.
    original = load_module(HAZARDS / fixture, "refused_original")
    source = (HAZARDS / fixture).read_text().splitlines()
    call = source[line - 1]
    rewritten = call.replace("dtype=torch.float32", "dtype=torch.int64")
    rewritten = rewritten.replace("dtype=torch.float64", "dtype=torch.int64").replace("1.0)", "1, dtype=torch.int64)")
    rewritten = rewritten.replace("  # expect", ".float()  # expect")
    assert rewritten != call
    refused = [*source[: line - 1], rewritten, *source[line:]]
    path = Path(pairs[fixture][1].__file__).with_name(f"refused_{fixture}")
    path.write_text("\n".join(refused) + "\n")
    arguments = UNFIXED[(fixture, function)]
    expected = getattr(original, function)(*arguments)
    try:
        got = getattr(load_module(path, "refused"), function)(*arguments)
    except (RuntimeError, ValueError) as error:
        assert "step must be nonzero" in str(error)
        return
    assert got.shape != expected.shape or not torch.equal(got.to(expected.dtype), expected)


def test_the_findings_without_a_fix_are_those_counted_remaining(pairs) -> None:
    """The unfixed findings are the functions above and the enumeration in a constructor; the fix counts them
    remaining, and every other finding fixed."""

    def unfixed_lines(path: Path) -> list[int]:
        """The lines of the unfixed functions' enumerations, and of the one in a constructor, in `path`."""
        lines = {function_lines(path)[name] for (f, name) in UNFIXED if f == path.name}
        if path.name == "enumeration_dtypes.py":
            text = path.read_text().splitlines()
            lines.add(next(number for number, line in enumerate(text, start=1) if '"scale", torch.arange' in line))
        return sorted(lines)

    for fixture in FIXTURES:
        findings = api.check([str(HAZARDS / fixture)], api.Options(select=["RPL1"]), cache=False).findings
        unfixed = sorted(d.start.line for d in findings if d.fix is None)
        assert unfixed == unfixed_lines(HAZARDS / fixture)
        _, fixed, report = pairs[fixture]
        # The fix may add `import math` above them: the lines are looked up in the fixed file.
        assert sorted(d.start.line for d in report.remaining) == unfixed_lines(Path(fixed.__file__))
        assert len(report.fixed) == len(findings) - len(unfixed)


# Bounds proven integral: where `enumerations.end_rounding` answers "", an int64 enumeration with no rounding.
PROOFS = [
    # The examples: not proven.
    ("def f(dim):\n    return torch.arange(0, 1, 4 / dim, dtype=torch.float32)\n", False),
    ("def f(t):\n    return torch.arange(-t, t + 0.1, 1, dtype=torch.float32)\n", False),
    ("def f(t: int):\n    return torch.arange(-t, t + 0.1, 1, dtype=torch.float32)\n", False),
    ("def f(n: int, step):\n    return torch.arange(0, n, step, dtype=torch.float32)\n", False),
    ("def f(n):\n    return torch.arange(n, dtype=torch.float64)\n", False),
    ("def f(n=8):\n    return torch.arange(n)\n", False),  # a default is not an annotation: a caller passes any
    ("class R:\n    def f(self):\n        return torch.arange(self.max_len)\n", False),
    ("def f(x):\n    n = len(x)\n    n = n / 2\n    return torch.arange(n)\n", False),
    ("def f(x):\n    n = len(x)\n    n += 0.5\n    return torch.arange(n)\n", False),
    ("def f(xs):\n    n = 0\n    for n in xs:\n        pass\n    return torch.arange(n)\n", False),
    ("def f(x):\n    n = len(x)\n    with open(x) as n:\n        pass\n    return torch.arange(n)\n", False),
    ("n = 4\ndef g():\n    global n\n    n = 0.5\ndef f():\n    return torch.arange(n)\n", False),
    ("def f(x):\n    n = x.shape\n    return torch.arange(n)\n", False),
    ("def f(x):\n    return torch.arange(x.size())\n", False),
    ("def f(x):\n    return torch.arange(round(x, 2))\n", False),
    ("def f(n: int):\n    return torch.arange(n ** 2)\n", False),
    # Proven.
    ("def f(x):\n    return torch.arange(len(x), dtype=torch.float32)\n", True),
    ("def f(x):\n    return torch.arange(0, x.shape[-1], 2)\n", True),
    ("def f(x):\n    return torch.arange(x.size(1) - 1, -1, -1.0)\n", True),
    ("def f(x):\n    return torch.arange(int(x * 3.5))\n", True),
    ("def f(x):\n    return torch.arange(x // 2, x.numel())\n", True),  # `//` of anything is integral
    ("def f(n: int, k: 'int'):\n    return torch.arange(-n, n + 1, k % 3 + 1)\n", True),
    ("def f(x, w: int):\n    a, b, c = x.shape\n    n = max(a, w) * 2\n    return torch.arange(n, b)\n", True),
    ("def f(x):\n    n = len(x)\n    for i in range(n):\n        n += i\n    return torch.arange(n)\n", True),
    ("def f(x):\n    n = len(x)\n    n = n + 1\n    return torch.arange(n)\n", True),
    ("import math\ndef f(x):\n    return torch.arange(math.ceil(x / 2))\n", True),
    ("N = 4096\ndef f():\n    return torch.arange(N)\n", True),
    ("def f(x):\n    n = len(x)\n    return [torch.arange(i, n) for i in range(n)]\n", True),
    ("def f(x):\n    n = len(x)\n    def g():\n        return torch.arange(n)\n    return g\n", True),
]


@pytest.mark.parametrize(("code", "proven"), PROOFS)
def test_bounds_proven_integral(code: str, proven: bool) -> None:
    source = "import torch\n" + code
    ctx = FileContext("proof.py", source, ast.parse(source), ("arange",))
    [call] = ctx.calls("torch.arange")
    assert (enumerations.end_rounding(ctx, call) == "") is proven


def test_construction_is_the_rotary_answer() -> None:
    """What runs at construction is what `rotary.construction_methods` says, for the rules and the codemod alike."""
    source = (
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        self.build()\n"
        "    def build(self):\n"
        "        return torch.arange(4)\n"
        "    def forward(self):\n"
        "        return torch.arange(4)\n"
        "def helper():\n"
        "    return torch.arange(4)\n"
    )
    tree = ast.parse(source)
    ctx = FileContext("m.py", source, tree, ("arange",))
    build, forward, helper = ctx.calls("torch.arange")
    assert rotary.construction_methods(tree.body[1]) == {"__init__", "build"}
    assert enumerations.runs_only_after_construction(ctx, build) is None
    assert enumerations.runs_only_after_construction(ctx, forward) == frozenset()
    # A public helper: its package decides (rules/analysis/callers.py).
    assert enumerations.runs_only_after_construction(ctx, helper) == {"helper"}
