"""The `rope-lint probe` command line: exit codes, usage errors, options, output forms, torch staying optional.

Most tests call the command in this process (torch is imported once); the ones about imports run a fresh one.
"""

from __future__ import annotations

import io
import json
import sys

import pytest

from rope_lint.cli import main

SAFE = "fixtures/probe/rotary_classes.py:SafeRotaryEmbedding"
LEGACY = "fixtures/probe/rotary_classes.py:LegacyRotaryEmbedding"


def probe(*args: str) -> int:
    return main(["probe", *args])


def test_cli_module_imports_no_torch(python_code):
    run = python_code("import sys, rope_lint.probe.cli; print('torch' in sys.modules)")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"


def test_without_torch_says_how_to_install_and_exits_2(probe_cli):
    run = probe_cli(SAFE, blocked=["torch"])
    assert run.returncode == 2
    assert "pip install 'rope-lint[probe]'" in run.stderr
    assert "torch==2.13.0" in run.stderr
    assert run.stdout == ""


def test_clean_class_exits_0_and_findings_exit_1(in_repo, capsys):
    assert probe(SAFE, "--trigger", "fp32,zero-init-bf16") == 0
    assert probe(LEGACY, "--trigger", "zero-init-bf16") == 1
    table = capsys.readouterr().out
    assert "EXCEEDS" in table
    row = [line for line in table.splitlines() if line.strip().startswith("zero-init-bf16")][-1]
    assert row.split()[3] == "257"  # trigger, cos err, sin err, first wrong position


@pytest.mark.parametrize(
    "args",
    [
        pytest.param([SAFE, "--trigger", "fp32,warp-drive"], id="unknown trigger"),
        pytest.param([SAFE, "--positions", "0"], id="bad positions"),
        pytest.param([SAFE, "--threshold", "-1"], id="bad threshold"),
    ],
)
def test_bad_options_exit_2(in_repo, capsys, args):
    with pytest.raises(SystemExit) as exit_info:
        probe(*args)
    assert exit_info.value.code == 2
    assert "error" in capsys.readouterr().err


@pytest.mark.parametrize(
    "target",
    [
        pytest.param("no_such_module_anywhere", id="missing target"),
        pytest.param("fixtures/probe/rotary_classes.py:NoSuchClass", id="missing class"),
    ],
)
def test_targets_that_name_nothing_exit_2(in_repo, capsys, target):
    assert probe(target) == 2
    assert "rope-lint probe: error:" in capsys.readouterr().err


def test_repeated_and_comma_separated_triggers_run_in_order(in_repo, capsys):
    assert probe(SAFE, "--trigger", "to-bf16,fp32", "--trigger", "autocast-bf16", "--output-format", "json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["triggers"] == ["to-bf16", "fp32", "autocast-bf16"]
    assert list(report["classes"][0]["triggers"]) == ["to-bf16", "fp32", "autocast-bf16"]


def test_positions_option_sets_the_table_length(in_repo, capsys):
    # bf16 holds every integer up to 256 exactly: with 256 positions zero.Init does no harm.
    assert probe(LEGACY, "--trigger", "zero-init-bf16", "--positions", "256", "--output-format", "json") == 0
    [entry] = json.loads(capsys.readouterr().out)["classes"]
    assert entry["positions"] == 256
    assert entry["triggers"]["zero-init-bf16"]["status"] == "clean"


def test_threshold_option(in_repo, capsys):
    # Every bf16 table carries one final rounding (~0.002): a tiny threshold flags even the safe class.
    assert probe(SAFE, "--trigger", "to-bf16", "--threshold", "1e-6", "--output-format", "json") == 1
    assert json.loads(capsys.readouterr().out)["classes"][0]["triggers"]["to-bf16"]["status"] == "exceeds"


def test_deepspeed_missing_is_reported_unavailable(in_repo, capsys, monkeypatch):
    from rope_lint.probe import triggers

    monkeypatch.setitem(sys.modules, "deepspeed", None)  # `import deepspeed` raises ImportError
    triggers._import_deepspeed.cache_clear()
    try:
        assert probe(SAFE, "--trigger", "deepspeed-zero-init", "--output-format", "json") == 0
    finally:
        triggers._import_deepspeed.cache_clear()
    result = json.loads(capsys.readouterr().out)["classes"][0]["triggers"]["deepspeed-zero-init"]
    assert result["status"] == "unavailable"
    assert "deepspeed cannot be imported" in result["reason"]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_only(in_repo, capsys, monkeypatch):
    assert probe(SAFE, "--trigger", "fp32") == 0
    assert "probing" not in capsys.readouterr().err
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert probe(SAFE, "--trigger", "fp32") == 0
    assert "probing 1/1 rotary_classes.SafeRotaryEmbedding" in terminal.getvalue()
    assert "probing" not in capsys.readouterr().out


# Model-style code that logs as model libraries do: a warning with a whole config in it, and an error.
LOGGING_MODEL = """
import logging
import sys

import torch
from torch import nn

logger = logging.getLogger("toy_model_library")
logger.addHandler(logging.StreamHandler(sys.stderr))


class LoggingRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=2048, base=10000.0):
        super().__init__()
        logger.warning("config {\\n  'rope_theta': 10000.0\\n} has no head_dim")
        logger.error("this checkpoint was saved by a newer release")
        exponents = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
        freqs = torch.outer(torch.arange(max_position_embeddings, dtype=torch.int64).float(), 1.0 / base**exponents)
        angles = torch.cat((freqs, freqs), dim=-1)
        self.cos_table, self.sin_table = angles.cos(), angles.sin()

    def forward(self, x, seq_len):
        return self.cos_table[:seq_len].to(x.dtype), self.sin_table[:seq_len].to(x.dtype)
"""


def test_the_model_codes_logged_warnings_are_dropped_and_its_errors_shown(tmp_path, capsys):
    module = tmp_path / "logging_model.py"
    module.write_text(LOGGING_MODEL)
    assert probe(f"{module}:LoggingRotaryEmbedding", "--trigger", "fp32") == 0
    err = capsys.readouterr().err
    assert "has no head_dim" not in err
    assert "saved by a newer release" in err
    import logging

    assert logging.root.manager.disable == logging.NOTSET  # the rest of the process logs as before
