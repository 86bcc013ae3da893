"""Random programs built from the hazard shapes, in random scope contexts: the fixed text always compiles, leaves no
fixable finding, and, where the original runs, computes the same in fp32 (same dtype and shape; aranges equal).

Each hazard sits in a function of its own, so that a context that breaks the original (a `torch` made local by a
later assignment) leaves the other functions to compare.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rope_lint.engine import Settings, check_source
from rope_lint.fix.apply import apply_fixes, fixable
from rope_lint.rules import select_rules

ALL_RULES = Settings(select_rules(["ALL"], []), Path("."))

# The shapes the rules fix, over `a` and `b` (fp32 vectors) and `n` (an int). Those spelled with methods need no
# name for torch, so they also run where the context takes the name `torch` away.
FUNCTION_SPELLED = [
    "torch.log(torch.exp(a) + torch.exp(b))",
    "torch.log(torch.sum(torch.exp(a), dim=-1))",
    "torch.log(1 + torch.exp(a))",
    "torch.log(1 + a.abs())",
    "torch.exp(a) - 1",
    "torch.log(torch.softmax(a, dim=-1))",
    "torch.log(torch.sigmoid(a))",
    "torch.arange(n, dtype=torch.float32)",
    "torch.arange(0.0, n, 2.0)",
    "torch.arange(n * 1.5, dtype=torch.float32)",
    "1.0 / (10000 ** (torch.arange(0, 8, 2) / 8))",
    "torch.outer(torch.arange(n, dtype=torch.float32), 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8))).cos()",
]
METHOD_SPELLED = [
    "(a.exp() + b.exp()).log()",
    "a.exp().sum(-1).log()",
    "(1 + a.exp()).log()",
    "(1 + a.abs()).log()",
    "a.exp() - 1",
    "a.softmax(-1).log()",
    "a.sigmoid().log()",
]

# How a hazard's value is computed inside its function `h(a, b, n)`: each gives the lines that set `r`.
CONTEXTS = {
    "plain": ["r = {e}"],
    "nested": ["def inner():", "    return {e}", "r = inner()"],
    "nonlocal": ["k = 0", "def inner():", "    nonlocal k", "    k = 1", "    return {e}", "r = inner()"],
    "global": ["def inner():", "    global torch", "    return {e}", "r = inner()"],
    "nonlocal torch": ["torch = TORCH", "def inner():", "    nonlocal torch", "    return {e}", "r = inner()"],
    "lambda": ["r = (lambda: {e})()"],
    "lambda parameter": ["r = (lambda torch=TORCH: {e})()"],
    "comprehension": ["r = [{e} for _ in range(1)][0]"],
    "comprehension torch": ["r = [{e} for torch in [TORCH]][0]"],
    "class body": ["class Holder:", "    r = {e}", "r = Holder.r"],
    "class body torch": ["class Holder:", "    torch = None", "    r = {e}", "r = Holder.r"],
    "decorator": ["@keep", "def inner():", "    return {e}", "r = inner()"],
    "f-string": ["r = {e}", 'shape = f"{{({e}).shape}}"'],
    "local after": ["r = {e}", "torch = None"],
    "annotation": ["torch: int", "r = {e}"],
    "walrus": ["r = {e}", "if (torch := None) is None:", "    pass"],
}
PARAMETERS = ["a, b, n", "a, b, n, torch=None", "a, b, n, torch=TORCH"]
HEADS = [
    "import torch\n",
    '"""A model."""\n\nimport torch\n',
    "from __future__ import annotations; import os\nimport torch\n",
    '"""A model."""\nfrom __future__ import annotations\n',  # no torch: only the method spellings are findings
    "import torch\nimport torch as TORCH\n",
]
TAILS = ["", "\ntorch = TORCH\n", "\nimport torch\n"]


@st.composite
def programs(draw: st.DrawFn) -> tuple[str, int]:
    """A module of `count` functions `h0 .. h{count-1}(a, b, n)`, each computing one hazard in one context."""
    head = draw(st.sampled_from(HEADS))
    functions = []
    count = draw(st.integers(1, 4))
    for index in range(count):
        spelled = METHOD_SPELLED if "import torch" not in head else FUNCTION_SPELLED + METHOD_SPELLED
        expression = draw(st.sampled_from(spelled))
        context = CONTEXTS[draw(st.sampled_from(sorted(CONTEXTS)))]
        parameters = draw(st.sampled_from(PARAMETERS))
        body = [line.format(e=expression) for line in context]
        functions.append(f"def h{index}({parameters}):\n" + "".join(f"    {line}\n" for line in [*body, "return r"]))
    tail = draw(st.sampled_from(TAILS)) if "import torch" in head else ""
    source = head + "\n\ndef keep(function):\n    return function\n\n\n" + "\n\n".join(functions) + tail
    return source, count


def outcomes(text: str, count: int) -> list[Any]:
    """Each function's result on small fp32 inputs, or the exception it raised, in a fresh namespace."""
    namespace: dict[str, Any] = {"__name__": "generated", "TORCH": torch}
    exec(compile(text, "<generated>", "exec"), namespace)
    found: list[Any] = []
    for index in range(count):
        a = torch.tensor([0.25, -1.5, 2.0, 0.5])
        b = torch.tensor([1.0, 0.75, -0.5, 3.0])
        try:
            found.append(namespace[f"h{index}"](a, b, 6))
        except Exception as error:  # the context broke the original: nothing to compare there
            found.append(error)
    return found


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_fixed_programs_compile_leave_no_fix_and_compute_the_same(program: tuple[str, int]) -> None:
    source, count = program
    found = fixable(check_source("generated.py", source, ALL_RULES), unsafe=True)
    fixed = apply_fixes(source, found).text
    compile(fixed, "generated.py", "exec")
    left = fixable(check_source("generated.py", fixed, ALL_RULES), unsafe=True)
    assert not left, (fixed, left)
    for original, result in zip(outcomes(source, count), outcomes(fixed, count), strict=True):
        if isinstance(original, Exception):
            continue
        assert isinstance(result, torch.Tensor), (fixed, result)
        assert (result.dtype, result.shape) == (original.dtype, original.shape), fixed
        if original.dtype.is_floating_point and not torch.equal(original, torch.trunc(original)):
            assert torch.allclose(result, original, rtol=1e-6), (fixed, original, result)
        else:
            assert torch.equal(result, original), (fixed, original, result)
