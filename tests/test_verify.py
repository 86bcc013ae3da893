"""`rope-lint fix --verify` (issue 15): the original and the fixed code of each changed file are imported side by side
from the same package, compared in fp32 and run under the probe's conditions, and a file whose rewrite fails is not
written.

Each run goes through the command line in a fresh process, on a copy of fixtures/verify (a package of our own whose
rotary module imports its neighbours relatively), so that no test's imports leak into another's.
"""

from __future__ import annotations

import ast
import re
import shutil
import textwrap
from pathlib import Path

import pytest
from helpers import REPO, ProbeRun, broken_fix, rope_lint, run_python, verify_changes_prelude
from releases import NEW, OLD, AcceptanceRun

from rope_lint.output.fix_report import FAILED, NOT_CALLED, VERIFIED
from rope_lint.verify.classes import CONDITIONS

FIXTURE = REPO / "fixtures" / "verify"
ROTARY = Path("verifypkg", "layers", "rotary.py")
ROTARY_CLASSES = ("CachedRotaryEmbedding", "ScaledRotaryEmbedding")


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A copy of the fixture package's folder (the folder that holds `verifypkg`)."""
    copy = tmp_path / "tree"
    shutil.copytree(FIXTURE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def lines_about(stdout: str, name: str) -> list[str]:
    return [line for line in stdout.splitlines() if f": {name} " in line]


def test_every_rotary_class_and_changed_function_is_verified_and_the_fix_written(package: Path) -> None:
    rotary = package / ROTARY
    before = rotary.read_text()
    run = rope_lint("fix", "--unsafe-fixes", "--verify", str(package))
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stderr == ""
    for name in ROTARY_CLASSES:
        (line,) = lines_about(run.stdout, name)
        assert line.startswith(f"{rotary}:")
        assert f"{name} verified (fp32 max rel diff " in line
        # The fix left the class within the probe's threshold under every condition (fp32 is the comparison).
        assert f"{len(CONDITIONS)} conditions clean)" in line
    for name in ("inverse_frequencies", "attention_log_normaliser"):
        (line,) = lines_about(run.stdout, name)
        assert f"{name} verified (fp32 max rel diff " in line
    # A function whose only parameter is a config cannot be called blind; the report says so and why.
    (line,) = lines_about(run.stdout, "frequencies_for")
    assert "frequencies_for could not call: parameter 'config' needs an object" in line
    assert "Verified 4, 0 failed, 1 could not be checked." in run.stdout
    assert run.stdout.endswith(" remaining.\n") and ", 0 remaining." in run.stdout
    after = rotary.read_text()
    assert after != before
    compile(after, str(rotary), "exec")


# The fix that the test stands in for the real one: the scaled class's positions multiplied, not divided.
BROKEN_FIX = broken_fix("positions / self.scaling_factor", "positions * self.scaling_factor")


def test_the_broken_fix_breaks_the_file_without_verify(package: Path) -> None:
    """The tests below rest on `broken_fix` replacing the function that a fix's drafting calls: without `--verify`,
    its change is written."""
    rotary = package / ROTARY
    assert "positions / self.scaling_factor" in rotary.read_text()
    run = run_python(BROKEN_FIX, "fix", "--unsafe-fixes", str(package))
    assert run.stderr == "" and run.returncode == 1  # the broken fix leaves every finding in place
    assert "positions * self.scaling_factor" in rotary.read_text()


def test_a_rewrite_that_changes_a_result_is_not_written_and_says_why(package: Path) -> None:
    rotary = package / ROTARY
    before = rotary.read_bytes()
    run = run_python(BROKEN_FIX, "fix", "--unsafe-fixes", "--verify", str(package))
    assert run.returncode == 1, run.stdout + run.stderr
    assert rotary.read_bytes() == before
    reason = "fp32 forward outputs differ by 2 relative (at most 1e-06 allowed)"
    left = f"rope-lint: {rotary}: verification failed, file left as it was"
    assert run.stderr == f"{left}: ScaledRotaryEmbedding: {reason}\n"
    (line,) = lines_about(run.stdout, "ScaledRotaryEmbedding")
    assert line == f"{rotary}:34: ScaledRotaryEmbedding not verified: {reason}"
    # The file's findings stay, and none counts as fixed.
    assert run.stdout.splitlines()[-1].startswith("Fixed 0 findings, ")
    assert "RPL201" in run.stdout


BLOCKED_TORCH = """
import sys
sys.modules["torch"] = None  # `import torch` now raises ImportError, as where it is not installed
from rope_lint.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_torch_verify_is_a_one_line_usage_error_and_writes_nothing(package: Path) -> None:
    rotary = package / ROTARY
    before = rotary.read_bytes()
    run = run_python(BLOCKED_TORCH, "fix", "--unsafe-fixes", "--verify", str(package))
    assert run.returncode == 2
    assert run.stdout == ""
    (line,) = run.stderr.splitlines()
    assert line.startswith("rope-lint: error: fix --verify imports the code it fixes and needs torch (")
    assert line.endswith("pip install 'rope-lint[probe]'")
    assert rotary.read_bytes() == before
    # Plain fix does not need torch.
    plain = run_python(BLOCKED_TORCH, "fix", "--unsafe-fixes", "--diff", str(package))
    assert plain.returncode == 1 and "+++ b/" in plain.stdout, plain.stderr  # a diff shown exits 1, as ruff's


def test_diff_with_verify_verifies_and_writes_nothing(package: Path) -> None:
    rotary = package / ROTARY
    before = rotary.read_bytes()
    run = rope_lint("fix", "--unsafe-fixes", "--diff", "--verify", str(package))
    assert run.returncode == 0, run.stdout + run.stderr
    assert rotary.read_bytes() == before
    assert f"+++ b/{rotary}" in run.stdout
    assert all(len(lines_about(run.stdout, f"{name} verified")) == 1 for name in ROTARY_CLASSES)
    assert run.stdout.splitlines()[-1].startswith("Would fix ")


def verify_texts(code: str) -> ProbeRun:
    """Runs `code` with `verify(original, fixed)` defined: `verify_changes` on the fixture's rotary module, original
    text against a fixed text, printing each line. Run in a fresh process, as the command line runs it."""
    prelude = verify_changes_prelude(FIXTURE / ROTARY)
    return run_python(prelude + textwrap.dedent(code))


def outcomes(run: ProbeRun) -> dict[str, tuple[str, str]]:
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [line.split("|") for line in run.stdout.splitlines()]
    return {name: (status, detail) for status, name, detail in rows}


def test_relative_imports_resolve_to_the_package_itself() -> None:
    run = run_python(
        textwrap.dedent(f"""
            from pathlib import Path
            from rope_lint.verify.loading import FIXED_SUFFIX, load_sibling
            path = Path({str(FIXTURE / ROTARY)!r})
            module = load_sibling(path, path.read_text(), FIXED_SUFFIX)
            print(module.__name__, module.__package__, module.apply_rotary.__module__, module.MAX_POSITIONS)
        """)
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [
        "verifypkg.layers.rotary__rope_lint_fixed",
        "verifypkg.layers",
        "verifypkg.layers.rotation",
        "2048",
    ]


def test_a_fixed_class_that_fails_under_a_condition_where_the_original_builds_fails() -> None:
    # Fine in fp32; under a bf16 default dtype it raises, which the original does not.
    fixed = """
        fixed = ORIGINAL.replace(
            "        self.dim = dim\\n",
            "        self.dim = dim\\n        assert torch.get_default_dtype() == torch.float32, 'not float32'\\n",
            1,
        )
        verify(fixed)
    """
    found = outcomes(verify_texts(fixed))
    status, detail = found["CachedRotaryEmbedding"]
    assert status == FAILED
    assert detail.startswith("under default-dtype-bf16 the fixed class fails: AssertionError: not float32")


def test_a_fixed_class_that_keeps_a_parameter_off_the_default_device_fails() -> None:
    # The same values everywhere, but made on the CPU where the original made it on the default device: a model built
    # under `torch.set_default_device(...)` would hold it on the CPU.
    code = """
        line = "        self.dim = dim\\n"
        gained = ORIGINAL.replace(line, line + "        self.gain = nn.Parameter(torch.ones(1))\\n", 1)
        pinned = gained.replace("torch.ones(1))", 'torch.ones(1, device="cpu"))', 1)
        for original, fixed in ((gained, gained), (gained, pinned)):
            for verification in verify_changes([(PATH, original, fixed)]):
                print(verification.status, verification.name, verification.detail, sep="|")
    """
    run = verify_texts(code)
    assert run.returncode == 0, run.stderr
    rows = [line.split("|") for line in run.stdout.splitlines()]
    assert [row[:2] for row in rows[:2]] == [[VERIFIED, name] for name in ROTARY_CLASSES]
    off_the_device = "built under a default device, it keeps gain (cpu) off it, as the original does not"
    assert rows[2:] == [[FAILED, name, off_the_device] for name in ROTARY_CLASSES]


def test_a_fixed_class_that_returns_other_dtypes_under_a_condition_fails() -> None:
    """The rewrite that the codemod made of a class that rotates queries and keys with tables it caches at run time
    (transformers 4.37.2's ESM): float32 tables and no cast back, so that under `to-bf16` it returns float32 where the
    original returns bfloat16, and a bf16 model's next matmul fails. The fp32 comparison alone cannot see it."""
    path = REPO / "fixtures" / "hazards" / "rotary_runtime_cache.py"
    original = path.read_text()
    kept = 'self.register_buffer("inv_freq", inv_freq)  # expect: RPL202\n'
    float32 = original.replace(kept, kept + "        self.inv_freq_fp32 = inv_freq\n")
    float32 = float32.replace(".type_as(self.inv_freq)", ".float()").replace(
        ", self.inv_freq)", ", self.inv_freq_fp32)"
    )
    assert float32.count("inv_freq_fp32") == 2
    code = f"""
        for verification in verify_changes([(PATH, ORIGINAL, {float32!r})]):
            print(verification.status, verification.name, verification.detail, sep="|")
    """
    run = run_python(verify_changes_prelude(path) + textwrap.dedent(code))
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [line.split("|") for line in run.stdout.splitlines()]
    returned = "under to-bf16 the fixed class returns float32, float32; the original bfloat16, bfloat16"
    assert rows == [[FAILED, "PairRotaryEmbedding", returned]]


# A sinusoidal embedding of box coordinates (transformers 4.37.2's Bros has its shape): its forward returns what it
# computes from the table, with no cast, to a layer of the model.
BOX_EMBEDDING = """\
import torch
from torch import nn


class SinusoidalBoxEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, positions):
        angles = positions[..., None] * self.inv_freq
        return torch.cat([angles.sin(), angles.cos()], dim=-1)
"""


def _through_a_bf16_layer(path: Path) -> str:
    """What a bf16 `nn.Linear` after the class, in a model cast to bf16, makes of its embedding: a dtype, or the
    error."""
    code = f"""
        import runpy, torch
        namespace = runpy.run_path({str(path)!r})
        embedding, layer = namespace["SinusoidalBoxEmbedding"](16), torch.nn.Linear(16, 4)
        torch.nn.ModuleList([embedding, layer]).to(torch.bfloat16)
        try:
            print(layer(embedding(torch.rand(3, dtype=torch.bfloat16) * 100)).dtype)
        except RuntimeError as error:
            print(error)
    """
    run = run_python(textwrap.dedent(code))
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout.strip()


def test_a_fixed_class_that_returns_tables_in_other_dtypes_is_verified_with_a_note(tmp_path: Path) -> None:
    """Attention code that takes float32 tables runs on, so such a class is verified; a layer that takes them as its
    input fails, which the class alone cannot tell, so the line says under which condition its dtypes change."""
    path = tmp_path / "boxes.py"
    path.write_text(BOX_EMBEDDING)
    assert _through_a_bf16_layer(path) == "torch.bfloat16"
    run = rope_lint("fix", "--unsafe-fixes", "--verify", str(path))
    assert run.returncode == 0, run.stdout + run.stderr
    (line,) = lines_about(run.stdout, "SinusoidalBoxEmbedding")
    assert " SinusoidalBoxEmbedding verified (fp32 max rel diff 0, " in line
    assert "under to-bf16 it returns float32, the original bfloat16: a caller that hands what it returns" in line
    assert "must have the same dtype" in _through_a_bf16_layer(path)


def test_a_state_dict_change_a_dtype_change_and_an_import_error_fail() -> None:
    code = """
        verify(ORIGINAL.replace('"inv_freq", inv_freq, persistent=False', '"inv_freq", inv_freq'))
        verify(ORIGINAL.replace("torch.exp(scores)", "torch.exp(scores.double())"))
        verify(ORIGINAL.replace("from .rotation import apply_rotary", "from .rotation import no_such_name"))
    """
    run = verify_texts(code)
    assert run.returncode == 0, run.stderr
    rows = [line.split("|") for line in run.stdout.splitlines()]
    assert [FAILED, "CachedRotaryEmbedding", "state_dict keys differ (lost none, gained ['inv_freq'])"] in rows
    assert [FAILED, "attention_log_normaliser", "fp32 result: dtype torch.float32 became torch.float64"] in rows
    failed_import = [row for row in rows if row[1] == "rotary.py"]
    assert failed_import[0][0] == FAILED
    import_error = "the fixed module does not import where the original does: ImportError: cannot import name"
    assert failed_import[0][2].startswith(import_error)


def test_the_unchanged_text_verifies_everything_and_calls_no_unchanged_function() -> None:
    found = outcomes(verify_texts("verify(ORIGINAL)"))
    # Rotary classes are always built; functions only when the fix changed them.
    assert set(found) == set(ROTARY_CLASSES)
    assert all(status == VERIFIED and "fp32 max rel diff 0" in detail for status, detail in found.values())


def test_functions_are_called_on_arguments_from_their_signatures() -> None:
    code = """
        import torch
        from rope_lint.verify.functions import check_function

        def takes_a_module(module, x):
            return x
        def takes_tensors(scores: torch.Tensor, mask, dim: int = -1):
            return (scores + mask).softmax(dim)
        def takes_a_length(seq_len):
            return torch.arange(seq_len)
        for function in (takes_a_module, takes_tensors, takes_a_length):
            print(*check_function(function, function), sep="|")
    """
    run = run_python(textwrap.dedent(code))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        f"{NOT_CALLED}|parameter 'module' needs an object that cannot be derived from its signature",
        f"{VERIFIED}|fp32 max rel diff 0, called with scores=float32[2, 8, 16], mask=float32[2, 8, 16]",
        f"{VERIFIED}|fp32 max rel diff 0, called with seq_len=16",
    ]


def test_a_function_whose_fixed_result_differs_only_by_rounding_is_verified_and_a_changed_one_fails() -> None:
    """DESIGN section 8: a rewrite may remove rounding and nothing else. Beyond the fp32 tolerance, both versions run
    in float64 tell rounding (they agree there) from a change of what is computed (they do not); a rewrite that adds
    rounding (a cancellation) agrees in float64 but is farther from it in fp32 than the original."""
    code = """
        import torch
        from rope_lint.verify.functions import check_function

        def bias(x: torch.Tensor):
            return torch.sin(100 * torch.log(1 + x.abs()))
        def bias_log1p(x: torch.Tensor):
            return torch.sin(100 * torch.log1p(x.abs()))
        def bias_shifted(x: torch.Tensor):
            return torch.sin(100 * torch.log1p(x.abs() + 1e-6))
        def offsets(x: torch.Tensor):
            return (x - 0.5) * 3
        def offsets_cancelled(x: torch.Tensor):
            return ((x + 1e4) - (1e4 + 0.5)) * 3
        for original, fixed in ((bias, bias_log1p), (bias, bias_shifted), (offsets, offsets_cancelled)):
            print(*check_function(original, fixed), sep="|")
    """
    run = run_python(textwrap.dedent(code))
    assert run.returncode == 0, run.stderr
    rounded, shifted, cancelled = [line.split("|") for line in run.stdout.splitlines()]
    assert cancelled[0] == FAILED, cancelled
    assert rounded[0] == VERIFIED, rounded
    found = re.fullmatch(
        r"fp32 max rel diff ([\d.e+-]+) \(rounding: ([\d.e+-]+) in float64\), called with .+", rounded[1]
    )
    assert found and float(found[1]) > 1e-6 and float(found[2]) < 1e-12, rounded[1]
    assert shifted[0] == FAILED
    assert re.fullmatch(r"fp32 results differ by [\d.e+-]+ relative \(at most 1e-06 allowed\)", shifted[1])


def test_a_rotary_class_whose_fixed_tables_differ_by_removed_rounding_is_verified_and_added_rounding_fails() -> None:
    """The same judgement for a rotary class, whose fp32 tables at 4,096 positions the probe builds both ways: positions
    rounded through `* 0.1 * 10` and exact ones differ by 2.4e-4 in fp32 and agree in float64; the rewrite that removes
    that rounding is verified, the one that adds it fails, and one that changes the positions fails."""
    code = """
        import torch
        from torch import nn
        from rope_lint.verify.classes import check_class

        class RotaryEmbedding(nn.Module):
            def __init__(self, dim, max_position_embeddings=2048, base=10000):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
                self.register_buffer("inv_freq", inv_freq, persistent=False)

            def positions(self, x, seq_len):
                return torch.arange(seq_len, device=x.device, dtype=x.dtype)

            def forward(self, x, seq_len):
                emb = torch.outer(self.positions(x, seq_len), self.inv_freq).repeat(1, 2)
                return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

        class RoundedPositions(RotaryEmbedding):
            def positions(self, x, seq_len):
                return super().positions(x, seq_len) * 0.1 * 10

        class StretchedPositions(RotaryEmbedding):
            def positions(self, x, seq_len):
                return super().positions(x, seq_len) * 1.0001

        for original, fixed in (
            (RoundedPositions, RotaryEmbedding),
            (RotaryEmbedding, RoundedPositions),
            (RotaryEmbedding, StretchedPositions),
        ):
            check = check_class(original, fixed)
            print(check.status, check.detail, sep="|")
    """
    run = run_python(textwrap.dedent(code))
    assert run.returncode == 0, run.stderr
    removed, added, stretched = [line.split("|") for line in run.stdout.splitlines()]
    assert removed[0] == VERIFIED, removed
    found = re.match(r"fp32 max rel diff ([\d.e+-]+) \(rounding: ([\d.e+-]+) in float64\), ", removed[1])
    assert found and float(found[1]) > 1e-5 and float(found[2]) < 1e-10, removed
    assert added[0] == FAILED and added[1].startswith("fp32 forward outputs differ by "), added
    assert stretched[0] == FAILED and stretched[1].startswith("fp32 forward outputs differ by "), stretched


# The changed rotary classes the acceptance run verifies on each release (4.37.2's Mega relative bias, rotary by its
# source but not at run time, among them: it is verified as a module class).
VERIFIED_ROTARY_CLASSES = {OLD: 30, NEW: 279}


@pytest.mark.slow
@pytest.mark.parametrize("version", [OLD, NEW])
def test_every_changed_rotary_class_of_a_transformers_release_is_verified(
    request: pytest.FixtureRequest, version: str
) -> None:
    """`fix --unsafe-fixes --verify` on a copy of the release, importable with its dependencies from the cache (never
    the project's environment), run once per session (tests/releases.py): each rotary class the fix changed is
    reported verified, and no class or function fails (the model level is judged by tests/test_verify_models.py)."""
    from rope_lint.verify.models import changed_rotary_classes

    run: AcceptanceRun = request.getfixturevalue("old_acceptance" if version == OLD else "new_acceptance")
    assert "verification failed, file left as it was" not in run.stderr, run.stderr[-5000:]
    class_level = [line for line in run.stdout.splitlines() if " (tiny model) " not in line]
    assert not [line for line in class_level if " not verified: " in line], run.stdout[-5000:]
    # With --verify the exit code is the proof's: 0 when nothing failed, whatever findings are left without a fix;
    # 1 when a model failed (its file restored); 2 for a run error or a diverged copy (RPL9xx).
    assert not re.search(r": RPL9\d\d ", run.stdout) and run.returncode in (0, 1), run.stderr[-3000:]
    reported, whole_file = {}, {}
    for line in class_level:
        match = re.match(r"(.+?):(\d+): ([\w.]+) (verified|could not build|could not call)\b(.*)", line)
        if match and match[3] == Path(match[1]).name:  # the file itself: its original code does not import
            whole_file[match[1]] = match[4], match[5]
        elif match:
            # A method's line stands for a class that the probe does not take for rotary (the source's evidence
            # and the run time's differ, as for `*RotaryRelativePositionalBias`): its changed methods are checked.
            name, _, method = match[3].partition(".")
            status = f"not rotary at run time; {method} {match[4]}" if method else match[4]
            reported.setdefault((match[1], name), (status, match[5]))
    changed = {
        (str(path), name)
        for path, text in run.originals.items()
        for name in changed_rotary_classes(text, path.read_text(encoding="utf-8"))
    }
    assert changed, "the fix changed no rotary class"
    not_verified = {key: reported.get(key, whole_file.get(key[0], ("not reported", ""))) for key in changed}
    not_verified = {key: status + detail for key, (status, detail) in not_verified.items() if status != "verified"}
    verified = len(changed) - len(not_verified)
    print(f"transformers {version}: {verified} of {len(changed)} changed rotary classes verified")
    for (path, name), what in sorted(not_verified.items()):
        print(f"  {Path(path).relative_to(run.fixed)}: {name} {what}")
    # A changed rotary class that is not verified is one the probe cannot build, or one it does not take for rotary
    # (its changed methods are reported instead): never one that failed, nor one left unreported.
    allowed = ("could not build", "not rotary", "could not call: not a rotary class")
    assert all(what.startswith(allowed) for what in not_verified.values()), not_verified
    assert verified == VERIFIED_ROTARY_CLASSES[version]
    if version == NEW:
        # docs/measurements.md: the box-relation embedding's log1p rewrite moves its fp32 output beyond 1e-6 by the
        # rounding it removes, and both versions agree in float64.
        [relation] = [line for line in class_level if "/modeling_pp_doclayout_v2.py:" in line and " verified (" in line]
        found = re.search(r"fp32 max rel diff ([\d.e+-]+) \(rounding: ([\d.e+-]+) in float64\)", relation)
        assert found and 1.5e-6 < float(found[1]) < 2.5e-6 and float(found[2]) < 1e-13, relation


def test_with_verify_the_exit_code_is_the_proofs_not_the_findings_left(tmp_path: Path) -> None:
    """A finding without a fix makes a plain `fix` exit 1; with `--verify` the exit code says whether every rewrite
    was proven, and the finding is still printed."""
    unfixable = tmp_path / "offsets.py"
    unfixable.write_text(
        "import torch\n\n\ndef offsets(start, n):\n    return torch.arange(start, n, dtype=torch.bfloat16)\n"
    )
    plain = rope_lint("fix", "--unsafe-fixes", str(unfixable))
    verified = rope_lint("fix", "--unsafe-fixes", "--verify", str(unfixable))
    assert (plain.returncode, verified.returncode) == (1, 0), verified.stderr
    assert verified.stdout.splitlines()[-1] == "Fixed 0 findings, 1 remaining."
    assert f"{unfixable}:5:12: RPL101 " in verified.stdout


def legacy_rotary_class() -> str:
    """The text of the probe fixtures' `LegacyRotaryEmbedding`: a rotary class that needs only torch."""
    path = REPO / "fixtures" / "probe" / "rotary_classes.py"
    source = path.read_text(encoding="utf-8")
    [node] = [node for node in ast.parse(source).body if getattr(node, "name", "") == "LegacyRotaryEmbedding"]
    return "\n\n" + ast.get_source_segment(source, node) + "\n"


def modular_model(root: Path, generated_from: str) -> Path:
    """`transformers/models/toy/` with a modular source that does not import on its own (its parent model is not
    there, as a modular source's parent is not run with it) and a file whose banner says it is generated from
    `generated_from`."""
    folder = root / "transformers" / "models" / "toy"
    folder.mkdir(parents=True)
    for package in (root / "transformers", root / "transformers" / "models", folder):
        (package / "__init__.py").write_text("")
    banner = f"# This file was automatically generated from src/transformers/models/toy/{generated_from}.\n"
    (folder / "modeling_toy.py").write_text(banner + "import torch\nfrom torch import nn\n\n" + legacy_rotary_class())
    parent = "from ..parent.modeling_parent import ParentModel  # noqa: F401\n"
    (folder / "modular_toy.py").write_text("import torch\nfrom torch import nn\n\n" + parent + legacy_rotary_class())
    return root / "transformers"


def test_a_modular_sources_rotary_class_is_verified_as_the_class_generated_from_it(tmp_path: Path) -> None:
    """transformers never runs a modular source: its class is verified where the generated class of its name is."""
    package = modular_model(tmp_path / "generated", "modular_toy.py")
    run = rope_lint("fix", "--unsafe-fixes", "--verify", "--diff", str(package))
    lines = run.stdout.splitlines()
    modular = [line for line in lines if "modular_toy.py:" in line and "Embedding" in line]
    assert len(modular) == 1 and " LegacyRotaryEmbedding verified (as generated in modeling_toy.py:" in modular[0], (
        lines
    )
    assert "the code transformers runs: fp32 max rel diff 0, 5 conditions clean)" in modular[0]
    assert any(
        "modular_toy.py:1: modular_toy.py could not build: the original module does not import" in line
        for line in lines
    )
    # A file generated from another source says nothing of this one's class.
    other = modular_model(tmp_path / "other", "modular_other.py")
    run = rope_lint("fix", "--unsafe-fixes", "--verify", "--diff", str(other))
    assert not [line for line in run.stdout.splitlines() if "modular_toy.py:" in line and "Embedding" in line]
    assert "Verified 1, 0 failed, 1 could not be checked." in run.stdout
