"""One-shot fix of a whole transformers tree (issue 6): what the fix leaves must pass the repository's own checks
(`utils/check_copies.py`, the modular converter, compile) and the probe, on pinned releases in the test cache."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import install_transformers, rope_lint, unpacked_wheel
from test_rope_codemod import TRANSFORMERS_RUFF, exceeding, probe

from rope_lint.engine import Settings, check_file
from rope_lint.fix.apply import fixable
from rope_lint.rules import select_rules
from rope_lint.transformers.copies import CopyChecker, CopyKey, divergent_copies
from rope_lint.transformers.generated import modular_source, origin

OLD, NEW = "4.37.2", "5.24.0"
SELECT = "RPL1,RPL2"
TRIGGERS = "zero-init-bf16,to-bf16"


@dataclass(frozen=True)
class FixedTree:
    original: Path  # the release's `transformers` package
    fixed: Path  # a copy of it, after `rope-lint fix --unsafe-fixes`
    output: str
    changed: tuple[str, ...]  # paths relative to the package
    divergent_before: dict[CopyKey, object]


def fix_tree(package: Path, destination: Path, *relative: str) -> FixedTree:
    """Copy `package` with transformers' ruff settings beside it, and fix `relative` paths of it (default: all)."""
    fixed = destination / "transformers"
    shutil.copytree(package, fixed, ignore=shutil.ignore_patterns("__pycache__"))
    (destination / "pyproject.toml").write_text(TRANSFORMERS_RUFF)
    before = divergent_copies(fixed)
    paths = [str(fixed / path) for path in relative] or [str(fixed)]
    result = rope_lint("fix", "--unsafe-fixes", "--select", SELECT, "--statistics", *paths)
    assert result.returncode in (0, 1, 2), result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    changed = tuple(
        path.relative_to(fixed).as_posix()
        for path in sorted(fixed.rglob("*.py"))
        if path.read_bytes() != (package / path.relative_to(fixed)).read_bytes()
    )
    return FixedTree(package, fixed, result.stdout, changed, before)


@pytest.fixture(scope="module")
def old_site() -> Path:
    return install_transformers(OLD)


@pytest.fixture(scope="module")
def old(tmp_path_factory: pytest.TempPathFactory) -> FixedTree:
    return fix_tree(unpacked_wheel("transformers", OLD) / "transformers", tmp_path_factory.mktemp("old"))


@pytest.fixture(scope="module")
def new_site() -> Path:
    return install_transformers(NEW)


@pytest.fixture(scope="module")
def new(new_site: Path, tmp_path_factory: pytest.TempPathFactory) -> FixedTree:
    return fix_tree(new_site / "transformers", tmp_path_factory.mktemp("new"))


def reported_copies(tree: FixedTree) -> set[tuple[str, int]]:
    """The (file, line) of each RPL904 finding the fix printed."""
    pattern = re.compile(rf"^{re.escape(str(tree.fixed))}/(\S+?):(\d+):\d+: RPL904 ", re.MULTILINE)
    return {(match.group(1), int(match.group(2))) for match in pattern.finditer(tree.output)}


def newly_divergent(tree: FixedTree) -> dict[CopyKey, tuple[str, int]]:
    """Copies that differ from their source after the fix and did not before, with where they are now."""
    after = divergent_copies(tree.fixed)
    return {
        key: (found.copy.path.relative_to(tree.fixed.resolve()).as_posix(), found.copy.line)
        for key, found in after.items()
        if key not in tree.divergent_before
    }


def assert_compiles_and_a_second_fix_changes_nothing(tree: FixedTree, *relative: str) -> None:
    assert len(tree.changed) >= 10
    for path in tree.changed:
        compile((tree.fixed / path).read_text(), path, "exec")
    snapshot = {path: (tree.fixed / path).read_bytes() for path in tree.changed}
    paths = [str(tree.fixed / path) for path in relative] or [str(tree.fixed)]
    again = rope_lint("fix", "--unsafe-fixes", "--select", SELECT, *paths)
    assert "Fixed 0 findings" in again.stdout, again.stdout[-2000:]
    assert {path: (tree.fixed / path).read_bytes() for path in tree.changed} == snapshot


def test_old_release_fixed_files_compile_and_a_second_fix_changes_nothing(old: FixedTree) -> None:
    print(f"{OLD}: {len(old.changed)} files changed; {old.output.splitlines()[-1]}")
    assert_compiles_and_a_second_fix_changes_nothing(old)


def test_old_release_statistics_count_the_files_changed(old: FixedTree) -> None:
    assert f"{len(old.changed)} files changed, " in old.output
    assert re.search(r"^\s*\d+  RPL202  ", old.output, re.MULTILINE)


def test_old_release_every_copy_the_fix_made_diverge_is_reported(old: FixedTree) -> None:
    assert set(newly_divergent(old).values()) == reported_copies(old)


def test_old_release_no_copy_group_diverges_that_did_not_before(old: FixedTree) -> None:
    assert newly_divergent(old) == {}


def test_old_release_every_rotary_class_is_clean_after_the_fix(old: FixedTree, old_site: Path) -> None:
    report = probe("transformers", pythonpath=[old.fixed.parent, old_site], triggers=TRIGGERS)
    built = [c for c in report["classes"] if c.get("triggers")]
    print(f"{OLD} fixed tree: {len(built)} rotary classes built; {report['summary']}")
    assert len(built) >= 20
    assert exceeding(report) == {}


def test_newest_release_fixed_files_compile_and_a_second_fix_changes_nothing(new: FixedTree) -> None:
    print(f"{NEW}: {len(new.changed)} files changed; {new.output.splitlines()[-1]}")
    assert_compiles_and_a_second_fix_changes_nothing(new)


def test_newest_release_no_copy_group_diverges_that_did_not_before(new: FixedTree) -> None:
    assert newly_divergent(new) == {}
    assert reported_copies(new) == set()


def test_newest_release_generated_files_change_with_their_origin(new: FixedTree) -> None:
    """Every generated file that changed has its modular source changed too, or inherits each fixed statement from a
    parent model whose file changed: a regeneration gives the edited file."""
    settings = Settings(select_rules(SELECT.split(","), []), new.original)
    generated = 0
    for relative in new.changed:
        path = new.original / relative
        text = path.read_text()
        modular = modular_source(path, text)
        if modular is None:
            continue
        generated += 1
        if Path(modular).relative_to(new.original).as_posix() in new.changed:
            continue
        for finding in fixable(check_file(path, settings), unsafe=True):
            where = origin(path, text, finding.start.line)
            assert where is not None and where.inherited_from is not None, f"{relative}:{finding.start.line}"
            assert Path(where.path).relative_to(new.original).as_posix() in new.changed, f"{relative}: {where}"
    assert generated >= 5


def test_newest_release_findings_in_generated_files_name_their_origin(new_site: Path) -> None:
    mistral = new_site / "transformers" / "models" / "mistral" / "modeling_mistral.py"
    result = rope_lint("check", "--select", "RPL202", str(mistral))
    assert (
        "(generated from modular_mistral.py, which inherits LlamaRotaryEmbedding from ../llama/modeling_llama.py:"
        in (result.stdout)
    )


def test_newest_release_every_rotary_class_is_clean_after_the_fix(new: FixedTree, new_site: Path) -> None:
    report = probe("transformers", pythonpath=[new.fixed.parent, new_site], triggers=TRIGGERS)
    built = [c for c in report["classes"] if c.get("triggers")]
    print(f"{NEW} fixed tree: {len(built)} rotary classes built; {report['summary']}")
    assert len(built) >= 200
    assert exceeding(report) == {}


# A copy and its source, small enough to read: what `fix` and the copy check do with them.
SOURCE = """import torch
from torch import nn


class LlamaScaler(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, seq_len):
        t = torch.arange(seq_len, dtype=torch.float32)
        return x * t
"""
COPY = """import torch
from torch import nn


# Copied from transformers.models.llama.modeling_llama.LlamaScaler with Llama->Foo
class FooScaler(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, seq_len):
        t = torch.arange(seq_len, dtype=torch.float32)
        return x * t
"""


def small_tree(root: Path, copy: str = COPY) -> Path:
    package = root / "transformers"
    for folder, name, text in (("llama", "modeling_llama.py", SOURCE), ("foo", "modeling_foo.py", copy)):
        (package / "models" / folder).mkdir(parents=True)
        (package / "models" / folder / name).write_text(text)
    (package / "__init__.py").write_text("")
    return package


def test_a_fix_of_a_copy_without_its_source_is_reported(tmp_path: Path) -> None:
    package = small_tree(tmp_path)
    result = rope_lint("fix", str(package / "models" / "foo"))
    assert result.returncode == 2
    assert "modeling_foo.py:5:1: RPL904 this copy of `transformers.models.llama.modeling_llama.LlamaScaler`" in (
        result.stdout
    )


def test_a_fix_of_the_whole_group_keeps_it_and_counts_it(tmp_path: Path) -> None:
    package = small_tree(tmp_path)
    result = rope_lint("fix", "--statistics", str(package))
    assert result.returncode == 0, result.stdout
    assert "2  RPL101  [*] float-arange\n2 files changed, 1 copy group checked." in result.stdout


def only_copy(package: Path) -> object:
    """Why the one copy of the small tree differs from its source, or None."""
    checker = CopyChecker(package)
    (copy,) = checker.copies()
    return checker.divergence(copy)


def test_ignore_copy_blocks_and_all_casing_renames(tmp_path: Path) -> None:
    package = small_tree(
        tmp_path, COPY.replace("        self.dim = dim\n", "        # Ignore copy\n        self.dim = 2\n")
    )
    assert only_copy(package) is None
    source, copy = package / "models" / "llama" / "modeling_llama.py", package / "models" / "foo" / "modeling_foo.py"
    source.write_text(SOURCE.replace("self.dim = dim", "self.llama = dim"))
    copy.write_text(COPY.replace("Llama->Foo", "Llama->Foo all-casing").replace("self.dim = dim", "self.foo = dim"))
    assert only_copy(package) is None
    copy.write_text(copy.read_text().replace("self.foo", "self.bar"))
    assert only_copy(package) is not None


# A rotary class that keeps `inv_freq` as a persistent buffer; a copy whose `__init__` registers it with
# persistent=False under `# Ignore copy`; and a copy of that copy. Our own code, in the shape of a rotary class that
# one speech model copies from another.
PERSISTENT_ROTARY = """import torch
from torch import nn


class AlphaRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, x, seq_len):
        positions = torch.arange(seq_len).type_as(self.inv_freq)
        freqs = torch.einsum("i,j->ij", positions, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
"""
NON_PERSISTENT_COPY = PERSISTENT_ROTARY.replace(
    "class Alpha",
    "# Copied from transformers.models.alpha.modeling_alpha.AlphaRotaryEmbedding with Alpha->Beta\nclass Beta",
).replace(
    '        self.register_buffer("inv_freq", inv_freq)\n',
    '        # Ignore copy\n        self.register_buffer("inv_freq", inv_freq, persistent=False)\n',
)
COPY_OF_THE_COPY = NON_PERSISTENT_COPY.replace(
    "alpha.modeling_alpha.AlphaRotaryEmbedding with Alpha->Beta",
    "beta.modeling_beta.BetaRotaryEmbedding with Beta->Gamma",
).replace("class Beta", "class Gamma")


def test_a_copy_that_ignores_its_sources_persistent_buffer_reads_what_the_source_reads(tmp_path: Path) -> None:
    """The source keeps its buffer and reads a float32 copy of it; its copies, whose own `__init__` would make a plain
    attribute, go the same way, so the forwards stay equal (no RPL904) and every class is fp32-clean."""
    package = tmp_path / "transformers"
    files = {"alpha": PERSISTENT_ROTARY, "beta": NON_PERSISTENT_COPY, "gamma": COPY_OF_THE_COPY}
    for model, text in files.items():
        (package / "models" / model).mkdir(parents=True)
        (package / "models" / model / f"modeling_{model}.py").write_text(text)
    for folder in (package, package / "models", *(package / "models" / model for model in files)):
        (folder / "__init__.py").write_text("")
    (tmp_path / "pyproject.toml").write_text(TRANSFORMERS_RUFF)
    checker = CopyChecker(package)
    assert len(checker.copies()) == 2 and not any(checker.divergence(copy) for copy in checker.copies())
    before = exceeding(probe("transformers", pythonpath=[tmp_path], triggers=TRIGGERS))
    assert sorted(before) == [f"transformers.models.{m}.modeling_{m}.{m.title()}RotaryEmbedding" for m in files]

    result = rope_lint("fix", "--unsafe-fixes", "--select", SELECT, "--statistics", str(package))
    assert result.returncode == 0, result.stdout
    assert "3 files changed, 2 copy groups checked." in result.stdout
    checker = CopyChecker(package)
    assert [checker.divergence(copy) for copy in checker.copies()] == [None, None]
    beta = (package / "models" / "beta" / "modeling_beta.py").read_text()
    # The copy's own registration stays as it was, with the source's float32 copy after it.
    assert "persistent=False)\n        self.inv_freq_fp32 = inv_freq\n" in beta and "self.inv_freq_fp32.to(" in beta
    after = probe("transformers", pythonpath=[tmp_path], triggers=TRIGGERS)
    assert len([c for c in after["classes"] if c.get("triggers")]) == 3
    assert exceeding(after) == {}
    again = rope_lint("fix", "--unsafe-fixes", "--select", SELECT, str(package))
    assert "Fixed 0 findings" in again.stdout


def test_a_fix_introduces_no_import_finding_of_the_projects_ruff_check(tmp_path: Path) -> None:
    """The import a fix adds goes where isort puts it, and names the fix stopped using go; a finding the file had
    before (here the unused `math`) stays for its owner."""
    (tmp_path / "pyproject.toml").write_text('[tool.ruff.lint]\nextend-select = ["I"]\n')
    (tmp_path / "a.py").write_text("from torch import exp, log\n\n\ndef f(x):\n    return log(1 + exp(x))\n")
    (tmp_path / "b.py").write_text(
        "import math\n\nfrom torch import exp, log\n\n\ndef f(x):\n    return log(1 + exp(x))\n"
    )
    rope_lint("fix", "--unsafe-fixes", str(tmp_path / "a.py"), str(tmp_path / "b.py"))
    assert (
        tmp_path / "a.py"
    ).read_text() == "import torch\n\n\ndef f(x):\n    return torch.nn.functional.softplus(x)\n"
    assert (tmp_path / "b.py").read_text().startswith("import math\n\nimport torch\nfrom torch import exp, log\n")


BANNER = """#                🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨
#           This file was automatically generated from src/transformers/models/mistral/modular_mistral.py.
#               Do NOT edit this file manually as any edits will be overwritten by the generation of
#             the file from the modular. If any change should be done, please apply the change to the
#                          modular_mistral.py file directly. One of our CI enforces this.
"""
MODULAR = "from ..llama.modeling_llama import LlamaScaler\n\n\nclass MistralScaler(LlamaScaler):\n    pass\n"


def test_a_fix_of_a_generated_file_fixes_the_parent_it_inherits_from(tmp_path: Path) -> None:
    package = small_tree(tmp_path)
    mistral = package / "models" / "mistral"
    mistral.mkdir()
    (mistral / "modular_mistral.py").write_text(MODULAR)
    (mistral / "modeling_mistral.py").write_text(BANNER + SOURCE.replace("Llama", "Mistral"))
    check = rope_lint("check", str(mistral / "modeling_mistral.py"))
    assert "(generated from modular_mistral.py, which inherits LlamaScaler from ../llama/modeling_llama.py:11)" in (
        check.stdout
    )
    result = rope_lint("fix", "--statistics", str(mistral / "modeling_mistral.py"))
    assert "2 files changed, 1 copy group checked." in result.stdout
    fixed_llama = (package / "models" / "llama" / "modeling_llama.py").read_text()
    assert (mistral / "modeling_mistral.py").read_text() == BANNER + fixed_llama.replace("Llama", "Mistral")
    assert (mistral / "modular_mistral.py").read_text() == MODULAR
    assert "RPL904" in result.stdout  # the Foo copy of LlamaScaler, which this run did not fix
