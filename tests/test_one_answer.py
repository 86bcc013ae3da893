"""Each question has one answer: which classes are rotary (for the rules, the rope codemods and the probe), what the
RPL204 rule and its codemod count as a product, an upcast and autocast off, which casts are low-precision, and how
ruff is run."""

from __future__ import annotations

import ast
import importlib.util
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest
from helpers import REPO, rope_lint
from libcst.codemod import CodemodContext
from rope_lint.codemods.commands import RopeAutocastCommand, RopeTablesCommand
from rope_lint.codemods.rope_tables import rotary_class_names
from test_rope_autocast import PRODUCTS as PRODUCT_CALLS

from rope_lint import ruff
from rope_lint.rules.analysis import autocast, rotary
from rope_lint.rules.analysis.context import FileContext

# One class for each kind of evidence; the comments say who takes it for rotary.
CLASSES = """\
import torch
from torch import nn


class LlamaRotaryEmbedding(nn.Module):  # its name: all three
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", torch.ones(dim // 2), persistent=False)


class DynamicScaling(LlamaRotaryEmbedding):  # a rotary base: all three (the probe: the base's inv_freq)
    pass


class Sinusoids(nn.Module):  # it stores inv_freq: all three
    def __init__(self, dim):
        super().__init__()
        self.inv_freq = torch.ones(dim)


class LongSinusoids(nn.Module):  # a table named other than inv_freq: the rules and the codemods
    def __init__(self, dim):
        super().__init__()
        self.long_inv_freq = torch.ones(dim)


class CosCache(nn.Module):  # a cos cache and no inv_freq: the rules
    def __init__(self, n):
        super().__init__()
        self.register_buffer("cos_cached", torch.ones(n), persistent=False)


class RopeAttention(nn.Module):  # `Rope` without `Embedding`: the rules and the codemods
    pass


class Reader(nn.Module):  # it reads an inv_freq: the codemods
    def forward(self, x):
        return x * self.inv_freq


class Attention(nn.Module):  # none
    def forward(self, x):
        return x
"""
BY_RULES = {"LlamaRotaryEmbedding", "DynamicScaling", "Sinusoids", "LongSinusoids", "CosCache", "RopeAttention"}
BY_CODEMODS = {"LlamaRotaryEmbedding", "DynamicScaling", "Sinusoids", "LongSinusoids", "RopeAttention", "Reader"}
BY_PROBE = {"LlamaRotaryEmbedding", "DynamicScaling", "Sinusoids"}


def rotary_by_rules(source: str) -> set[str]:
    ctx = FileContext("classes.py", source, ast.parse(source), rotary.TABLE_NEEDLES + rotary.ROTARY_NAME_WORDS)
    return {cls.name for cls in rotary.rotary_classes(ctx)}


def rotary_by_codemods(source: str) -> set[str]:
    return rotary_class_names(cst.parse_module(source))


def rotary_by_probe(source: str, folder: Path) -> set[str]:
    pytest.importorskip("torch")
    from rope_lint.probe.discover import rotary_classes_of

    path = folder / "one_answer_classes.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("one_answer_classes", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {cls.__name__ for cls in rotary_classes_of(module)}


def test_each_reader_takes_the_classes_its_evidence_names(tmp_path: Path) -> None:
    assert rotary_by_rules(CLASSES) == BY_RULES
    assert rotary_by_codemods(CLASSES) == BY_CODEMODS
    assert rotary_by_probe(CLASSES, tmp_path) == BY_PROBE


def test_the_readers_ask_one_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules, the codemods and the probe gather facts and leave the answer to `rotary.is_rotary_class`."""
    asked: set[str] = set()

    def only_attention(name: str, tables: object, base_is_rotary: bool = False, evidence: object = None) -> bool:
        asked.add(name)
        return name == "Attention"

    monkeypatch.setattr(rotary, "is_rotary_class", only_attention)
    assert rotary_by_rules(CLASSES) == {"Attention"}
    assert rotary_by_codemods(CLASSES) == {"Attention"}
    assert rotary_by_probe(CLASSES, tmp_path) == {"Attention"}
    assert "Reader" in asked and "CosCache" in asked


@pytest.mark.parametrize(
    ("evidence", "name", "tables", "expected"),
    [
        (rotary.SOURCE_EVIDENCE, "GemmaRotaryEmbedding", (), True),
        (rotary.SOURCE_EVIDENCE, "RopeScaling", (), True),
        (rotary.SOURCE_EVIDENCE, "Attention", ("cos_cached",), True),
        (rotary.CODEMOD_EVIDENCE, "Attention", ("cos_cached",), False),
        (rotary.CODEMOD_EVIDENCE, "Attention", ("inv_freq_fp32",), True),
        (rotary.RUNTIME_EVIDENCE, "RopeScaling", (), False),
        (rotary.RUNTIME_EVIDENCE, "ROTARY_embedding2", (), True),
        (rotary.RUNTIME_EVIDENCE, "Attention", ("original_inv_freq",), False),
        (rotary.RUNTIME_EVIDENCE, "Attention", ("inv_freq",), True),
    ],
)
def test_the_evidence_says_how_the_readers_differ(
    evidence: rotary.RotaryEvidence, name: str, tables: tuple[str, ...], expected: bool
) -> None:
    assert rotary.is_rotary_class(name, tables, evidence=evidence) is expected
    assert rotary.is_rotary_class(name, tables, True, evidence) is True


# RPL204 and its codemod, with torch imported under another name.
ALIASED = """\
import torch as t
from torch import nn


class RotaryEmbedding(nn.Module):
    def forward(self, x, positions):
        freqs = {product}
        return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
"""
# The products autocast lowers on some device (analysis/autocast.LOWERING); `torch.outer` and `torch.ger` it never
# lowers (tests/test_rope_autocast.py, whose calls these are).
PRODUCTS = {function: call for function, call in PRODUCT_CALLS.items() if function in autocast.PRODUCT_FUNCTIONS}


def rpl204(path: Path) -> list[dict]:
    result = rope_lint("check", "--select", "RPL204", "--output-format", "json", "--no-cache", str(path))
    assert result.returncode in (0, 1), result.stderr[-2000:]
    return json.loads(result.stdout)


def test_every_product_function_is_described() -> None:
    assert set(PRODUCTS) == autocast.PRODUCT_FUNCTIONS


@pytest.mark.parametrize("function", sorted(PRODUCTS))
def test_an_aliased_product_is_flagged_by_the_rule_and_rewritten_by_the_codemod(tmp_path: Path, function: str) -> None:
    path = tmp_path / "rotary.py"
    source = ALIASED.format(product=PRODUCTS[function])
    path.write_text(source)
    assert len(rpl204(path)) == 1
    result = rope_lint("fix", "--select", "RPL204", str(path))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    fixed = path.read_text()
    # Neither operand is upcast: each is promoted to float32 or wider, with the file's name for torch.
    upcast = (
        PRODUCTS[function]
        .replace("positions,", "positions.to(t.promote_types(positions.dtype, t.float32)),")
        .replace("inv_freq)", "inv_freq.to(t.promote_types(self.inv_freq.dtype, t.float32)))")
    )
    expected = source.replace(
        f"        freqs = {PRODUCTS[function]}\n",
        f"        with t.autocast(device_type=x.device.type, enabled=False):\n            freqs = {upcast}\n",
    )
    # rope-lint formats what it writes; the codemod on its own, given the whole module (as `python -m libcst.tool
    # codemod` gives it), does not.
    assert ast.dump(ast.parse(fixed)) == ast.dump(ast.parse(expected))
    assert rpl204(path) == []
    command = RopeAutocastCommand(CodemodContext())
    assert command.transform_module(cst.parse_module(source)).code == expected


@pytest.mark.parametrize(
    "context",
    [
        't.autocast("cuda", enabled=False)',
        "maybe_autocast(device_type=x.device.type, enabled=False)",
        "self.autocast_context(enabled=False)",
    ],
)
def test_autocast_off_is_the_same_for_the_rule_and_the_codemod(tmp_path: Path, context: str) -> None:
    source = ALIASED.replace(
        "        freqs = {product}\n",
        f"        with {context}:\n            freqs = t.outer(positions, self.inv_freq)\n",
    )
    path = tmp_path / "rotary.py"
    path.write_text(source)
    assert rpl204(path) == []
    command = RopeAutocastCommand(CodemodContext())
    assert command.transform_module(cst.parse_module(source)).code == source


@pytest.mark.parametrize(
    "returned",
    ["freqs.cos(), freqs.sin()", "freqs * self.scale", "(freqs.to(x.dtype), freqs)", "x + freqs.to(x.dtype)"],
)
def test_a_forward_that_returns_an_uncast_value_is_left_by_the_rule_and_the_codemod(
    tmp_path: Path, returned: str
) -> None:
    """Its float32 product would reach the caller: the rule offers no fix, and the codemod leaves forward as it is."""
    source = ALIASED.format(product=PRODUCTS["torch.matmul"]).replace(
        "return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)", f"return {returned}"
    )
    path = tmp_path / "rotary.py"
    path.write_text(source)
    assert [finding["fix"] for finding in rpl204(path)] == [None]
    command = RopeAutocastCommand(CodemodContext())
    assert command.transform_module(cst.parse_module(source)).code == source


@pytest.mark.parametrize("method", sorted(rotary.LOW_PRECISION_CAST_METHODS))
def test_a_low_precision_cast_is_one_for_the_rule_and_the_codemod(tmp_path: Path, method: str) -> None:
    """RPL201 flags a table stored through each cast, and the rope codemod takes each off."""
    argument = "x" if method == "type_as" else ""
    source = textwrap.dedent(f"""\
        import torch
        from torch import nn


        class RotaryEmbedding(nn.Module):
            def __init__(self, x, n):
                super().__init__()
                emb = torch.ones(n, dtype=torch.int64).float()
                self.register_buffer("cos_cached", emb.cos().{method}({argument}), persistent=False)
        """)
    path = tmp_path / "rotary.py"
    path.write_text(source)
    result = rope_lint("check", "--select", "RPL201", "--output-format", "json", "--no-cache", str(path))
    assert [finding["code"] for finding in json.loads(result.stdout)] == ["RPL201"], result.stderr[-2000:]
    rewritten = RopeTablesCommand(CodemodContext()).transform_module(cst.parse_module(source)).code
    assert "self.cos_cached = emb.cos()\n" in rewritten


def test_the_codemod_runs_through_libcst_tool_outside_the_repository(tmp_path: Path) -> None:
    """`rope_lint.codemods` is importable wherever rope-lint is installed, and rewrites as `rope-lint fix` does."""
    through_libcst, through_rope_lint = tmp_path / "a" / "rotary.py", tmp_path / "b" / "rotary.py"
    for copy in (through_libcst, through_rope_lint):
        copy.parent.mkdir()
        shutil.copy(REPO / "fixtures" / "hazards" / "rotary_cache.py", copy)
    command = [sys.executable, "-m", "libcst.tool", "codemod", "--no-format", "-x"]
    command += ["rope_lint.codemods.commands.RopeTablesCommand", str(through_libcst)]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    fixed = rope_lint("fix", "--unsafe-fixes", "--select", "RPL2", str(through_rope_lint), cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout[-2000:] + fixed.stderr[-2000:]
    rewritten = through_libcst.read_text()
    assert rewritten == through_rope_lint.read_text()
    assert "self.inv_freq = inv_freq" in rewritten and 'device="cpu"' in rewritten


@pytest.fixture
def ruff_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ruff commands (`format`, `check`) that rope-lint runs, in order."""
    if ruff.command() is None:
        pytest.skip("ruff is not installed")
    runs: list[str] = []
    run_on_text = ruff.run_on_text

    def counted(command: list[str], arguments: list[str], path: object, text: str, **keywords: object) -> str | None:
        runs.append(arguments[0])
        return run_on_text(command, arguments, path, text, **keywords)  # type: ignore[arg-type]

    monkeypatch.setattr(ruff, "run_on_text", counted)
    return runs


def test_formatting_tidying_and_copies_run_ruff_through_one_adapter(tmp_path: Path, ruff_runs: list[str]) -> None:
    from rope_lint.fix.formatting import formatted_like_original
    from rope_lint.fix.tidy import imports_tidied
    from rope_lint.transformers import copies

    runs = ruff_runs
    path = tmp_path / "x.py"
    assert formatted_like_original(path, "x = 1\n", "x = ( 1 )\n", [(0, 1, 0, 1)]) == "x = 1\n"
    assert imports_tidied(path, "x = 1\n", "import os\nx = 1\n") == "x = 1\n"
    assert copies._formatted("    def f( self ):\n        pass\n", path) == "    def f(self):\n        pass\n"
    assert runs == ["format", "format", "check", "check", "check", "format"]


def test_a_region_whose_own_lines_ruff_would_reformat_is_left_as_written_without_asking_ruff_about_it(
    tmp_path: Path, ruff_runs: list[str]
) -> None:
    """ruff's diff of the whole original names the lines it would change: a region on one of them is not formatted,
    with no run of its own; a region on lines it leaves is asked about and formatted as before."""
    from rope_lint.fix.formatting import formatted_like_original

    path = tmp_path / "x.py"
    original = "x = [1,2]\ny = 1\n\n\ndef f(a):\n    return a\n"
    fixed = "x = [1,2,3]\ny = ( 2 )\n\n\ndef f(a):\n    return a\n"
    expected = "x = [1,2,3]\ny = 2\n\n\ndef f(a):\n    return a\n"
    assert formatted_like_original(path, original, fixed, [(0, 1, 0, 1), (1, 2, 1, 2)]) == expected
    assert ruff_runs == ["format", "format", "format"]  # the whole original's diff, then y's region twice


def test_a_region_the_fix_wrote_as_ruff_writes_it_costs_no_run_on_the_original(
    tmp_path: Path, ruff_runs: list[str]
) -> None:
    """Formatting a region that ruff leaves as the fix wrote it changes nothing, whatever ruff would do to the
    original there: the original is not asked about it."""
    from rope_lint.fix.formatting import formatted_like_original

    path = tmp_path / "x.py"
    original = "x = [1,2]\ny = 1\n\n\ndef f(a):\n    return a\n"
    fixed = "x = [1,2,3]\ny = 2\n\n\ndef f(a):\n    return a\n"
    assert formatted_like_original(path, original, fixed, [(0, 1, 0, 1), (1, 2, 1, 2)]) == fixed
    assert ruff_runs == ["format", "format"]  # the whole original's diff, then y's region in the fixed text


@pytest.mark.parametrize(
    ("original", "fixed", "original_runs"),
    [
        # x's line is all that ruff's diff of the whole original changes: y's statement, with the comment above it,
        # is left as it is, so ruff would leave y's region of the original as it is, and is not asked.
        (
            "x = [1,2]\n\n\ndef f(a):\n    # why\n    y = a\n    return y\n",
            "x = [1,2]\n\n\ndef f(a):\n    # why\n    y = ( a )\n    return y\n",
            0,
        ),
        # The diff removes the blank lines above y's statement, which formatting y's region could remove too: asked.
        (
            "def f(a):\n\n\n\n    y = a\n    return y\n",
            "def f(a):\n\n\n\n    y = ( a )\n    return y\n",
            1,
        ),
        # The diff inserts blank lines right below the `return` statement (above the class): asked.
        (
            "def f(a):\n    y = a\n    return a\nclass C:\n    pass\n",
            "def f(a):\n    y = a\n    return ( a )\nclass C:\n    pass\n",
            1,
        ),
    ],
)
def test_a_region_in_a_statement_that_ruffs_diff_leaves_is_formatted_without_asking_ruff_about_the_original(
    tmp_path: Path, ruff_runs: list[str], original: str, fixed: str, original_runs: int
) -> None:
    """Formatting a range formats its statements as formatting the whole file does: where ruff's diff of the whole
    original changes none of the lines that formatting a region could change (`lines_formatted_with`: its innermost
    statement, with the blank and comment lines around it), ruff would leave the region of the original as it is,
    and is not asked. The text is the one that asking gives."""
    from rope_lint.fix.formatting import formatted_like_original, lines_formatted_with
    from rope_lint.rules.analysis.context import physical_lines

    path = tmp_path / "x.py"
    region = next((a, a + 1, a, a + 1) for a, line in enumerate(fixed.splitlines()) if "( a )" in line)
    asking = formatted_like_original(path, original, fixed, [region])
    assert ruff_runs == ["format", "format", "format"]  # the whole original's diff, the region, the original's region
    around = lines_formatted_with(ast.parse(original), physical_lines(original), region[0], region[1])
    assert around is not None
    ruff_runs.clear()
    known = formatted_like_original(path, original, fixed, [region], formatted_with={region[:2]: around})
    assert known == asking
    assert ruff_runs == ["format"] * (2 + original_runs)


def test_the_lines_formatting_a_region_can_change_are_its_innermost_statements_with_its_comments() -> None:
    from rope_lint.fix.formatting import lines_formatted_with
    from rope_lint.rules.analysis.context import physical_lines

    text = (
        "import torch\n"  # 0
        "\n"  # 1
        "\n"  # 2
        "@decorated\n"  # 3
        "class C:\n"  # 4
        "    def f(self, x):\n"  # 5
        "        try:\n"  # 6
        "            y = x\n"  # 7
        "        except ValueError:\n"  # 8
        "\n"  # 9
        "            # a comment of its own\n"  # 10
        "            y = (\n"  # 11
        "                x\n"  # 12
        "            )\n"  # 13
        "\n"  # 14
        "        return y\n"  # 15
    )
    tree, lines = ast.parse(text), physical_lines(text)
    assert lines_formatted_with(tree, lines, 7, 8) == (7, 8)  # a statement of the `try` block
    assert lines_formatted_with(tree, lines, 12, 13) == (9, 15)  # of a handler's block, with its comment and blanks
    assert lines_formatted_with(tree, lines, 7, 12) == (6, 15)  # across blocks: the `try` statement
    assert lines_formatted_with(tree, lines, 4, 5) == (1, 16)  # the class line: the class, decorator and blanks
    assert lines_formatted_with(tree, lines, 0, 4) is None  # across top-level statements: none holds them


def test_tidying_asks_ruff_about_the_original_only_where_the_fix_has_an_import_code(
    tmp_path: Path, ruff_runs: list[str]
) -> None:
    """A fixed text without an I001 or F401 finding has introduced none: one `ruff check`, not two."""
    from rope_lint.fix.tidy import imports_tidied

    path = tmp_path / "x.py"
    assert imports_tidied(path, "import os\nos.sep\n", "import os\n\nos.sep\n") == "import os\n\nos.sep\n"
    assert ruff_runs == ["check"]
    ruff_runs.clear()
    assert imports_tidied(path, "import os\n", "import os\nimport sys\n") == "import os\nimport sys\n"
    assert ruff_runs == ["check", "check"], "F401 in both: none introduced, nothing tidied"
