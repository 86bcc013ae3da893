"""What the probe builds beyond cos/sin-returning classes (fixtures/probe/rotating_classes.py): modules that rotate q
and k, a module that returns its input, a 2-D vision RoPE that reads a feature map, and a relative encoding. One
probe run, in a fresh process, serves every test."""

from __future__ import annotations

from typing import Any

import pytest
from test_probe_fixtures import entry, statuses

TRIGGERS = ["fp32", "zero-init-bf16", "to-bf16"]


@pytest.fixture(scope="module")
def report(probe_cli, probe_fixtures) -> dict[str, Any]:
    run = probe_cli(
        str(probe_fixtures / "rotating_classes.py"),
        "--trigger",
        ",".join(TRIGGERS),
        "--allow-unmeasured",
        "--output-format",
        "json",
    )
    assert run.returncode == 1, run.stderr[-3000:]  # the cached tables exceed the threshold under zero.Init
    return run.json()


def test_a_module_that_rotates_q_and_k_with_bf16_tables_is_flagged_under_zero_init(report):
    rotating = entry(report, "CachedRotatingEmbedding")
    assert rotating["measured"] is True, rotating["reason"]
    assert rotating["dim"] == 128
    assert statuses(report, "CachedRotatingEmbedding") == {
        "fp32": "clean",
        "zero-init-bf16": "exceeds",
        "to-bf16": "clean",
    }
    zero_init = rotating["triggers"]["zero-init-bf16"]
    # The angles read back from the rotated unit pairs: bf16 holds every integer up to 256, and no further.
    assert zero_init["first_wrong_position"] == 257
    assert zero_init["cos_max_abs_error"] > 1.0
    assert rotating["triggers"]["fp32"]["cos_max_abs_error"] < 1e-3
    # What was read is RoPE itself, in the rotate_half layout: the textbook RoPE of its dim and base agrees.
    assert rotating["textbook"] == "agrees"


def test_a_module_that_rotates_with_fp32_tables_is_clean(report):
    rotating = entry(report, "Float32RotatingEmbedding")
    assert rotating["status"] == "clean", rotating
    assert statuses(report, "Float32RotatingEmbedding") == dict.fromkeys(TRIGGERS, "clean")
    # The angles were read back, in the interleaved layout, not a zero input's zeros: the textbook RoPE agrees.
    assert rotating["textbook"] == "agrees"
    # Clean means the final rounding of the rotated values to bf16 at most.
    assert max(result["cos_max_abs_error"] for result in rotating["triggers"].values()) < 2.5e-3


def test_a_module_that_returns_its_input_is_never_read_as_a_table(report):
    idle = entry(report, "IdleRotaryEmbedding")
    assert idle["measured"] is False
    assert idle["status"] == "unbuilt"
    assert "returns the input unrotated" in idle["reason"]


def test_a_vision_rope_is_measured_on_a_feature_map_of_one_row_of_n_patches(report):
    grid = entry(report, "PatchGridRotaryEmbedding")
    assert grid["measured"] is True, grid["reason"]
    assert grid["positions"] == report["positions"]
    assert grid["triggers"]["fp32"]["status"] == "clean"
    # Its inv_freq is a buffer: .to(bfloat16) rounds it, and the column angles of far patches drift.
    assert grid["triggers"]["to-bf16"]["status"] == "exceeds"


def test_a_relative_encoding_is_measured_over_its_offsets(report):
    relative = entry(report, "RelativeSinusoidEncoding")
    assert relative["measured"] is True, relative["reason"]
    assert relative["triggers"]["fp32"]["status"] == "clean"
    assert relative["triggers"]["to-bf16"]["status"] == "exceeds"


def test_a_rope_over_points_is_built_from_its_part_of_the_config_and_measured_on_coordinates(report):
    """Constructor parameter `points_config`, forward (coordinates, ids, dtype): the coordinates of N points whose
    every axis is at the point's position, ids equal to the positions."""
    points = entry(report, "PointRotaryEmbedding")
    assert points["measured"] is True, points["reason"]
    assert points["construction"] == "config"
    assert points["positions"] == report["positions"]
    assert statuses(report, "PointRotaryEmbedding") == {
        "fp32": "clean",
        "zero-init-bf16": "clean",
        "to-bf16": "exceeds",
    }


def test_a_class_reading_its_rotary_part_of_a_composite_config_is_built_from_that_part(report):
    relation = entry(report, "RelationRotaryEmbedding")
    assert relation["measured"] is True, relation["reason"]
    assert relation["triggers"]["fp32"]["status"] == "clean"
    assert relation["triggers"]["to-bf16"]["status"] == "exceeds"
