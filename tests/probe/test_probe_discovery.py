"""Discovery by computation and the textbook reference.

A class is found by what it computes (the cos/sin or complex exponential of positions times frequencies held
under any name), and the JSON says whether its name or only its computation found it. The float64 build of each
class is compared with a textbook RoPE of the class's own hyperparameters, which shows a formula that is not the
textbook's. A package whose `modeling_*` modules hold no rotary code has every module walked.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rope_lint.rules.analysis.computation import RotaryComputation, builds_layers, same_file_resolver


def computes_tables(source: str) -> dict[str, bool]:
    """For each class of `source`: whether the shared recognizer says it computes tables (within the file)."""
    tree = ast.parse(textwrap.dedent(source))
    recognizer = RotaryComputation(same_file_resolver(tree))
    return {
        node.name: recognizer.computes_tables(node) and not builds_layers(node)
        for node in tree.body
        if isinstance(node, ast.ClassDef)
    }


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            """
            class Held(nn.Module):
                def __init__(self, dim, base=10000.0):
                    super().__init__()
                    self.register_buffer("bands", base ** -(torch.arange(0, dim, 2).float() / dim))

                def forward(self, x, positions):
                    angles = positions[..., None] * self.bands
                    return angles.cos(), angles.sin()
            """,
            True,
            id="buffer-times-positions-argument",
        ),
        pytest.param(
            """
            class Learned(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.theta = nn.Parameter(torch.randn(dim // 2))

                def forward(self, x):
                    steps = torch.arange(x.shape[1], device=x.device)
                    return torch.polar(torch.ones_like(self.theta), torch.outer(steps, self.theta))
            """,
            True,
            id="parameter-outer-enumeration-polar",
        ),
        pytest.param(
            """
            def frequencies(dim, theta):
                return 1.0 / theta ** (torch.arange(0, dim, 2) / dim)

            def table(dim, positions, theta=10000.0):
                angles = torch.einsum("i,j->ij", positions, frequencies(dim, theta))
                return torch.exp(1j * angles)

            class ThroughHelpers(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.dim = dim

                def forward(self, ids):
                    return table(self.dim, ids.float())
            """,
            True,
            id="helpers-einsum-complex-exponential",
        ),
        pytest.param(
            """
            class Sinusoids(nn.Module):
                def __init__(self, dim, length):
                    super().__init__()
                    position = torch.arange(length).unsqueeze(1)
                    div_term = torch.exp(torch.arange(0, dim, 2) * (-math.log(10000.0) / dim))
                    table = torch.zeros(length, dim)
                    table[:, 0::2] = torch.sin(position * div_term)
                    table[:, 1::2] = torch.cos(position * div_term)
                    self.register_buffer("pe", table)

                def forward(self, x):
                    return x + self.pe[: x.shape[1]]
            """,
            True,
            id="sinusoidal-table-built-at-construction",
        ),
        pytest.param(
            """
            class Scheduler(nn.Module):
                def forward(self, t, total):
                    return torch.cos((t / total + 0.008) / 1.008 * math.pi / 2) ** 2
            """,
            False,
            id="cosine-schedule-has-no-frequencies",
        ),
        pytest.param(
            """
            class Block(nn.Module):
                def __init__(self, dim, base=10000.0):
                    super().__init__()
                    self.proj = nn.Linear(dim, dim)
                    self.register_buffer("bands", base ** -(torch.arange(0, dim, 2).float() / dim))

                def forward(self, x, positions):
                    angles = positions[..., None] * self.bands
                    return self.proj(x) * angles.cos()
            """,
            False,
            id="a-layer-that-uses-tables-is-not-a-table-module",
        ),
    ],
)
def test_the_recognizer_tells_tables_by_their_computation(source: str, expected: bool) -> None:
    [(name, found)] = computes_tables(source).items()
    assert found is expected, name


@pytest.fixture(scope="module")
def report(probe_cli, probe_fixtures) -> dict[str, Any]:
    run = probe_cli(
        "fixtures/probe/computed_classes.py",
        "fixtures/probe/rotary_classes.py",
        "--trigger",
        "fp32,to-bf16",
        "--output-format",
        "json",
        pythonpath=[probe_fixtures],
    )
    assert run.returncode == 1, run.stderr  # some classes exceed under to-bf16
    return run.json()


def entry(report: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [item for item in report["classes"] if item["class"].endswith("." + name)]
    return found


def test_frequencies_under_other_names_are_found_by_computation_and_measured(report):
    for name in ("BandPositions", "PhaseTable", "WaveTable"):
        item = entry(report, name)
        assert item["found_by"] == "computation", name
        assert item["measured"] is True, name
        assert item["triggers"]["fp32"]["status"] == "clean", name
    # The nn.Parameter is rounded by `.to(bf16)` like a buffer.
    assert entry(report, "BandPositions")["triggers"]["to-bf16"]["status"] == "exceeds"
    names = [item["class"].rsplit(".", 1)[-1] for item in report["classes"]]
    assert "SnakeActivation" not in names  # a periodic activation: sin of a trained parameter times x


def test_classes_found_by_name_say_so_and_the_summary_counts_both_paths(report):
    assert entry(report, "LegacyRotaryEmbedding")["found_by"] == "name"
    assert entry(report, "WrongExponentRotaryEmbedding")["found_by"] == "name"
    assert "6 found by name, 3 only by computation" in report["summary"]


def test_a_formula_that_is_not_the_textbooks_is_reported(report):
    for name in ("WrongExponentRotaryEmbedding", "ShiftedBaseRotaryEmbedding"):
        verdict = entry(report, name)["textbook"]
        assert verdict.startswith("differs (max abs "), (name, verdict)
        assert float(verdict.removeprefix("differs (max abs ").rstrip(")")) > 1e-3


def test_llama_style_classes_agree_with_the_textbook(report):
    for name in ("LegacyRotaryEmbedding", "BufferedRotaryEmbedding", "SafeRotaryEmbedding", "BandPositions"):
        assert entry(report, name)["textbook"] == "agrees", name
    # One angle per pair (a complex table) is compared with the textbook's first half.
    assert entry(report, "PhaseTable")["textbook"] == "agrees"


def test_the_table_output_shows_the_textbook_comparison(probe_cli, probe_fixtures):
    run = probe_cli(
        "fixtures/probe/computed_classes.py:ShiftedBaseRotaryEmbedding",
        "--trigger",
        "fp32",
        pythonpath=[probe_fixtures],
    )
    assert "textbook: differs (max abs " in run.stdout, run.stdout + run.stderr


MODELING_UTILS = '''
import torch
from torch import nn


class ModelMixin(nn.Module):
    """Base classes and outputs only."""
'''

EMBEDDINGS = """
import torch
from torch import nn


def frequencies(dim, theta):
    return 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)


class AxisPositions(nn.Module):
    def __init__(self, dim, theta=10000.0):
        super().__init__()
        self.dim, self.theta = dim, theta

    def forward(self, x, position_ids):
        angles = torch.outer(position_ids[0].float(), frequencies(self.dim, self.theta))
        angles = torch.cat((angles, angles), dim=-1)
        return angles.cos(), angles.sin()
"""


def test_a_package_whose_modeling_modules_hold_no_rotary_code_is_walked_whole(probe_cli, tmp_path: Path):
    """The layout of a library that keeps its base classes, not its models, in `modeling_*.py`."""
    package = tmp_path / "layered" / "models"
    package.mkdir(parents=True)
    (tmp_path / "layered" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "modeling_utils.py").write_text(MODELING_UTILS)
    (package / "embeddings.py").write_text(EMBEDDINGS)
    run = probe_cli("layered.models", "--trigger", "fp32", "--output-format", "json", pythonpath=[tmp_path])
    assert run.returncode == 0, run.stderr
    [item] = run.json()["classes"]
    assert item["class"] == "layered.models.embeddings.AxisPositions"
    assert (item["found_by"], item["measured"], item["textbook"]) == ("computation", True, "agrees")


@pytest.mark.parametrize(
    ("source", "imported"),
    [
        (b"import torch\nx = torch.cos(t)\n", True),
        (b"from torch import nn\nx = COS\n", True),  # any case
        (b"import torch\nx = a.sin\n", True),
        (b"import torch\nx = 1j * t\n", True),
        (b"import torch\nself.register_buffer('inv_freq_cached', f)\n", True),  # a string anywhere
        (b"import torch\nclass NotRotaryEmbedding: ...\n", True),
        (b"import torch\n# cosine, using, since: no whole word\n", False),
        (b"import torch\nx = 11j + cos_a + _sin\n", False),
        (b"import numpy\nx = cos(t)\n", False),  # no torch
    ],
)
def test_a_package_walk_imports_the_modules_that_use_torch_and_mention_rotary_math(tmp_path, source, imported):
    from rope_lint.probe import discover

    (tmp_path / "module.py").write_bytes(source)
    assert discover._might_hold_rotary_class(tmp_path / "module.py") is imported


BLOCKS_SOURCE = '''import torch


@torch.no_grad()
def angles(n: int, inv_freq):
    return torch.outer(torch.arange(n).float(), inv_freq)


class Rotary(torch.nn.Module):
    """A docstring whose text
reaches the margin: the class's lines cannot be told from its indentation."""

    def forward(self, x):
        return angles(x.shape[1], self.inv_freq).cos()


def padded(
    n: int,
) -> int:
    return n


class Plain(torch.nn.Module):
    class Inner:
        pass


@dataclasses.dataclass
@functools.total_ordering
class Settings:
    dim: int = 8


@functools.wraps(
    print,
)
class Wrapped:
    pass


class Cached:
    @functools.cache
    def table(self):
        return 1
'''


def test_each_definition_is_read_from_its_own_lines_as_the_whole_file_has_it(tmp_path: Path) -> None:
    """The probe's discovery parses a top-level class or function alone (`_SourceFile`), at its own line numbers, and
    the whole file where its lines do not make one definition (a docstring at the margin, a nested class)."""
    from rope_lint.probe.discover import _Definitions, _SourceFile

    path = tmp_path / "model.py"
    path.write_text(BLOCKS_SOURCE)
    whole = _Definitions(ast.parse(BLOCKS_SOURCE))
    source = _SourceFile(str(path), BLOCKS_SOURCE)
    for first_line, function in whole.functions.items():
        assert ast.dump(source.function_def(first_line), include_attributes=True) == ast.dump(
            function, include_attributes=True
        )
    for name, node in whole.classes.items():
        assert ast.dump(source.class_def(name), include_attributes=True) == ast.dump(node, include_attributes=True)
    assert source.class_def("Missing") is None and source.function_def(1) is None
    # Only the class with a docstring at the margin and the nested one needed the whole file; the rest were blocks,
    # decorators included, of a line each or of several lines whose bracket closes at the margin.
    assert all(source._block(line) is not None for line in (4, 17, 23, 28, 34))
    assert source._with_decorators(29) == 28 and source._with_decorators(36) == 34  # 0-based index, 1-based line
    # A method is read from its class's lines.
    alone = _SourceFile(str(path), BLOCKS_SOURCE)
    assert alone._outermost_definition(42) == 41 and alone.function_def(42).name == "table" and alone._whole is None
    assert source._block(9) is None
