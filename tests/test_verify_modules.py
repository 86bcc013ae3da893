"""`rope-lint fix --verify` on changed module classes that are not rotary (issue 18, item 2): each is built from its
config class at small sizes and run on inputs derived from its forward's signature, original against fixed, or
reported as not built with the reason.

The fast tests run on a copy of fixtures/verify-modules (a package of our own: a config class beside a modeling
module whose classes are not rotary), through the command line in a fresh process. The slow test judges the shared
acceptance run of each pinned transformers release (tests/releases.py).
"""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pytest
from helpers import REPO, broken_fix, rope_lint, run_python, verify_changes_prelude
from releases import NEW, OLD, AcceptanceRun

from rope_lint.output.fix_report import FAILED, NOT_BUILT, VERIFIED

FIXTURE = REPO / "fixtures" / "verify-modules"
MODELING = Path("patchpkg", "modeling_patch.py")
BOXES = Path("patchpkg", "modeling_boxes.py")  # a rotary class whose forward takes boxes
# The fractional bucket edges of PatchPositionEmbeddings, which an int64 rewrite would break.
FRACTIONAL = "torch.arange(1 / self.per_side, 1.0, 1 / self.per_side)"


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A copy of the fixture's folder (the folder that holds `patchpkg`)."""
    copy = tmp_path / "tree"
    shutil.copytree(FIXTURE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def line_about(stdout: str, name: str) -> str:
    (line,) = [line for line in stdout.splitlines() if f": {name} " in line]
    return line


def test_changed_module_classes_are_built_from_their_config_and_run_both_ways(package: Path) -> None:
    modeling = package / MODELING
    before = modeling.read_text()
    run = rope_lint("fix", "--unsafe-fixes", "--verify", str(package))
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stderr == ""
    # Inputs from the forward's signature and the config: pixel values of the config's image size and a mask of
    # ones per patch (boolean, as annotated); hidden states of the small config's width; `layer_idx` given 0.
    embeddings = line_about(run.stdout, "PatchPositionEmbeddings")
    assert embeddings == (
        f"{modeling}:11: PatchPositionEmbeddings verified (fp32 max rel diff 0, same state_dict keys and shapes, "
        "built as a module from PatchVisionConfig (small), called with pixel_values=float32[2, 3, 32, 32], "
        "patch_attention_mask=bool[2, 4, 4])"
    )
    mixer = line_about(run.stdout, "TokenMixer")
    assert mixer.endswith("called with hidden_states=float32[2, 16, 256])")
    assert " TokenMixer verified (fp32 max rel diff 0, " in mixer
    # A class that cannot be built is reported with its reason, one line.
    grid = line_about(run.stdout, "ResampledGrid")
    assert grid == (
        f"{modeling}:63: ResampledGrid could not build: as a module: constructor parameter 'fn' needs an object "
        "that cannot be derived from its signature"
    )
    # A rotary class whose forward takes boxes: the probe cannot build it, so it is run as a module is, on
    # boxes within the image; its log1p rewrite moves the fp32 output by rounding alone.
    relation = line_about(run.stdout, "BoxRelationBias")
    assert relation.startswith(
        f"{package / BOXES}:27: BoxRelationBias verified (as a module, since the probe cannot build it (forward: "
    )
    assert re.search(r"\): fp32 max rel diff [\d.e+-]+ \(rounding: [\d.e+-]+ in float64\), same state_dict", relation)
    assert relation.endswith("built as a module from PatchVisionConfig (small), called with boxes=float32[2, 16, 4])")
    assert "Verified 3, 0 failed, 1 could not be checked." in run.stdout
    after = modeling.read_text()
    assert after != before and FRACTIONAL in after  # the fix wrote the file and left the fractional edges alone
    assert "torch.log1p(" in (package / BOXES).read_text()


# The fix that the test stands in for the real one: the fractional bucket edges enumerated in int64.
BROKEN_FIX = broken_fix(FRACTIONAL, FRACTIONAL[:-1] + ", dtype=torch.int64)")


def test_a_module_whose_fixed_version_fails_leaves_the_file_as_it_was_and_exits_1(package: Path) -> None:
    modeling = package / MODELING
    before = modeling.read_bytes()
    run = run_python(BROKEN_FIX, "fix", "--unsafe-fixes", "--verify", str(package))
    assert run.returncode == 1, run.stdout + run.stderr
    assert modeling.read_bytes() == before
    reason = (
        "the fixed module fails in fp32 where the original runs (built as a module from PatchVisionConfig (small), "
        "called with pixel_values=float32[2, 3, 32, 32], patch_attention_mask=bool[2, 4, 4]): "
        "ValueError: step must be nonzero"
    )
    left = f"rope-lint: {modeling}: verification failed, file left as it was"
    assert run.stderr == f"{left}: PatchPositionEmbeddings: {reason}\n"
    assert line_about(run.stdout, "PatchPositionEmbeddings") == (
        f"{modeling}:9: PatchPositionEmbeddings not verified: {reason}"
    )
    assert run.stdout.splitlines()[-1].startswith("Fixed 0 findings, ")


def verify_texts(code: str, module: Path = MODELING) -> dict[str, tuple[str, str]]:
    """Runs `code` with `verify(fixed)` defined: `verify_changes` on one of the fixture's modeling modules, its
    original text against a fixed text, in a fresh process; what it found, by name."""
    prelude = verify_changes_prelude(FIXTURE / module)
    run = run_python(prelude + textwrap.dedent(code))
    assert run.returncode == 0, run.stderr[-3000:]
    return {name: (status, detail) for status, name, detail in (line.split("|") for line in run.stdout.splitlines())}


def test_fixed_outputs_that_differ_and_a_changed_state_dict_fail() -> None:
    # One bucket edge lost: every patch past it takes another position's embedding.
    lost_edge = "torch.arange(1 / self.per_side, 1.0 - 1 / self.per_side, 1 / self.per_side)"
    found = verify_texts(f"verify(ORIGINAL.replace({FRACTIONAL!r}, {lost_edge!r}))")
    status, detail = found["PatchPositionEmbeddings"]
    assert status == FAILED
    assert re.fullmatch(r"fp32 forward outputs differ by [\d.e+-]+ relative \(built as a module from .+\)", detail)
    # Only the changed classes are built: the others are not reported.
    assert set(found) == {"PatchPositionEmbeddings"}
    held = "self.layer_idx = layer_idx\n"
    added = held + "        self.scale = nn.Parameter(torch.ones(1))\n"
    found = verify_texts(f"verify(ORIGINAL.replace({held!r}, {added!r}))")
    status, detail = found["TokenMixer"]
    assert status == FAILED
    assert detail.startswith("state_dict keys differ (lost none, gained ['scale'])")


def test_a_fixed_module_that_breaks_or_moves_off_a_default_device_fails() -> None:
    # The same values on the CPU, but a module built under `with torch.device("meta")` (as training frameworks build
    # models) that fails to build, or that keeps its buffer on the CPU where the original kept it on the default device.
    held = "self.layer_idx = layer_idx\n"
    gained = held + '        self.register_buffer("gain", torch.ones(4), persistent=False)\n'
    pinned = gained.replace("torch.ones(4)", 'torch.ones(4, device="cpu")')
    mixed = gained.replace("torch.ones(4)", 'torch.ones(4) * torch.ones(4, device="cpu")')
    alike = gained.replace("torch.ones(4)", "torch.full((4,), 1.0)")
    code = f"""
        original = ORIGINAL.replace({held!r}, {gained!r})
        for fixed in ({alike!r}, {pinned!r}, {mixed!r}):
            fixed = ORIGINAL.replace({held!r}, fixed)
            for verification in verify_changes([(PATH, original, fixed)]):
                print(verification.status, verification.name, verification.detail, sep="|")
    """
    run = run_python(verify_changes_prelude(FIXTURE / MODELING) + textwrap.dedent(code))
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [line.split("|") for line in run.stdout.splitlines()]
    assert [row[:2] for row in rows] == [[VERIFIED, "TokenMixer"], [FAILED, "TokenMixer"], [FAILED, "TokenMixer"]]
    assert rows[1][2].startswith("built under a default device, it keeps gain (cpu) off it, as the original does not (")
    assert rows[2][2].startswith("the fixed code fails to build under a default device: RuntimeError: ")


def test_an_equivalent_rewrite_of_the_fractional_edges_is_verified() -> None:
    # What a correct fix may write instead: the same edges, from an integral enumeration.
    integral = "(torch.arange(1, self.per_side, dtype=torch.int64) / self.per_side)"
    found = verify_texts(f"verify(ORIGINAL.replace({FRACTIONAL!r}, {integral!r}))")
    status, detail = found["PatchPositionEmbeddings"]
    assert status == VERIFIED, detail


def test_a_rotary_class_the_probe_cannot_build_fails_where_the_fix_changes_its_output() -> None:
    # Run as a module (its forward takes boxes), its output tells a changed computation from rounding: the offsets
    # shifted by 1e-5 differ in float64 too.
    one_plus = "/ sizes[:, :, None] + 1.0)"
    found = verify_texts(f"verify(ORIGINAL.replace({one_plus!r}, {one_plus.replace('1.0', '1.00001')!r}))", BOXES)
    status, detail = found["BoxRelationBias"]
    assert status == FAILED
    assert re.search(r"\): fp32 forward outputs differ by [\d.e+-]+ relative \(built as a module from .+\)$", detail)


def module_checks(code: str, *names: str) -> list[str]:
    """`check_module(cls, cls)` of each of the classes `names` that `code` defines, run in a fresh process: a
    "status|detail" line each."""
    checks = f"""
        from rope_lint.verify.modules import check_module
        for cls in ({", ".join(names)},):
            print(*check_module(cls, cls), sep="|")
    """
    run = run_python(textwrap.dedent(code) + textwrap.dedent(checks))
    assert run.returncode == 0, run.stderr
    return run.stdout.splitlines()


def test_inputs_follow_the_signature_and_the_limits_hold() -> None:
    """Token and position ids, a per-token mask and a feature map's shape are derived by name and annotation; a class
    too large to build at small sizes is counted on the meta device and not built; a base class with no forward of
    its own is not run."""
    code = """
        import torch
        from torch import nn

        class TextConfig:
            def __init__(self, hidden_size=32, vocab_size=50, **kwargs):
                self.hidden_size, self.vocab_size = hidden_size, vocab_size

        class TokenEmbeddings(nn.Module):
            def __init__(self, config: TextConfig):
                super().__init__()
                self.tokens = nn.Embedding(config.vocab_size, config.hidden_size)
                self.positions = nn.Embedding(64, config.hidden_size)

            def forward(self, input_ids, position_ids, attention_mask):
                return (self.tokens(input_ids) + self.positions(position_ids)) * attention_mask[..., None]

        class GridEncoding(nn.Module):
            def forward(self, shape: torch.Size, dtype: torch.dtype):
                return torch.zeros(shape, dtype=dtype).cumsum(-1)

        class WideTable(nn.Module):
            def __init__(self, rows: int = 50_000_000):
                super().__init__()
                self.table = nn.Parameter(torch.zeros(rows))

            def forward(self, x):
                return x

        class Base(nn.Module):
            def __init__(self, config: TextConfig):
                super().__init__()
    """
    assert module_checks(code, "TokenEmbeddings", "GridEncoding", "WideTable", "Base") == [
        f"{VERIFIED}|fp32 max rel diff 0, same state_dict keys and shapes, built as a module from TextConfig (small), "
        "called with input_ids=int64[2, 16], position_ids=int64[2, 16], attention_mask=int64[2, 16]",
        f"{VERIFIED}|fp32 max rel diff 0, same state_dict keys and shapes, built as a module from its signature, "
        "called with shape=torch.Size([2, 64, 4, 4]), dtype=torch.float32",
        f"{NOT_BUILT}|as a module: constructor (its signature): 50,000,000 elements, over the 20,000,000 built",
        f"{NOT_BUILT}|as a module: it defines no forward to run (a base class)",
    ]


def test_a_required_count_of_parts_named_by_its_part_gets_a_few() -> None:
    """`heads`, `depth` and `kv_heads` count a model's parts, as `num_heads` and `num_layers` do: a class that requires
    them is built with a few of each; a part annotated as something else (modules) is no count."""
    code = """
        import torch
        from torch import nn

        class HeadBias(nn.Module):
            def __init__(self, dim, *, heads, depth, kv_heads):
                super().__init__()
                widths = [1] + [dim] * depth
                self.mlp = nn.Sequential(*(nn.Linear(a, b) for a, b in zip(widths, widths[1:])))
                self.out = nn.Linear(dim, heads * kv_heads)

            def forward(self, n: int):
                return self.out(self.mlp(torch.arange(n, dtype=torch.int64).float()[:, None]))

        class Stack(nn.Module):
            def __init__(self, layers: nn.ModuleList):
                super().__init__()
                self.layers = layers

            def forward(self, x):
                return x
    """
    assert module_checks(code, "HeadBias", "Stack") == [
        f"{VERIFIED}|fp32 max rel diff 0, same state_dict keys and shapes, built as a module from its signature, "
        "called with n=16",
        f"{NOT_BUILT}|as a module: constructor parameter 'layers' is annotated ModuleList",
    ]


# The changed module classes that are not rotary at run time, on each release's acceptance run: how many are built
# and verified, and how many could not be built (each with its reason).
MODULES_VERIFIED = {OLD: 20, NEW: 34}
MODULES_NOT_BUILT = {OLD: 11, NEW: 27}  # 4.37.2: 14 before RPL307 left SeamlessM4T's rounded durations alone

MODULE_LINE = re.compile(r"(.+?):\d+: (\w+) (verified|not verified|could not build)\b:? \(?(.*)")


@pytest.mark.slow
@pytest.mark.parametrize("version", [OLD, NEW])
def test_every_changed_module_class_of_a_transformers_release_is_run_or_said_why(
    request: pytest.FixtureRequest, version: str
) -> None:
    """On `fix --unsafe-fixes --verify` of a copy of the release (the session's shared acceptance run), each changed
    module class that is not rotary is built and gives the original's fp32 outputs, or is reported not built; none
    fails."""
    run: AcceptanceRun = request.getfixturevalue("old_acceptance" if version == OLD else "new_acceptance")
    found: dict[tuple[str, str], tuple[str, str]] = {}
    for line in run.stdout.splitlines():
        match = MODULE_LINE.match(line)
        # A rotary class the probe cannot build is run as a module too: test_verify.py counts it.
        rotary = "since the probe cannot build it" in match[4] if match else False
        if match and not rotary and ("built as a module from" in match[4] or match[4].startswith("as a module: ")):
            found[(Path(match[1]).relative_to(run.fixed).as_posix(), match[2])] = match[3], match[4]
    failed = {key: detail for key, (status, detail) in found.items() if status == "not verified"}
    assert not failed, failed
    verified = sorted(key for key, (status, _) in found.items() if status == "verified")
    not_built = {key: detail for key, (status, detail) in found.items() if status == "could not build"}
    print(f"transformers {version}: {len(verified)} changed module classes verified, {len(not_built)} not built")
    for (path, name), detail in sorted(not_built.items()):
        print(f"  {path}: {name} {detail}")
    assert (len(verified), len(not_built)) == (MODULES_VERIFIED[version], MODULES_NOT_BUILT[version])
