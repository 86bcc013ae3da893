"""Each class's status (clean, exceeds, unbuilt, failed), the exit status they make, `--allow-unmeasured`, and the
memory budget that keeps a class too large for it from ever running at full size.

The exit-status tests call the command in this process (torch is imported once); the memory test runs a fresh one,
so that its peak memory is the probe's own.
"""

from __future__ import annotations

import json
import re

import pytest

from rope_lint.cli import main

SAFE = "fixtures/probe/rotary_classes.py:SafeRotaryEmbedding"
BUFFERED = "fixtures/probe/rotary_classes.py:BufferedRotaryEmbedding"
UNBUILDABLE = "fixtures/probe/toymodels/models/odd/modeling_odd.py:OddRotaryEmbedding"
FP32_ONLY = "fixtures/probe/status_classes.py:Fp32OnlyRotaryEmbedding"
PAIRWISE = "fixtures/probe/status_classes.py:PairwiseRotaryEmbedding"
PAIRWISE_INPUT = "fixtures/probe/status_classes.py:PairwiseInputEmbedding"
# to-bf16 rounds BufferedRotaryEmbedding's inv_freq and is refused by Fp32OnlyRotaryEmbedding, which returns
# nothing for the fp16 activations of default-dtype-fp16.
TRIGGERS = "fp32,to-bf16,default-dtype-fp16"


def probe(*args: str) -> int:
    return main(["probe", *args])


def test_json_gives_each_class_its_status_and_the_reason_of_the_unmeasured(in_repo, capsys):
    assert probe(SAFE, BUFFERED, FP32_ONLY, UNBUILDABLE, "--trigger", TRIGGERS, "--output-format", "json") == 1
    report = json.loads(capsys.readouterr().out)
    classes = {item["class"].rsplit(".", 1)[-1]: item for item in report["classes"]}
    assert {name: item["status"] for name, item in classes.items()} == {
        "SafeRotaryEmbedding": "clean",
        "BufferedRotaryEmbedding": "exceeds",
        "Fp32OnlyRotaryEmbedding": "failed",
        "OddRotaryEmbedding": "unbuilt",
    }
    assert report["statuses"] == {"clean": 1, "exceeds": 1, "unbuilt": 1, "failed": 1}
    assert [name for name, item in classes.items() if item["measured"]] == [
        "SafeRotaryEmbedding",
        "BufferedRotaryEmbedding",
    ]
    failed = classes["Fp32OnlyRotaryEmbedding"]
    assert failed["built"] is True
    assert failed["triggers"]["fp32"]["status"] == "clean"  # built and measured where it works
    assert failed["reason"] == (
        "under to-bf16: TypeError: inv_freq must not be half precision, got torch.bfloat16 "
        "(also under default-dtype-fp16)"
    )
    assert failed["triggers"]["default-dtype-fp16"] == {
        "status": "error",
        "reason": "forward returned NoneType, not cos/sin tensors",
    }
    unbuilt = classes["OddRotaryEmbedding"]
    assert (unbuilt["built"], unbuilt["triggers"]) == (False, {})
    assert unbuilt["reason"] == "constructor parameter 'frobnication_level' has no known value"
    assert report["summary"] == (
        "2 classes measured, 1 not built, 1 failed under a trigger; 1 exceed 0.004 under to-bf16 (1)"
    )


def test_table_shows_each_class_status(in_repo, capsys):
    assert probe(SAFE, FP32_ONLY, UNBUILDABLE, "--trigger", TRIGGERS) == 1
    out, err = capsys.readouterr()
    headings = [line.rsplit(".", 1)[-1] for line in out.splitlines() if "Embedding  [" in line]
    assert headings == [
        "SafeRotaryEmbedding  [clean]",
        "Fp32OnlyRotaryEmbedding  [FAILED]",
        "OddRotaryEmbedding  [UNBUILT]",
    ]
    assert err.splitlines() == [
        "rope-lint probe: 2 of 3 classes unmeasured (unbuilt or failed); --allow-unmeasured makes that a warning"
    ]


def test_unbuildable_class_exits_1_and_0_with_allow_unmeasured(in_repo, capsys):
    assert probe(SAFE, UNBUILDABLE, "--trigger", "fp32") == 1
    assert probe(SAFE, UNBUILDABLE, "--trigger", "fp32", "--allow-unmeasured") == 0
    allowed = capsys.readouterr().out.splitlines()
    assert allowed[-1] == "1 class measured, 1 not built; 0 exceed 0.004"  # still counted


def test_allow_unmeasured_makes_failures_warnings_but_keeps_findings(in_repo, capsys):
    assert probe(SAFE, FP32_ONLY, "--trigger", "fp32,to-bf16") == 1
    assert probe(SAFE, FP32_ONLY, "--trigger", "fp32,to-bf16", "--allow-unmeasured") == 0
    assert probe(BUFFERED, FP32_ONLY, UNBUILDABLE, "--trigger", "fp32,to-bf16", "--allow-unmeasured") == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        "1 class measured, 1 not built, 1 failed under a trigger; 1 exceed 0.004 under to-bf16 (1)"
    )


@pytest.mark.parametrize("allow", [[], ["--allow-unmeasured"]], ids=["plain", "allow-unmeasured"])
def test_measuring_no_class_exits_1_with_one_line(in_repo, capsys, allow):
    assert probe(UNBUILDABLE, "--trigger", "fp32", *allow) == 1
    out, err = capsys.readouterr()
    assert "  not built: constructor parameter 'frobnication_level' has no known value" in out
    assert err.splitlines() == ["rope-lint probe: error: none of the 1 rotary-embedding classes was measured"]


def test_file_without_rotary_classes_exits_1_with_one_line(in_repo, capsys):
    assert probe("fixtures/probe/toymodels/models/toy/configuration_toy.py") == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == ["rope-lint probe: error: no rotary-embedding classes found in the targets"]


@pytest.mark.parametrize("size", ["lots", "0", "-1GB", "2XB", ""])
def test_a_max_memory_that_is_no_size_exits_2(in_repo, capsys, size):
    with pytest.raises(SystemExit) as exit_info:
        probe(SAFE, f"--max-memory={size}")
    assert exit_info.value.code == 2
    assert "is not a positive size" in capsys.readouterr().err


# The probe in a fresh process, reporting its own peak resident memory on its last stderr line. Its address space
# is capped at 6 GB: should the budget ever fail, the 24 GB forward stops with an allocation error instead of
# taking the machine.
PEAK_SCRIPT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, 6 * 2**30))
from rope_lint.cli import main
code = main(['probe', *sys.argv[1:]])
print(f"peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}", file=sys.stderr)
sys.exit(code)
"""
BUDGET = 2**30


def test_a_class_over_the_memory_budget_is_unbuilt_and_never_runs_at_full_size(python_code):
    run = python_code(
        PEAK_SCRIPT,
        PAIRWISE,
        PAIRWISE_INPUT,
        SAFE,
        "--trigger",
        "fp32,to-bf16",
        "--max-memory",
        "1GB",
        "--allow-unmeasured",
        "--output-format",
        "json",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    peak = int(run.stderr.splitlines()[-1].removeprefix("peak "))
    classes = {item["class"].rsplit(".", 1)[-1]: item for item in run.json()["classes"]}
    assert classes["SafeRotaryEmbedding"]["status"] == "clean"  # an ordinary class fits the budget
    pairwise = classes["PairwiseRotaryEmbedding"]
    assert pairwise["status"] == "unbuilt"
    match = re.fullmatch(
        r"would allocate about ([\d.]+) GB at 4096 positions \(estimated from .* at 128 and .* at 256\), "
        r"over the --max-memory budget of 1 GB: not run at full size",
        pairwise["reason"],
    )
    assert match, pairwise["reason"]
    # Three float32 (1, 4096, 4096, 128) tensors are 24 GB; the estimate counts every allocation, never less.
    assert float(match.group(1)) >= 24
    # A class whose output varies with the input's values is never tried at full size unless its estimate fits: its
    # reason is what was wrong with it or its estimate, never a failed 8 GB allocation (torch: "can't allocate").
    unreadable = classes["PairwiseInputEmbedding"]
    assert unreadable["status"] == "unbuilt"
    assert "can't allocate" not in unreadable["reason"], unreadable["reason"]
    # The probe's process (Python and torch, about 0.4 GB) with everything it measured stays under the budget.
    assert peak < BUDGET, f"peak resident memory {peak / 2**20:.0f} MB"
