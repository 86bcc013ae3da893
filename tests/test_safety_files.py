"""A fix writes only the regular files it was asked to fix, and a run reads only regular files, and no more of them
than a limit: links out of the tree, a crafted modular import, a cache folder in a bad state, FIFOs, devices, huge or
deeply nested inputs, stale temporaries and a killed run's workers."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import rope_lint

from rope_lint import api, files
from rope_lint.cache import FOLDER
from rope_lint.engine import LARGE_RUN

HAZARD = "import torch\nt = torch.arange(4096, dtype=torch.float32)\n"
FIXED = "import torch\nt = torch.arange(4096, dtype=torch.int64).float()\n"
CONFIG = '[tool.rope-lint]\nselect = ["ALL"]\n'


def run_limited(*args: str, cwd: Path, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    """The command line in a process of its own, with 2 GB of address space: a run that reads without end fails
    fast (MemoryError) instead of taking the machine, and one that hangs fails on the timeout."""

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    return rope_lint(*args, cwd=cwd, timeout=timeout, preexec_fn=limit_memory)


def tree_of(folder: Path, count: int, text: str = HAZARD) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    files = [folder / f"m{number:03}.py" for number in range(count)]
    for path in files:
        path.write_text(text)
    return files


# Writing outside the tree


def test_a_linked_file_is_reported_and_its_target_left_alone(tmp_path: Path) -> None:
    outside = tmp_path / "outside.py"
    outside.write_text(HAZARD)
    tree = tmp_path / "tree"
    tree_of(tree, 1)
    (tree / "link.py").symlink_to(outside)
    report = api.fix([str(tree)])
    assert outside.read_text() == HAZARD
    assert (tree / "link.py").is_symlink()
    assert (tree / "m000.py").read_text() == FIXED  # the rest of the tree is fixed
    [(path, reason)] = report.failures
    assert path == str(tree / "link.py") and "symbolic link" in reason and "\n" not in reason
    assert [d.path for d in report.remaining] == [str(tree / "link.py")]  # its finding stays, and says so


def test_a_file_named_through_a_linked_folder_is_not_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path / "outside"
    [target] = tree_of(outside, 1)
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "linked").symlink_to(outside)
    monkeypatch.chdir(tmp_path)
    report = api.fix(["tree/linked/m000.py"])
    assert target.read_text() == HAZARD
    assert [path for path, _ in report.failures] == ["tree/linked/m000.py"]


BANNER = "# This file was automatically generated from src/transformers/models/mistral/modular_mistral.py.\n"
PARENT = """import torch


class LlamaScaler(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.t = torch.arange(4096, dtype=torch.float32)
"""


def test_a_path_resolves_as_realpath_resolves_it_and_a_run_resolves_its_folders_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`files.resolved` keeps each folder's resolution for the run; every path gives what `os.path.realpath` gives:
    through a linked folder, a linked file, a path that climbs out of a link, a relative one."""
    real, elsewhere = tmp_path / "real", tmp_path / "elsewhere"
    (real / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    (real / "sub" / "a.py").write_text("")
    (elsewhere / "b.py").write_text("")
    (tmp_path / "linked").symlink_to(real)
    (real / "sub" / "link.py").symlink_to(elsewhere / "b.py")
    monkeypatch.chdir(real)
    paths = [
        real / "sub" / "a.py",
        tmp_path / "linked" / "sub" / "a.py",
        real / "sub" / "link.py",
        f"{tmp_path}/linked/../elsewhere/b.py",
        "sub/a.py",
        "sub/../sub/link.py",
    ]
    for path in paths:
        assert files.resolved(path) == os.path.realpath(path), path
    # A folder that becomes a link between two runs: the second run resolves it again.
    moved = tmp_path / "moved"
    (tmp_path / "linked").unlink()
    (tmp_path / "linked").symlink_to(moved)
    (moved / "sub").mkdir(parents=True)
    (moved / "sub" / "a.py").write_text("")
    api.check([str(moved / "sub" / "a.py")])
    assert files.resolved(tmp_path / "linked" / "sub" / "a.py") == str(moved / "sub" / "a.py")


def test_a_modular_import_that_climbs_out_of_the_package_edits_nothing_out_of_it(tmp_path: Path) -> None:
    """`from ....models.llama.modeling_llama import` in transformers/models/mistral/ names a file beside the package,
    which the fix of the generated file must not take for its parent model."""
    package = tmp_path / "transformers"
    mistral = package / "models" / "mistral"
    mistral.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    planted = tmp_path / "models" / "llama" / "modeling_llama.py"
    planted.parent.mkdir(parents=True)
    planted.write_text(PARENT)
    modular = (
        "from ....models.llama.modeling_llama import LlamaScaler\n\n\nclass MistralScaler(LlamaScaler):\n    pass\n"
    )
    (mistral / "modular_mistral.py").write_text(modular)
    generated = mistral / "modeling_mistral.py"
    generated.write_text(BANNER + PARENT.replace("Llama", "Mistral"))
    api.fix([str(generated)])
    assert planted.read_text() == PARENT
    assert "torch.int64" in generated.read_text()  # the file asked for is fixed all the same


def large_tree(root: Path) -> list[Path]:
    """A tree large enough for the result cache, with a configuration at its root, which holds the cache."""
    (root / "pyproject.toml").write_text(CONFIG)
    return tree_of(root / "src", LARGE_RUN)


def test_a_dangling_gitignore_link_in_the_cache_folder_creates_nothing(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    large_tree(root)
    (root / FOLDER).mkdir()
    target = tmp_path / "created-by-the-run"
    (root / FOLDER / ".gitignore").symlink_to(target)
    first = api.check([str(root)])
    assert not target.exists()
    assert len(first.findings) == LARGE_RUN
    assert [d.path for d in api.check([str(root)]).findings] == [d.path for d in first.findings]


def test_a_linked_cache_folder_is_ignored_not_written_through(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    large_tree(root)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / FOLDER).symlink_to(elsewhere)
    assert len(api.check([str(root)]).findings) == LARGE_RUN
    assert list(elsewhere.iterdir()) == []


# Special files and unbounded input


def test_a_fifo_among_the_paths_is_a_finding_for_check_and_fix(tmp_path: Path) -> None:
    tree_of(tmp_path, 1)
    os.mkfifo(tmp_path / "pipe.py")
    for command in ("check", "fix"):
        result = run_limited(command, ".", cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert "pipe.py:1:1: RPL901 cannot read: not a regular file but a FIFO" in result.stdout
    assert (tmp_path / "m000.py").read_text() == FIXED


def test_a_fifo_in_place_of_the_cache_file_is_ignored(tmp_path: Path) -> None:
    large_tree(tmp_path)
    api.check([str(tmp_path)])
    [cache_file] = (tmp_path / FOLDER).glob("check-*.json")
    cache_file.unlink()
    os.mkfifo(cache_file)
    result = run_limited("check", ".", cwd=tmp_path)
    assert result.returncode == 1 and f"Found {LARGE_RUN} findings." in result.stdout, result.stderr


def test_a_link_to_dev_zero_is_a_finding_not_a_read_without_end(tmp_path: Path) -> None:
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    result = run_limited("check", "zero.py", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stdout.startswith("zero.py:1:1: RPL901 cannot read: not a regular file but a device")


def test_a_baseline_that_is_dev_zero_is_a_one_line_error(tmp_path: Path) -> None:
    tree_of(tmp_path, 1)
    result = run_limited("check", ".", "--baseline", "/dev/zero", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        "rope-lint: error: cannot read baseline /dev/zero: not a regular file but a device, which is never read\n"
    )


def test_a_source_file_over_50_mb_is_a_finding(tmp_path: Path) -> None:
    big = tmp_path / "big.py"
    with big.open("wb") as stream:  # sparse: the size without the disk
        stream.truncate(51 << 20)
    [finding] = api.check([str(big)]).findings
    assert (finding.code, finding.message) == (
        "RPL901",
        "cannot read: larger than the 50 MB a run reads of such a file",
    )


def test_a_baseline_over_200_mb_is_a_one_line_error(tmp_path: Path) -> None:
    tree_of(tmp_path, 1)
    baseline = tmp_path / "baseline.json"
    with baseline.open("wb") as stream:
        stream.truncate(201 << 20)
    with pytest.raises(api.RunError, match="larger than the 200 MB a run reads"):
        api.check([str(tmp_path)], baseline=baseline)


def test_a_baseline_nested_100000_deep_is_a_one_line_error(tmp_path: Path) -> None:
    tree_of(tmp_path, 1)
    baseline = tmp_path / "baseline.json"
    baseline.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(api.RunError, match="not a rope-lint baseline") as raised:
        api.check([str(tmp_path)], baseline=baseline)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("value", ["1e400", "true", "-1"])
def test_a_cache_entry_with_a_malformed_value_is_checked_again(tmp_path: Path, value: str) -> None:
    large_tree(tmp_path)
    first = api.check([str(tmp_path)]).findings
    [cache_file] = (tmp_path / FOLDER).glob("check-*.json")
    loaded = json.loads(cache_file.read_text())
    [key] = entries = loaded["results"]  # every file has the same bytes
    entries[key][0][3] = "LINE"  # the finding's line
    cache_file.write_text(json.dumps(loaded).replace('"LINE"', value))
    assert api.check([str(tmp_path)]).findings == first


@pytest.mark.parametrize("value", ['"careless"', "[]", "null", "1e400"])
def test_a_cache_entry_with_a_malformed_fix_safety_is_checked_again(tmp_path: Path, value: str) -> None:
    large_tree(tmp_path)
    first = api.check([str(tmp_path)]).findings
    assert first[0].fix is not None
    [cache_file] = (tmp_path / FOLDER).glob("check-*.json")
    loaded = json.loads(cache_file.read_text())
    [key] = entries = loaded["results"]
    entries[key][0][7][0] = "SAFETY"  # the fix's safety
    cache_file.write_text(json.dumps(loaded).replace('"SAFETY"', value))
    assert api.check([str(tmp_path)]).findings == first


def test_a_utf16_coding_cookie_is_the_same_error_for_check_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "cookie.py"
    data = b"# coding: utf-16\n" + HAZARD.encode()
    path.write_bytes(data)
    checked = api.check([str(path)]).findings
    fixed = api.fix([str(path)])
    assert [(d.code, d.message) for d in fixed.remaining] == [(d.code, d.message) for d in checked]
    assert [d.code for d in checked] == ["RPL901"] and "utf-16" in checked[0].message
    assert path.read_bytes() == data


def test_a_utf16_coding_cookie_without_a_hazard_passes_check_and_fix_alike(tmp_path: Path) -> None:
    """A check never decodes a file that holds no rule's trigger; nor does a fix, so both pass it."""
    path = tmp_path / "cookie.py"
    data = b"# coding: utf-16\nx = 1\n"
    path.write_bytes(data)
    assert api.check([str(path)]).findings == []
    assert api.fix([str(path)]).remaining == []
    assert path.read_bytes() == data


# What a killed run leaves


def test_stale_temporaries_of_the_folders_fixed_are_removed(tmp_path: Path) -> None:
    fixed, other = tmp_path / "fixed", tmp_path / "other"
    tree_of(fixed, 1)
    other.mkdir()
    an_hour_ago = time.time() - 3600
    stale = fixed / ".m000.py.ab_cd123.rope-lint"
    fresh = fixed / ".m000.py.zz_cd123.rope-lint"  # may be a run going on beside this one
    unlike = fixed / ".m000.py.ab_cd123.rope-lint.keep"
    linked = fixed / ".m000.py.ln_cd123.rope-lint"
    elsewhere = other / ".m000.py.ab_cd123.rope-lint"  # in a folder this run does not fix
    for path in (stale, fresh, unlike, elsewhere):
        path.write_text("x")
    linked.symlink_to(unlike)
    for path in (stale, unlike, elsewhere):
        os.utime(path, (an_hour_ago, an_hour_ago))
    os.utime(linked, (an_hour_ago, an_hour_ago), follow_symlinks=False)
    api.fix([str(fixed)])
    assert not stale.exists()
    assert fresh.exists() and unlike.exists() and linked.is_symlink() and elsewhere.exists()


def test_the_workers_of_a_killed_fix_stop_writing(tmp_path: Path) -> None:
    """A fix spread over worker processes, its main process killed as soon as it has written a file: a second later
    no file has changed since the kill. Enough files that their writes take several polls (120 took 30 ms, within one
    poll of a loaded machine: the run once ended before the kill)."""
    files = tree_of(tmp_path, 480, "import torch\n\nTABLE = torch.arange(4096, dtype=torch.float32)\n")
    original = files[0].read_bytes()
    # A session of its own, so that whatever outlives the kill can be stopped at the end of the test.
    process = subprocess.Popen(
        [sys.executable, "-m", "rope_lint", "fix", "."],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while all(path.read_bytes() == original for path in files) and time.monotonic() < deadline:
            time.sleep(0.005)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        at_kill = [path.read_bytes() for path in files]
        assert any(data != original for data in at_kill), "no file was written within a minute"
        assert not all(data != original for data in at_kill), "the run ended before the kill"
        time.sleep(1)
        assert [path.read_bytes() for path in files] == at_kill
    finally:
        with contextlib.suppress(ProcessLookupError):  # the session is gone with its processes
            os.killpg(process.pid, signal.SIGKILL)
