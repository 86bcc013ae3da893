"""Our own rotary classes (fixtures/probe) under every trigger, real DeepSpeed included, and discovery in a
miniature model library laid out like transformers. One probe run, in a fresh process, serves every test."""

from __future__ import annotations

from typing import Any

import pytest

EVERY_TRIGGER = [
    "fp32",
    "default-dtype-bf16",
    "default-dtype-fp16",
    "zero-init-bf16",
    "deepspeed-zero-init",
    "to-bf16",
    "autocast-bf16",
]


@pytest.fixture(scope="module")
def report(probe_cli, probe_fixtures) -> dict[str, Any]:
    run = probe_cli(
        "fixtures/probe/rotary_classes.py",
        "fixtures/probe/float32_only.py",
        "toymodels",  # by module name, from PYTHONPATH
        "--output-format",
        "json",
        pythonpath=[probe_fixtures],
    )
    assert run.returncode == 1, run.stderr  # the hazard classes exceed the threshold, and one class is unbuilt
    return run.json()


def entry(report: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [item for item in report["classes"] if item["class"].endswith("." + name)]
    return found


def statuses(report: dict[str, Any], name: str) -> dict[str, str]:
    return {trigger: result["status"] for trigger, result in entry(report, name)["triggers"].items()}


def test_every_trigger_ran(report):
    assert report["triggers"] == EVERY_TRIGGER


def test_safe_class_is_clean_under_every_trigger(report):
    safe = entry(report, "SafeRotaryEmbedding")
    assert safe["reference"] == "float64 build"
    assert statuses(report, "SafeRotaryEmbedding") == dict.fromkeys(EVERY_TRIGGER, "clean")
    # Clean means one final rounding to the activations' dtype at most.
    assert max(result["cos_max_abs_error"] for result in safe["triggers"].values()) < 2.5e-3


def test_legacy_class_breaks_under_zero_init_from_position_257(report):
    legacy = entry(report, "LegacyRotaryEmbedding")
    for trigger in ("zero-init-bf16", "deepspeed-zero-init"):
        result = legacy["triggers"][trigger]
        assert result["status"] == "exceeds"
        assert result["cos_max_abs_error"] >= 1.9
        assert result["first_wrong_position"] == 257
    assert legacy["triggers"]["fp32"]["status"] == "clean"
    assert legacy["triggers"]["to-bf16"]["status"] == "clean"  # its tables were computed in fp32, then cast once


def test_buffered_inv_freq_breaks_under_to_bf16(report):
    assert statuses(report, "BufferedRotaryEmbedding") == {
        "fp32": "clean",
        "default-dtype-bf16": "clean",
        "default-dtype-fp16": "clean",
        "zero-init-bf16": "exceeds",
        "deepspeed-zero-init": "exceeds",
        "to-bf16": "exceeds",
        "autocast-bf16": "clean",
    }


def test_true_division_breaks_under_default_dtype(report):
    divided = statuses(report, "DividedRotaryEmbedding")
    assert divided["default-dtype-bf16"] == divided["default-dtype-fp16"] == "exceeds"
    assert divided["fp32"] == "clean"


def test_real_zero_init_and_the_stand_in_agree_on_every_class(report):
    for item in report["classes"]:
        if item["measured"]:
            stand_in = item["triggers"]["zero-init-bf16"]
            real = item["triggers"]["deepspeed-zero-init"]
            assert real["status"] != "unavailable", real["reason"]
            assert stand_in == real, item["class"]


def test_class_that_cannot_run_in_float64_gets_a_textbook_reference(report):
    fallback = entry(report, "Float32OnlyRotaryEmbedding")
    assert fallback["reference"] == "textbook"
    assert "TypeError" in fallback["reference_note"]
    assert statuses(report, "Float32OnlyRotaryEmbedding") == dict.fromkeys(EVERY_TRIGGER, "clean")


def test_package_walk_finds_config_style_and_inv_freq_classes_once(report):
    names = [item["class"] for item in report["classes"] if item["class"].startswith("toymodels.")]
    assert sorted(names) == [
        "toymodels.models.odd.modeling_odd.OddRotaryEmbedding",
        "toymodels.models.toy.modeling_toy.ToyRotaryEmbedding",  # re-exported elsewhere, probed once
        "toymodels.models.toy.modeling_toy.ToySinusoids",  # no rotary name, registers inv_freq
    ]  # ToyAttention only reads inv_freq
    toy = entry(report, "ToyRotaryEmbedding")
    assert toy["construction"] == "config"
    assert toy["dim"] == 128
    assert toy["triggers"]["to-bf16"]["status"] == "exceeds"
    assert entry(report, "ToySinusoids")["construction"] == "old-style"


def test_unbuildable_class_is_reported_with_its_reason(report):
    odd = entry(report, "OddRotaryEmbedding")
    assert odd["measured"] is False
    assert odd["reason"] == "constructor parameter 'frobnication_level' has no known value"


def test_import_failures_are_reported_and_other_modules_are_not_imported(report):
    assert report["import_failures"] == [
        {
            "module": "toymodels.models.broken.modeling_broken",
            "reason": "ModuleNotFoundError: No module named 'a_package_that_does_not_exist'",
        }
    ]  # convert_toy_checkpoint.py would raise if imported: only modeling_*.py modules are walked


def test_a_package_directory_is_a_target_too(probe_cli):
    run = probe_cli("fixtures/probe/toymodels", "--trigger", "fp32", "--output-format", "json")
    assert run.returncode == 1, run.stderr  # nothing exceeds in fp32, but OddRotaryEmbedding is unbuilt
    names = sorted(item["class"] for item in run.json()["classes"])
    assert names[-1] == "toymodels.models.toy.modeling_toy.ToySinusoids"
    assert len(names) == 3
