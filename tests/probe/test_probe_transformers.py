"""The probe on real releases of transformers, each installed from PyPI into its own cache folder (never into the
project's environment). A failed install fails these tests.

transformers 4.37.2 (before PR #28760): the whole package once, every trigger. The newest release: its Llama
module only, under the triggers that its current code is exposed to.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

OLD_RELEASE = "4.37.2"
NEWEST_RELEASE = "5.24.0"
LLAMA = "transformers.models.llama.modeling_llama.LlamaRotaryEmbedding"


@pytest.fixture(scope="module")
def old_site(transformers_release) -> Path:
    return transformers_release(OLD_RELEASE)


@pytest.fixture(scope="module")
def old_report(probe_cli, old_site) -> dict[str, Any]:
    # Two classes are unbuilt (see below): allowed, so that exit status 1 says the findings alone.
    run = probe_cli("transformers", "--allow-unmeasured", "--output-format", "json", pythonpath=[old_site])
    assert run.returncode == 1, run.stderr[-3000:]
    return run.json()


def classes_by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["class"]: item for item in report["classes"]}


def test_old_release_every_rotary_class_is_built_or_its_reason_given(old_report):
    assert old_report["import_failures"] == []
    measured = [item for item in old_report["classes"] if item["measured"]]
    assert len(measured) >= 20
    for item in old_report["classes"]:
        assert item["measured"] or item["reason"], item["class"]
    not_built = {
        item["class"].rsplit(".", 1)[-1]: item["reason"] for item in old_report["classes"] if not item["measured"]
    }
    # ESM's rotary forward rotates (q, k) rather than returning tables; Transformer-XL's is a sinusoidal table.
    assert not_built == {
        "RotaryEmbedding": "forward parameter 'k' has no known value",
        "PositionalEmbedding": "constructor parameter 'demb' has no known value",
    }


def test_old_release_llama_under_zero_init(old_report):
    llama = classes_by_name(old_report)[LLAMA]
    assert llama["reference"] == "float64 build"
    for trigger in ("zero-init-bf16", "deepspeed-zero-init"):
        result = llama["triggers"][trigger]
        assert result["status"] == "exceeds"
        # The README's figures, to the digits it gives: cos error 1.999 from position 257, 51.9% of elements wrong.
        assert result["cos_max_abs_error"] == pytest.approx(1.999, abs=5e-4)
        assert result["wrong_fraction"] == pytest.approx(0.519, abs=5e-4)
        assert result["first_wrong_position"] == 257


def test_old_release_counts_are_the_readmes(old_report):
    """The README's probe table for 4.37.2: 28 measured, 2 not built, 27 over the threshold, by trigger."""
    assert old_report["summary"] == (
        "28 classes measured, 2 not built; 27 exceed 0.004 under to-bf16 (4), zero-init-bf16 (23), "
        "deepspeed-zero-init (23)"
    )


def test_old_release_is_clean_in_fp32(old_report):
    for item in old_report["classes"]:
        if item["measured"]:
            assert item["triggers"]["fp32"]["status"] == "clean", item["class"]
    assert classes_by_name(old_report)[LLAMA]["triggers"]["fp32"]["cos_max_abs_error"] < 1e-3


def test_old_release_stand_in_and_real_zero_init_agree_on_every_class(old_report):
    for item in old_report["classes"]:
        if item["measured"]:
            assert item["triggers"]["zero-init-bf16"] == item["triggers"]["deepspeed-zero-init"], item["class"]


BIT_IDENTITY_SCRIPT = """
import json, torch
from rope_lint.probe.triggers import TRIGGERS
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

def build(name):
    trigger = TRIGGERS[name]
    with trigger.construction():
        module = LlamaRotaryEmbedding(128, 4096, 10000)
    with trigger.forward(module):
        cos, sin = module(torch.zeros(1, dtype=torch.bfloat16), seq_len=4096)
    return {**dict(module.named_buffers()), "forward cos": cos, "forward sin": sin}

def identical(a, b):
    return sorted(a) == sorted(b) and all(a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in a)

stand_in, real, plain = build("zero-init-bf16"), build("deepspeed-zero-init"), build("fp32")
print(json.dumps({"identical": identical(stand_in, real), "same_as_fp32": identical(stand_in, plain),
                  "tensors": sorted(real)}))
"""


def test_old_release_stand_in_and_real_zero_init_build_bit_identical_tables(python_code, old_site):
    run = python_code(BIT_IDENTITY_SCRIPT, pythonpath=[old_site])
    assert run.returncode == 0, run.stderr[-3000:]
    outcome = json.loads(run.stdout.strip().splitlines()[-1])
    assert outcome["tensors"] == ["cos_cached", "forward cos", "forward sin", "inv_freq", "sin_cached"]
    assert outcome["identical"] is True
    assert outcome["same_as_fp32"] is False  # zero.Init did change them: the comparison is not vacuous


def test_newest_release_llama_is_flagged_under_to_bf16_and_zero_init(probe_cli, transformers_release):
    site = transformers_release(NEWEST_RELEASE)
    run = probe_cli(
        "transformers.models.llama.modeling_llama",
        "--trigger",
        "fp32,to-bf16,zero-init-bf16",
        "--output-format",
        "json",
        pythonpath=[site],
    )
    assert run.returncode == 1, run.stderr[-3000:]
    llama = classes_by_name(run.json())[LLAMA]
    assert llama["construction"] == "config"
    assert llama["triggers"]["fp32"]["status"] == "clean"
    # The README's figures: to-bf16 cos 1.99997 from position 4, 59.4% wrong (the inv_freq buffer is rounded to
    # bf16); zero-init-bf16 cos 2.0 from position 2, 62.8% wrong (`torch.arange(0, dim, 2, dtype=torch.float)`
    # becomes bf16).
    for trigger, cos_error, first_wrong, wrong in (("to-bf16", 1.99997, 4, 0.594), ("zero-init-bf16", 2.0, 2, 0.628)):
        result = llama["triggers"][trigger]
        assert result["status"] == "exceeds"
        assert result["cos_max_abs_error"] == pytest.approx(cos_error, abs=5e-5)
        assert result["wrong_fraction"] == pytest.approx(wrong, abs=5e-4)
        assert result["first_wrong_position"] == first_wrong
