"""A fix never breaks a file: the names it writes reach the modules it means, in the scope it writes them in.

Each program here has a finding whose fix writes `torch.<function>` (or `torch.int64`, `math.ceil`) where the name
`torch` (or `math`) is not the module, or where adding `import torch` is itself a hazard. The fixed text must compile,
compute what the original computed, and have no fixable finding left.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import REPO

from rope_lint.api import fix
from rope_lint.engine import Settings, check_source
from rope_lint.fix.apply import apply_fixes, fixable
from rope_lint.rules import select_rules

ALL_RULES = Settings(select_rules(["ALL"], []), Path("."))


def fixed_text(tmp_path: Path, original: str) -> str:
    """The file after one `fix --unsafe-fixes`, which must leave no fixable finding and no failure."""
    path = tmp_path / "model.py"
    path.write_text(original)
    report = fix([str(path)], unsafe=True)
    assert not report.failures, report.failures
    text = path.read_text()
    compile(text, str(path), "exec")
    assert not fixable(check_source(str(path), text, ALL_RULES), unsafe=True), text
    return text


def results(text: str) -> object:
    """What `f(a, b)` gives, on two small fp32 tensors, after running `text` as a module of its own."""
    namespace: dict[str, object] = {"__name__": "scoped_program"}
    exec(compile(text, "<program>", "exec"), namespace)
    function = namespace["f"]
    assert callable(function)
    return function(torch.tensor([0.5, -1.0, 3.0]), torch.tensor([1.5, 2.0, -0.25]))


def assert_same(original: object, fixed: object) -> None:
    if isinstance(original, tuple):
        assert isinstance(fixed, tuple) and len(fixed) == len(original)
        for a, b in zip(original, fixed, strict=True):
            assert_same(a, b)
        return
    assert isinstance(original, torch.Tensor) and isinstance(fixed, torch.Tensor)
    assert (original.dtype, original.shape) == (fixed.dtype, fixed.shape)
    assert torch.allclose(original, fixed, rtol=1e-6, atol=0), (original, fixed)


# Programs whose `torch` at the finding is not the module (or is declared global/nonlocal there), each with a
# function `f(a, b)`. The rewrite of `(a.exp() + b.exp()).log()` writes `torch.logaddexp`; where the file itself binds
# `torch` to something else at module level, no fix may be offered instead.
SCOPES: dict[str, str] = {
    "global after the use": (
        "import torch\n\n\ndef f(a, b):\n    y = (a.exp() + b.exp()).log()\n    global torch\n    return y\n"
    ),
    "nonlocal after the use": (
        "import torch\n\n\ndef f(a, b):\n    torch = None\n\n    def g():\n        y = (a.exp() + b.exp()).log()\n"
        "        nonlocal torch\n        return y\n\n    return g()\n"
    ),
    "global and no import": ("def f(a, b):\n    y = (a.exp() + b.exp()).log()\n    global torch\n    return y\n"),
    "parameter": ("def f(a, b, torch=3):\n    return (a.exp() + b.exp()).log()\n"),
    "local after the use": ("def f(a, b):\n    y = (a.exp() + b.exp()).log()\n    torch = 3\n    return y\n"),
    "annotation": ("def f(a, b):\n    torch: int\n    return (a.exp() + b.exp()).log()\n"),
    "class body": (
        "import torch\n\n\ndef f(a, b):\n    class C:\n        torch = 3\n        y = (a.exp() + b.exp()).log()\n\n"
        "    return C.y\n"
    ),
    "comprehension": ("def f(a, b):\n    return [(a.exp() + b.exp()).log() for torch in range(1)][0]\n"),
    "lambda": ("f = lambda a, b, torch=2: (a.exp() + b.exp()).log()\n"),
    "walrus": ("def f(a, b):\n    y = (a.exp() + b.exp()).log()\n    if (torch := 3):\n        return y\n"),
    "module rebinding": ("import torch\n\n\ndef f(a, b):\n    return (a.exp() + b.exp()).log()\n\n\ntorch = 3\n"),
    "import as torch": (
        "import torch\nimport fractions as torch\n\n\ndef f(a, b):\n    return (a.exp() + b.exp()).log()\n"
    ),
    "from import torch": (
        "from fractions import Fraction as torch\n\n\ndef f(a, b):\n    return (a.exp() + b.exp()).log()\n"
    ),
    "math shadowed": (
        "import torch\n\n\ndef f(a, b, math=None):\n    n = a.shape[0] * 1.5\n"
        "    return torch.arange(n, dtype=torch.float32), b\n"
        # Run at import, where a constructor may run it: RPL101's, not RPL104's note.
        "\n\nTABLE = f(torch.zeros(2), 0)\n"
    ),
}


@pytest.mark.parametrize("name", list(SCOPES))
def test_a_fix_reaches_the_module_it_means_whatever_the_scope(tmp_path: Path, name: str) -> None:
    original = SCOPES[name]
    text = fixed_text(tmp_path, original)
    assert text != original or name.endswith("torch")
    assert_same(results(original), results(text))


def test_an_import_goes_after_a_future_import_that_shares_its_line(tmp_path: Path) -> None:
    original = (
        '"""A module."""\nfrom __future__ import annotations; import os\n\n\n'
        "def f(a, b):\n    return (a.exp() + b.exp()).log(), os.sep\n"
    )
    text = fixed_text(tmp_path, original)
    assert text.startswith('"""A module."""\nfrom __future__ import annotations; import os\n')
    assert_same(results(original)[0], results(text)[0])


@pytest.mark.parametrize(
    "original",
    [
        "import torch\n\x0c\ndef g(x):\n    return x\n\x0cdef f(a, b):\n"
        "    return torch.log(torch.exp(a) + torch.exp(b))\n\x0c\n",
        "import torch\n\n\n\x0cdef f(a, b):\n\x0c    return torch.log(torch.exp(a) + torch.exp(b))\n\x0c\n",
        "\x0cimport torch\ndef f(a, b):\n    return torch.log(torch.exp(a) + torch.exp(b))\n\x0c# end\n",
    ],
    ids=["between statements", "in a function", "first line"],
)
def test_a_form_feed_stays_on_every_line_without_a_finding(tmp_path: Path, original: str) -> None:
    text = fixed_text(tmp_path, original)
    flagged = {d.start.line for d in check_source("model.py", original, ALL_RULES)}
    old_lines = original.split("\n")
    new_lines = text.split("\n")
    assert len(old_lines) == len(new_lines)
    for number, (old, new) in enumerate(zip(old_lines, new_lines, strict=True), start=1):
        if number not in flagged:
            assert old == new, (number, old, new)


def test_an_added_import_is_placed_once_for_many_findings(tmp_path: Path) -> None:
    """Many findings that need `import torch` add it once, and a fresh alias is not taken where `torch` is free."""
    original = "".join(f"def f{i}(a, b):\n    return (a.exp() + b.exp()).log()\n\n\n" for i in range(5))
    text = fixed_text(tmp_path, original)
    assert text.count("import torch\n") == 1 and "_torch" not in text


def test_a_fresh_alias_is_a_name_the_file_does_not_use(tmp_path: Path) -> None:
    original = "_torch = 5\n\n\ndef f(a, b, torch=1):\n    return (a.exp() + b.exp()).log(), _torch\n"
    text = fixed_text(tmp_path, original)
    assert_same(results(original)[0], results(text)[0])
    assert results(text)[1] == 5


# A module that must import without torch: it imports torch inside the function that needs it, and hands it on.
IMPORTS_TORCH_LAZILY = """\
def feather(length, ramp, torch, device):
    return torch.arange(0.0, ramp, 1.0, device=device) / ramp


def blend(length, ramp):
    import torch

    return feather(length, ramp, torch, "cpu")
"""


def test_a_fix_adds_no_module_level_import_of_a_module_the_file_imports_lazily(tmp_path: Path) -> None:
    """The int64 rewrite wrote `torch.int64` where `torch` is a parameter, through `import torch as _torch` added at
    module level: the module then needed torch to import, which it is written not to. The finding stays, unfixed, and
    `check` offers no fix for it (it offered one, which `fix` never made: unsloth's tiled upscaler)."""
    path = tmp_path / "upscale.py"
    path.write_text(IMPORTS_TORCH_LAZILY)
    found = check_source(str(path), IMPORTS_TORCH_LAZILY, Settings(select_rules(["RPL102"], []), Path(".")))
    assert [(d.code, d.fix is not None) for d in found] == [("RPL102", False)]
    report = fix([str(path)])
    assert path.read_text() == IMPORTS_TORCH_LAZILY
    assert [d.code for d in report.remaining] == ["RPL102"] and report.fixed == []


@pytest.mark.parametrize(
    "handed_over",
    [
        "def feather(length, ramp, *, torch, device):\n    return torch.arange(0.0, ramp, 1.0, device=device) / ramp\n",
        "feather = lambda length, ramp, torch, device: torch.arange(0.0, ramp, 1.0, device=device) / ramp\n",
        "def feather(length, ramp, torch, device):\n"
        "    def ramped():\n"
        "        return torch.arange(0.0, ramp, 1.0, device=device) / ramp\n"
        "\n"
        "    return ramped()\n",
    ],
    ids=["keyword-only", "lambda", "closure"],
)
@pytest.mark.parametrize("imported_at_module_level", [False, True])
def test_check_offers_a_fix_through_a_handed_over_module_only_where_fix_makes_it(
    tmp_path: Path, handed_over: str, imported_at_module_level: bool
) -> None:
    """A finding marked fixable is one that `fix` removes: through a module that a caller hands over as a parameter,
    only where the file imports the module at module level too (the fix writes a fresh alias of that import)."""
    caller = (
        "\n\ndef blend(length, ramp):\n    import torch\n\n    return feather(length, ramp, torch=torch, device=None)\n"
    )
    source = ("import torch\n\n\n" if imported_at_module_level else "") + handed_over + caller
    path = tmp_path / "feather.py"
    path.write_text(source)
    [found] = check_source(str(path), source, Settings(select_rules(["RPL102"], []), Path(".")))
    assert (found.fix is not None) == imported_at_module_level
    report = fix([str(path)])
    assert (len(report.fixed), len(report.remaining)) == ((1, 0) if imported_at_module_level else (0, 1))
    assert (path.read_text() != source) == imported_at_module_level


@pytest.mark.parametrize(
    "source",
    [
        # torch imported by the module's own code, in a `with` block.
        "import contextlib\n\nwith contextlib.suppress(ImportError):\n    import torch\n\n\n"
        "def feather(length, ramp, torch, device):\n"
        "    return torch.arange(0.0, ramp, 1.0, device=device) / ramp\n",
        # math, of the standard library, imported inside a function only and handed over.
        "import torch\n\n\n"
        "def feather(length, ramp, math, device):\n"
        "    return torch.arange(0.0, math.ceil(ramp), 1.0, device=device) / ramp\n\n\n"
        "def blend(length, ramp):\n    import math\n\n    return feather(length, ramp, math, None)\n",
    ],
    ids=["with-block", "standard-library"],
)
def test_check_and_fix_agree_on_which_modules_a_fix_may_import(tmp_path: Path, source: str) -> None:
    """Where a module is imported only lazily is one answer (`context.imported_only_lazily`), which the check and the
    fix both ask: a module that the module's own code imports in any block, or one of the standard library, may be
    imported at module level, so the check offers the fix and `fix` makes it."""
    path = tmp_path / "feather.py"
    path.write_text(source)
    [found] = check_source(str(path), source, Settings(select_rules(["RPL102"], []), Path(".")))
    assert found.fix is not None
    report = fix([str(path)])
    assert (len(report.fixed), len(report.remaining)) == (1, 0)


IMPORTS_MATH_LAZILY = """\
import torch


def rounded_up(n, factor):
    import math as _math

    return _math.ceil(n / factor) * factor


class Axes(torch.nn.Module):
    def __init__(self, size, base):
        super().__init__()
        self.inv_freq = 1.0 / (base ** (torch.arange(size, dtype=torch.float32) / size))
"""


def test_a_fix_imports_a_standard_library_module_that_the_file_imports_lazily(tmp_path: Path) -> None:
    """`math`, imported only inside a helper, imports wherever Python runs: the int64 rewrite's `math.ceil` gets a
    module-level `import math`, and the finding that check marks fixable is fixed."""
    path = tmp_path / "axes.py"
    path.write_text(IMPORTS_MATH_LAZILY)
    found = check_source(str(path), IMPORTS_MATH_LAZILY, Settings(select_rules(["RPL101"], []), Path(".")))
    assert [(d.code, d.fix is not None) for d in found] == [("RPL101", True)]
    report = fix([str(path)])
    assert [d.code for d in report.fixed] == ["RPL101"] and "RPL101" not in {d.code for d in report.remaining}
    fixed = path.read_text()
    assert "import math" in fixed.splitlines() and "torch.arange(math.ceil(size), dtype=torch.int64).float()" in fixed


def test_apply_fixes_never_returns_text_that_does_not_compile() -> None:
    """The last guard: whatever a rule's fix writes, `apply_fixes` compiles the text before giving it back."""
    original = "def f(a, b):\n    y = (a.exp() + b.exp()).log()\n    global torch\n    return y\n"
    found = fixable(check_source("model.py", original, ALL_RULES), unsafe=True)
    assert found
    compile(apply_fixes(original, found).text, "model.py", "exec")


@pytest.mark.parametrize("name", sorted(path.name for path in (REPO / "fixtures" / "hazards").glob("*.py")))
def test_every_fixable_finding_of_a_fixture_is_gone_after_one_fix(name: str) -> None:
    """A finding is marked `[*]` only where one `fix --unsafe-fixes` removes it."""
    source = (REPO / "fixtures" / "hazards" / name).read_text()
    found = fixable(check_source(name, source, ALL_RULES), unsafe=True)
    fixed = apply_fixes(source, found).text
    assert not fixable(check_source(name, fixed, ALL_RULES), unsafe=True)


def test_a_fix_without_scopes_does_not_keep_the_next_file_from_resolving_them() -> None:
    """A file that needs no scopes fixed first, in the same process, then one that does: both are fixed."""
    for original, shadowed in [
        ("import torch\n\n\ndef f(a, b):\n    return (a.exp() + b.exp()).log()\n", False),
        ("import torch\n\n\ndef f(a, b, torch=None):\n    return (a.exp() + b.exp()).log()\n", True),
    ]:
        found = fixable(check_source("model.py", original, ALL_RULES), unsafe=True)
        text = apply_fixes(original, found).text
        assert ("_torch.logaddexp" in text) is shadowed, text
        assert_same(results(original), results(text))


def test_scopes_are_worked_out_only_where_a_name_a_fix_wrote_is_bound_in_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file whose functions bind other imported names (`np` here, as many model files do) is fixed without working
    out scopes, which cost more than the fix; one whose function binds `torch`, which the fix writes, with them."""
    from rope_lint.fix import apply

    visits: list[bool] = []
    visited = apply._visited

    def spied(module: object, transformer: object) -> object:
        visits.append(isinstance(transformer, apply._ScopedFixTransformer))
        return visited(module, transformer)

    monkeypatch.setattr(apply, "_visited", spied)
    for original, expected in [
        ("import numpy as np\nimport torch\n\n\ndef f(a, b):\n    import numpy as np\n\n"
         "    return (a.exp() + b.exp()).log() * float(np.ones(1)[0])\n", [False]),
        # Applied without scopes first, then again with them once the fix wrote `torch`.
        ("import torch\n\n\ndef f(a, b, torch=None):\n    return (a.exp() + b.exp()).log()\n", [False, True]),
    ]:  # fmt: skip
        visits.clear()
        found = fixable(check_source("model.py", original, ALL_RULES), unsafe=True)
        text = apply_fixes(original, found).text
        assert "logaddexp" in text and visits == expected, (visits, text)
        assert_same(results(original), results(text))


def test_a_fix_visits_only_the_statements_that_hold_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rebuilding every node of a class costs more than its fixes: a statement without a finding is left unvisited,
    and one whose decorator holds a finding is visited although its own range starts below the decorator."""
    import libcst as cst

    from rope_lint.diagnostics import Position
    from rope_lint.fix import apply

    original = (
        "import torch\n\n\ndef register(**kwargs):\n    return lambda f: f\n\n\nclass Model:\n"
        "    def untouched(self, spare):\n        return spare * 2\n\n"
        "    def make(self, ratio):\n        @register(scale=torch.log(1 + ratio))\n        def inner(a):\n"
        "            return a\n\n        return inner\n\n"
        "    def other(self, x):\n        return torch.log(1 + x)\n"
    )
    [found] = fixable(check_source("model.py", original, ALL_RULES), unsafe=True)
    # The rule does not look into decorators; the same finding placed on the decorator's call stands in for one that
    # does.
    line = original.splitlines().index("        @register(scale=torch.log(1 + ratio))") + 1
    in_decorator = found._replace(start=Position(line, 24), end=Position(line, 44))
    left: list[str] = []
    on_leave = apply._Fixes.on_leave

    def spied(self: apply._Fixes, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:
        if isinstance(original_node, cst.Name):
            left.append(original_node.value)
        return on_leave(self, original_node, updated_node)

    monkeypatch.setattr(apply._Fixes, "on_leave", spied)
    text = apply_fixes(original, [in_decorator, found]).text
    assert "@register(scale=torch.log1p(ratio))" in text and "return torch.log1p(x)" in text, text
    assert "spare" not in left and "ratio" in left, left


def test_a_fix_makes_no_batched_visit_without_a_provider_to_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """LibCST resolves the positions, which no batched visit computes, and then makes a batched visit of the whole run
    of statements for none: `apply._Metadata` skips it. Scopes are computed in a batched visit, which still runs."""
    import libcst.metadata.wrapper

    batches: list[int] = []
    visit_batched = libcst.metadata.wrapper.visit_batched

    def spied(module: object, visitors: object, *rest: object) -> object:
        visitors = list(visitors)  # type: ignore[call-overload]
        batches.append(len(visitors))
        return visit_batched(module, visitors, *rest)

    monkeypatch.setattr(libcst.metadata.wrapper, "visit_batched", spied)
    for original, expected in [
        ("import torch\n\n\ndef f(a, b):\n    return (a.exp() + b.exp()).log()\n", []),
        # Applied without scopes first, then again with them: a batched visit for the names' contexts, then one for
        # the scopes.
        ("import torch\n\n\ndef f(a, b, torch=None):\n    return (a.exp() + b.exp()).log()\n", [1, 1]),
    ]:
        batches.clear()
        found = fixable(check_source("model.py", original, ALL_RULES), unsafe=True)
        text = apply_fixes(original, found).text
        assert "logaddexp" in text and batches == expected, (batches, text)
        assert_same(results(original), results(text))


# A class with findings in two of its statements, one of them over two lines: the lines LibCST is given for each.
BY_STATEMENT = (
    "import torch\n\n\nclass Model:\n    def untouched(self, spare):\n        return spare * 2\n\n"
    "    def merged(self, a, b):\n        y = (a.exp() + b.exp()).log()  # merge\n        return y\n\n"
    "    def shifted(self, x):\n        return torch.log(\n            1 + x\n        )\n"
)


def test_a_finding_in_a_statement_alone_on_its_lines_is_fixed_from_that_statement_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """LibCST works out the position of every node it parses, at twice the cost of the parse: each simple statement
    that holds findings is parsed alone, as the block of an `if` of its indentation, not the class around it."""
    import libcst as cst

    parsed: list[str] = []
    parse_module = cst.parse_module

    def spied(source: str, *rest: object) -> cst.Module:
        parsed.append(source)
        return parse_module(source, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(cst, "parse_module", spied)
    found = fixable(check_source("model.py", BY_STATEMENT, ALL_RULES), unsafe=True)
    assert len(found) == 2
    text = apply_fixes(BY_STATEMENT, found).text
    assert parsed == [
        "if 1:\n        return torch.log(\n            1 + x\n        )\n",
        "if 1:\n        y = (a.exp() + b.exp()).log()  # merge\n",
    ], parsed
    assert "y = torch.logaddexp(a, b)  # merge\n" in text and "return torch.log1p(x)\n" in text, text


@pytest.mark.parametrize(
    ("original", "by_statement"),
    [
        (BY_STATEMENT, True),
        (BY_STATEMENT.replace("\n", "\r\n"), True),
        (BY_STATEMENT.replace("    ", "\t"), True),
        ("import torch\n\ny = torch.log(1 + torch.ones(2))\n", True),
        ("import torch\n\n\ndef f(x):\n    y = 1\n    return torch.log(1 + x)", True),  # no newline at the end
        # A run of one line without an end, whose newline LibCST would choose: the run, whole.
        ("import torch\n\ny = torch.log(1 + torch.ones(2))", False),
        # Two statements on one line, a finding in a header, a finding that is a whole statement: the run, whole.
        ("import torch\n\n\ndef f(x):\n    y = 1; return torch.log(1 + x)\n", False),
        ("import torch\n\n\ndef f(x):\n    y = torch.log(1 + x); return y\n", False),
        ("import torch\n\n\ndef f(xs):\n    for x in torch.log(1 + xs):\n        return x\n", False),
        ("import torch\n\n\ndef f(x):\n    if x: return torch.log(1 + x)\n", False),
        ("import torch\n\n\ndef f(x):\n    torch.log(1 + x)\n", False),
        ("def merge(lse, block_lse):\n    lse.exp_()\n    lse.add_(block_lse.exp())\n    lse.log_()\n", False),
        # A fix that needs the scopes: the run, whole, with them.
        ("import torch\n\n\ndef f(a, b, torch=None):\n    return (a.exp() + b.exp()).log()\n", False),
    ],
    ids=[
        "class", "crlf", "tabs", "module level", "no final newline", "one line without an end",
        "second on its line", "first on its line", "header", "after a header", "whole statement",
        "run of statements", "scopes",
    ],
)  # fmt: skip
def test_a_fix_statement_by_statement_writes_what_the_fix_of_the_whole_run_writes(
    monkeypatch: pytest.MonkeyPatch, original: str, by_statement: bool
) -> None:
    """Where each finding lies in a simple statement alone on its lines, the fix parses those statements alone, and
    writes what it writes parsing the whole run of statements; elsewhere it parses the whole run, as before."""
    from rope_lint.fix import apply

    found = fixable(check_source("model.py", original, ALL_RULES), unsafe=True)
    assert found
    taken: list[bool] = []
    statement_by_statement = apply._fixed_statement_by_statement

    def spied(*args: object) -> object:
        try:
            result = statement_by_statement(*args)  # type: ignore[arg-type]
        except apply.ScopeNeeded:
            taken.append(False)
            raise
        taken.append(result is not None)
        return result

    monkeypatch.setattr(apply, "_fixed_statement_by_statement", spied)
    fixed = apply_fixes(original, found)
    monkeypatch.setattr(apply, "_fixed_statement_by_statement", lambda *args: None)
    whole = apply_fixes(original, found)
    assert taken == [by_statement]
    assert fixed.text == whole.text and fixed.text != original, fixed.text
    assert fixed.applied == whole.applied and fixed.regions == whole.regions


def test_what_a_file_binds_below_module_level_is_read_only_when_a_fix_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fix that writes a module name walks the file's tree once for what it binds; a file whose fixes are all class
    codemods never does. The text's identifiers are read only for a fresh alias."""
    from rope_lint.fix import names

    walked: list[int] = []
    spelled: list[int] = []
    walk, identifier = names.walk, names._IDENTIFIER

    class Spelled:
        def findall(self, text: str) -> list[str]:
            spelled.append(len(text))
            return identifier.findall(text)

    monkeypatch.setattr(names, "walk", lambda tree: walked.append(1) or walk(tree))
    monkeypatch.setattr(names, "_IDENTIFIER", Spelled())
    codemods_only = (REPO / "fixtures" / "hazards" / "rotary_meta_init.py").read_text()
    for original, walks, aliased in [
        ("import torch\n\n\ndef f(a, b):\n    return (a.exp() + b.exp()).log()\n", 1, False),
        ("torch = None\n\n\ndef f(a, b):\n    return (a.exp() + b.exp()).log()\n", 1, True),
        (codemods_only, 0, False),
    ]:
        walked.clear()
        spelled.clear()
        found = fixable(check_source("model.py", original, ALL_RULES), unsafe=True)
        text = apply_fixes(original, found).text
        assert text != original and len(walked) == walks and bool(spelled) is aliased, (walked, spelled, text)
        assert ("import torch as _torch" in text) is aliased, text
