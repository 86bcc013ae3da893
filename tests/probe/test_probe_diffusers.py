"""The probe on diffusers 0.42.1 (the development corpus outside transformers), installed from PyPI into its own
cache folder. Its `modeling_*` modules are base classes, not models, so the whole of `diffusers.models` is walked;
most of its rotary classes are named `*PosEmbed`, `*EmbedND` or `*RoPE*`, and its sinusoidal ones `*Timesteps` or
`*PositionalEmbedding`: only their computation finds them."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from helpers import install_release

# docs/measurements.md's figures for `rope-lint probe diffusers.models` (every trigger).
FOUND_BY_NAME = 10
FOUND_BY_COMPUTATION = 53
MEASURED = 11


@pytest.fixture(scope="module")
def report(probe_cli) -> dict[str, Any]:
    site = install_release("diffusers", "0.42.1")
    run = probe_cli("diffusers.models", "--output-format", "json", pythonpath=[site])
    assert run.returncode == 1, run.stderr[-3000:]  # classes left unmeasured, each with its reason
    return run.json()


def test_rotary_and_sinusoidal_classes_are_found_by_name_and_by_computation(report):
    assert report["import_failures"] == []
    found_by = Counter(item["found_by"] for item in report["classes"])
    assert found_by == {"name": FOUND_BY_NAME, "computation": FOUND_BY_COMPUTATION}
    names = {item["class"].rsplit(".", 1)[-1] for item in report["classes"] if item["found_by"] == "computation"}
    # A 3-D video RoPE through a helper of another module, a sinusoidal timestep embedding, a 1-D RoPE.
    assert {"WanRotaryPosEmbed", "Timesteps", "Kandinsky5RoPE1D"} <= names


def test_the_measured_count_is_the_readmes(report):
    measured = [item for item in report["classes"] if item["measured"]]
    assert len(measured) == MEASURED
    for item in report["classes"]:
        assert item["measured"] or item["reason"], item["class"]
