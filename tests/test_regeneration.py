"""The regeneration-equivalence check of a transformers fix (issue 18, RPL905): every generated file that a fix changed
must be what regeneration from its fixed modular source and parent models gives, or the fix of that group is not
written. The fixture tree (fixtures/transformers-regeneration) holds one model per shape of code that the fix got
wrong before: a child keeping its own `__init__` while inheriting `forward` (beta), a child inheriting `__init__` while
writing its own `forward` (gamma), a generated file that imports more than its modular source (delta), a stale
generated file whose modular source already differs (epsilon), and a statement whose twin in another parent's class
is other code (mu)."""

from __future__ import annotations

import ast
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import REPO, rope_lint
from releases import AcceptanceRun

from rope_lint import api
from rope_lint.diagnostics import REGENERATION_DIFFERS
from rope_lint.transformers import generated, regeneration

FIXTURE = REPO / "fixtures" / "transformers-regeneration"
MODELS = ("alpha", "beta", "gamma", "delta")  # the models whose fix regenerates; epsilon is the stale one


def tree(tmp_path: Path, models: tuple[str, ...] = MODELS) -> Path:
    """A copy of the fixture package with `models` only."""
    package = tmp_path / "transformers"
    shutil.copytree(FIXTURE / "transformers", package)
    for folder in (package / "models").iterdir():
        if folder.is_dir() and folder.name not in models:
            shutil.rmtree(folder)
    return package


def texts(package: Path) -> dict[Path, str]:
    return {path: path.read_text() for path in sorted(package.rglob("*.py"))}


def member(path: Path, cls: str, name: str) -> ast.AST:
    """A method of a top-level class, as code (ast, so that line breaks and comments do not count)."""
    module = ast.parse(path.read_text())
    found = next(node for node in module.body if isinstance(node, ast.ClassDef) and node.name == cls)
    return next(node for node in found.body if isinstance(node, ast.FunctionDef) and node.name == name)


def same(first: ast.AST, second: ast.AST) -> bool:
    return ast.dump(first) == ast.dump(second)


def test_the_fix_of_each_shape_regenerates(tmp_path: Path) -> None:
    package = tree(tmp_path)
    before = texts(package)
    result = rope_lint("fix", "--unsafe-fixes", str(package))
    # Left without a fix: gamma's `phases`, an angle table that RPL202 tells by its computation (issue 20), under a name
    # the rope codemod does not rewrite.
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.endswith("Fixed 18 findings, 1 remaining.\n") and "RPL202 `phases` is" in result.stdout
    assert REGENERATION_DIFFERS not in result.stdout
    models = package / "models"
    after = texts(package)
    changed = {path.relative_to(package).as_posix() for path in after if after[path] != before[path]}
    assert changed == {
        "models/alpha/modeling_alpha.py",
        "models/beta/modular_beta.py",
        "models/beta/modeling_beta.py",
        "models/gamma/modular_gamma.py",
        "models/gamma/modeling_gamma.py",
        "models/delta/modular_delta.py",
        "models/delta/modeling_delta.py",
    }
    # beta keeps its own `__init__` and inherits alpha's `forward`, which reads the float32 copy of alpha's
    # persistent buffer: beta's `__init__` keeps its buffer too and defines that copy, in both of beta's files.
    alpha, beta = models / "alpha" / "modeling_alpha.py", models / "beta"
    for path in (beta / "modular_beta.py", beta / "modeling_beta.py"):
        init = ast.unparse(member(path, "BetaRotaryEmbedding", "__init__"))
        assert "self.inv_freq_fp32 = inv_freq" in init and "persistent=False" in init
    alpha_forward = ast.unparse(member(alpha, "AlphaRotaryEmbedding", "forward"))
    assert "_rope_table_on_device(self, 'inv_freq_fp32', " in alpha_forward
    assert ast.unparse(member(beta / "modeling_beta.py", "BetaRotaryEmbedding", "forward")) == alpha_forward
    # gamma inherits `__init__` (a table that becomes a plain attribute) and writes its own `forward`: the modular
    # source's `forward` reads the table's copy on the input's device as the generated file's does.
    gamma = models / "gamma"
    for method in ("forward", "_phases"):
        modular = member(gamma / "modular_gamma.py", "GammaTimeRotaryEmbedding", method)
        assert same(modular, member(gamma / "modeling_gamma.py", "GammaTimeRotaryEmbedding", method))
    assert "_rope_table_on_device(self, 'inv_freq', timestamps.device)" in ast.unparse(
        member(gamma / "modular_gamma.py", "GammaTimeRotaryEmbedding", "forward")
    )
    # delta's generated file imports `torch.nn.functional as F`, its modular source only `nn`: both get the modular
    # source's spelling.
    delta = models / "delta"
    for path in (delta / "modular_delta.py", delta / "modeling_delta.py"):
        assert "nn.functional.softplus(gate)" in path.read_text()
        assert "F.softplus" not in path.read_text()
    originals = {str(path.resolve()): before[path] for path in after if after[path] != before[path]}
    assert regeneration.violations(originals, {path: Path(path).read_text() for path in originals}) == []


def test_a_stale_generated_file_is_reported_and_left_as_it_was(tmp_path: Path) -> None:
    """epsilon's modular source spells `softplus` already while its generated file still computes `log(1 + exp(x))`:
    the fix of the generated file alone would be reverted by regeneration."""
    package = tree(tmp_path, ("epsilon",))
    before = texts(package)
    result = rope_lint("fix", "--unsafe-fixes", str(package))
    assert result.returncode == 2
    assert f"modeling_epsilon.py:16:1: {REGENERATION_DIFFERS} `EpsilonDecayGate.forward`" in result.stdout
    assert "the fix changed it, and not its origin" in result.stdout
    assert "breaks regeneration from the modular source (RPL905)" in result.stderr
    assert texts(package) == before


def test_a_generated_file_brings_the_generated_parents_its_code_passes_through(tmp_path: Path) -> None:
    """zeta's class comes from alpha's through delta's generated file: fixing zeta's file alone fixes delta's files
    too, so that regenerating delta, then zeta, gives the fixed file back."""
    package = tree(tmp_path, ("alpha", "delta", "zeta"))
    before = texts(package)
    result = rope_lint("fix", "--unsafe-fixes", str(package / "models" / "zeta" / "modeling_zeta.py"))
    assert result.returncode == 0, result.stdout + result.stderr
    after = texts(package)
    changed = {path.relative_to(package).as_posix() for path in after if after[path] != before[path]}
    assert changed == {
        "models/alpha/modeling_alpha.py",
        "models/delta/modeling_delta.py",
        "models/delta/modular_delta.py",
        "models/zeta/modeling_zeta.py",
    }
    zeta = package / "models" / "zeta" / "modeling_zeta.py"
    delta = package / "models" / "delta" / "modeling_delta.py"
    for method in ("__init__", "forward"):
        zeta_code = ast.unparse(member(zeta, "ZetaRotaryEmbedding", method))
        assert zeta_code == ast.unparse(member(delta, "DeltaRotaryEmbedding", method)).replace("Delta", "Zeta")


def without_parents(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rope codemod rewrites each class from its own code, as if no parent model's class were merged into it."""
    monkeypatch.setattr(generated, "inherited_classes", lambda path, text, name: [])


def without_origin_spelling(monkeypatch: pytest.MonkeyPatch) -> None:
    """A generated file's fix is spelled from its own imports (`F.softplus`)."""
    monkeypatch.setattr("rope_lint.fix.apply.spelled_as_origins", lambda path, text, findings, settings: findings)


@pytest.mark.parametrize(
    ("models", "broken", "reported"),
    [
        (
            ("alpha", "beta"),
            without_parents,
            [
                "`BetaRotaryEmbedding` is not what regeneration from its modular source gives after the fix (its "
                "members read self.inv_freq_fp32, which none of them defines)",
                "`BetaRotaryEmbedding.forward` is not what regeneration from its modular source gives after the fix "
                "(its code differs from what its origin gives after the fix)",
            ],
        ),
        (
            ("alpha", "gamma"),
            without_parents,
            [
                "`GammaTimeRotaryEmbedding.forward` is not what regeneration from its modular source gives after the "
                "fix (its code differs from what its origin gives after the fix)"
            ],
        ),
        (
            ("delta",),
            without_origin_spelling,
            [
                "`DeltaDecayGate.forward` is not what regeneration from its modular source gives after the fix (its "
                "code differs from what its origin gives after the fix)"
            ],
        ),
    ],
)
def test_a_fix_that_breaks_regeneration_is_reported_and_not_written(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    models: tuple[str, ...],
    broken: Callable[[pytest.MonkeyPatch], None],
    reported: list[str],
) -> None:
    """Each shape, with the part of the fix that answers it taken away: the check reports it, and the files of the
    group are left as they were (the fix of a small tree runs in this process, so the patch reaches it)."""
    package = tree(tmp_path, models)
    before = texts(package)
    broken(monkeypatch)
    report = api.fix([str(package)], unsafe=True)
    messages = [d.message for d in report.remaining if d.code == REGENERATION_DIFFERS]
    for expected in reported:
        assert any(message.startswith(expected) for message in messages), messages
    child = package / "models" / models[-1]
    assert {path: text for path, text in texts(package).items() if path.parent == child} == {
        path: text for path, text in before.items() if path.parent == child
    }


@pytest.mark.slow
def test_newest_release_regenerates_after_the_acceptance_run(new_acceptance: AcceptanceRun) -> None:
    """The acceptance command on 5.24.0 reports no RPL905, and the check finds nothing in what it wrote."""
    run = new_acceptance
    print(f"{run.version}: exit {run.returncode}, {run.stdout.strip().splitlines()[-2:]}")
    assert REGENERATION_DIFFERS not in run.stdout
    before = {str(path.resolve()): text for path, text in run.originals.items()}
    after = {path: Path(path).read_text() for path in before}
    assert regeneration.violations(before, after) == []


def test_a_statement_found_in_another_parents_class_keeps_its_own_fix(tmp_path: Path) -> None:
    """mu's rotary class comes from kappa (through MuModel), and eta, another parent of mu's modular source, has a
    class of the same kind with the same enumeration statement in other code (a head dim not proven integral). The
    generated file keeps the fix that its own code gets, which is kappa's, the one regeneration copies; it never takes
    eta's rounded-up end."""
    package = tree(tmp_path, ("eta", "kappa", "mu"))
    result = rope_lint("fix", "--unsafe-fixes", str(package))
    assert result.returncode == 0, result.stdout + result.stderr
    models = package / "models"
    fixed = member(models / "mu" / "modeling_mu.py", "MuRotaryEmbedding", "__init__")
    assert same(fixed, member(models / "kappa" / "modeling_kappa.py", "KappaRotaryEmbedding", "__init__"))
    assert "ceil" not in ast.unparse(fixed)
    assert "ceil" in ast.unparse(member(models / "eta" / "modeling_eta.py", "EtaRotaryEmbedding", "__init__"))


def first_lines(path: Path, count: int) -> list[str]:
    """The lines after a generated file's six-line banner."""
    return path.read_text().splitlines()[6 : 6 + count]


def test_an_import_a_generated_file_gains_sits_where_the_converter_puts_it(tmp_path: Path) -> None:
    """omicron's image processing copies xi's `masks_to_boxes`, whose fix needs `import math`. The converter takes
    that import from omicron's modular source, where it sits right under the header comment, so regeneration writes
    no blank line above the import block: the fixed file has none either."""
    package = tree(tmp_path, ("xi", "omicron"))
    result = rope_lint("fix", "--unsafe-fixes", str(package))
    assert result.returncode == 0, result.stdout + result.stderr
    fixed = package / "models" / "omicron" / "image_processing_omicron.py"
    assert first_lines(fixed, 3) == ["# Copyright (the fixture's own).", "import math", "import pathlib"]


def test_an_import_added_to_a_modular_source_moves_the_gap_of_the_files_it_generates(tmp_path: Path) -> None:
    """pi's modular source gets `import math` (for its own code) below its docstring and a blank line; the converter
    now takes pi's image processing's `import math` from there, blank line and all. That file, which the fix does
    not otherwise touch, gets the blank line; `--diff` shows it and writes nothing."""
    package = tree(tmp_path, ("xi", "pi"))
    processing = package / "models" / "pi" / "image_processing_pi.py"
    before = processing.read_text()
    shown = rope_lint("fix", "--unsafe-fixes", "--diff", str(package))
    assert f"+++ b/{processing}" in shown.stdout
    assert processing.read_text() == before
    result = rope_lint("fix", "--unsafe-fixes", str(package))
    assert result.returncode == 0, result.stdout + result.stderr
    assert first_lines(processing, 3) == ["# Copyright (the fixture's own).", "", "import math"]
    assert processing.read_text().replace("own).\n\nimport", "own).\nimport") == before


def test_a_parent_class_code_read_from_its_outline_is_its_source_segment() -> None:
    """What a rotary rewrite copies of a parent model's class (`generated.inherited_classes`) comes from the parent
    file's outline, whose definitions end at their cut bodies' `pass`; the code is still where the class's code ends
    on its last line, as in the whole file."""
    text = (
        "import torch\r\n\r\n\r\n@decorator(key=':')\r\nclass Parent(torch.nn.Module):  # base\r\n"
        "    def forward(self, x):\r\n        return (x,\r\n                x)  # the end: a comment\r\n\r\n"
        "class One: x = 1; y = 2  # one line\r\n\r\n"
        "def helper(a, b=')'):\r\n    '''Doc\r\n\r\n#  text'''  \r\n# after\r\n"
    )
    outline = generated.outlined_once(text)
    assert outline is not None and outline is not ast.parse(text)
    whole = [node for node in ast.parse(text).body if isinstance(node, generated.DEFINITIONS)]
    cut = [node for node in outline.body if isinstance(node, generated.DEFINITIONS)]
    assert isinstance(cut[0].body[0], ast.Pass) and cut[0].body[0].end_col_offset != whole[0].end_col_offset
    assert [generated.definition_code(text, node) for node in cut] == [
        ast.get_source_segment(text, node) for node in whole
    ]


def test_a_fix_parses_each_changed_file_whole_once_and_the_files_around_it_in_outline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Besides the check's own parse (`candidates`), the fix parses each file it changes whole once, a tree shared by
    the origin lookups, a modular source's carried rewrites and the fix itself, and no other file: the files around
    a generated one (its modular source, a parent model's file) are read in outline, with the lines of a class whose
    code is copied."""
    package = tree(tmp_path, ("alpha", "beta"))
    before = texts(package)
    whole: list[str] = []
    real_parse = ast.parse

    def recording(source: str, *args: object, **kwargs: object) -> ast.AST:
        if not sys._getframe(1).f_code.co_filename.endswith(os.path.join("prefilter", "candidates.py")):
            whole.append(source)
        return real_parse(source, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ast, "parse", recording)
    generated.release_caches()
    api.fix([str(package)], unsafe=True)
    changed = [path for path in before if path.read_text() != before[path]]
    assert {path.name for path in changed} == {"modeling_alpha.py", "modular_beta.py", "modeling_beta.py"}
    assert {path.name: whole.count(before[path]) for path in changed} == {path.name: 1 for path in changed}
    assert [path.name for path in before if path not in changed and before[path] in whole] == []


def test_a_modular_source_is_parsed_for_carried_rewrites_only_where_its_text_names_a_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A modular source's classes are searched for reads of a parent's tables (`fix.origins.carried_rewrites`) only
    where its text names one: most modular sources name none (272 of transformers 5.24.0's 339), and a whole parse
    of one costs milliseconds."""
    from rope_lint.fix.origins import carried_rewrites

    parsed: list[str] = []
    real_parsed_text = generated.parsed_text

    def recording(text: str) -> ast.Module | None:
        parsed.append(text)
        return real_parsed_text(text)

    monkeypatch.setattr(generated, "parsed_text", recording)
    path = tmp_path / "transformers" / "models" / "toy" / "modular_toy.py"
    plain = "class ToyMLP(LlamaMLP):\n    def forward(self, x):\n        return self.up(x)\n"
    reading = (
        "class ToyRotaryEmbedding(LlamaRotaryEmbedding):\n    def forward(self, x):\n        return self.inv_freq\n"
    )
    assert carried_rewrites(path, plain, []) == [] and parsed == []
    assert carried_rewrites(path, reading, []) == [] and parsed == [reading]  # no parent class in view here


def test_a_fix_keeps_no_whole_tree_of_a_file_that_is_neither_generated_nor_a_modular_source(tmp_path: Path) -> None:
    """The trees kept for the next steps of a whole tree's fix (16, 30 MB in transformers 4.37.2's) are those that
    locating origins and carried rewrites parse; an ordinary file's, parsed for its own fix, is not kept."""
    from rope_lint.engine import Settings
    from rope_lint.fix.apply import fix_file
    from rope_lint.rules import select_rules

    path = tmp_path / "modeling_plain.py"
    path.write_text("import torch\n\n\ndef positions(n):\n    return torch.arange(n, dtype=torch.float16)\n")
    generated.release_caches()
    outcome = fix_file(path, Settings(select_rules(["ALL"], []), tmp_path), unsafe=True, diff_only=True)
    assert outcome.fixed and "dtype=torch.int64" in outcome.diff
    assert generated.parsed_text.cache_info().currsize == 0


def test_the_import_layout_parses_a_text_once_for_its_reads_and_its_heads_go_with_the_fixs_caches() -> None:
    """A modular source is read for each file it generates, a generated file for its gap and the converter's: each
    text's head is parsed once, and dropped with the trees that a fix's map keeps (`origins.release_caches`)."""
    from rope_lint.fix.origins import release_caches
    from rope_lint.transformers import import_layout

    release_caches()
    generated_text = "# header\n\nimport os\n\n\ndef f():\n    return os\n"
    modular_text = "# header\nimport os\n\n\ndef f():\n    return os\n"
    parses: list[str] = []
    real_parsed_once = generated.parsed_once

    def recording(text: str) -> ast.Module | None:
        parses.append(text)
        return real_parsed_once(text)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(generated, "parsed_once", recording)
        for _ in range(2):
            assert import_layout.import_gap(generated_text) == 1
            assert import_layout.converter_gap(generated_text, modular_text) == 0
    assert len(parses) == 2 and import_layout._head.cache_info().currsize == 2
    release_caches()
    assert import_layout._head.cache_info().currsize == 0


def test_an_origins_imports_are_read_only_where_a_twins_fix_is_spelled_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each origin of a generated file's fixes is checked for their twins; what its imported names mean, which takes
    a whole parse of it, only where a twin's fix is spelled otherwise: delta's (its generated file imports more), not
    gamma's, whose twins are spelled alike."""
    from rope_lint.fix import origins

    package = tree(tmp_path)
    names = {path.read_text(): path.relative_to(package).as_posix() for path in package.rglob("*.py")}
    checked: list[str] = []
    meant: list[str] = []
    check_source, meanings = origins.check_source, origins._meanings
    monkeypatch.setattr(origins, "check_source", lambda *args: checked.append(names[args[1]]) or check_source(*args))
    monkeypatch.setattr(origins, "_meanings", lambda text, tree: meant.append(names[text]) or meanings(text, tree))
    report = api.fix([str(package)], unsafe=True)
    assert not report.failures, report.failures
    assert sorted(checked) == ["models/delta/modular_delta.py", "models/gamma/modular_gamma.py"], checked
    assert sorted(meant) == ["models/delta/modeling_delta.py", "models/delta/modular_delta.py"], meant
