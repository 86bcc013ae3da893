"""The result cache of large runs (rope_lint/cache.py): what it writes and where, that a warm run checks only what
changed, that a change of selection or configuration is never answered from another's entries, and that `--no-cache`,
a corrupt cache or an unwritable folder leave a run's output as it would be without one."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from helpers import imported_by_check, rope_lint

from rope_lint import api, engine
from rope_lint.cache import FOLDER, ResultCache
from rope_lint.diagnostics import Diagnostic
from rope_lint.engine import LARGE_RUN, Settings, check_paths
from rope_lint.rules import CATALOG, select_rules
from rope_lint.transformers import generated

# Every file holds a trigger, so that every one is parsed on a cold run; three of them hold a hazard.
CLEAN = "import torch\n\n\ndef width_{index}(x):\n    return torch.arange(x.shape[-1])\n"
FLOAT_ARANGE = "import torch\n\n\ndef positions(n):\n    return torch.arange(n, dtype=torch.float16)\n"
INT_ARANGE = "import torch\n\n\ndef positions(n):\n    return torch.arange(n, dtype=torch.int64)\n"
LSE_MERGE = "import torch\n\n\ndef merge(a, b):\n    return torch.log(torch.exp(a) + torch.exp(b))\n"
PYPROJECT = "[tool.rope-lint]\n"


def tree(root: Path, count: int = LARGE_RUN + 2, pyproject: str = PYPROJECT) -> list[Path]:
    """`count` files under root/pkg, the configuration at root: two float aranges, one log-sum-exp merge, the rest
    clean."""
    (root / "pyproject.toml").write_text(pyproject)
    package = root / "pkg"
    package.mkdir()
    contents = {"hazard_0.py": FLOAT_ARANGE, "hazard_1.py": FLOAT_ARANGE, "merge.py": LSE_MERGE}
    contents.update({f"clean_{index:02}.py": CLEAN.format(index=index) for index in range(count - len(contents))})
    for name, text in contents.items():
        (package / name).write_text(text)
    return sorted(package.iterdir())


def cache_files(root: Path) -> list[Path]:
    return sorted((root / FOLDER).glob("check-*.json"))


def check(root: Path, *args: str) -> tuple[int, str]:
    result = rope_lint("check", *args, ".", cwd=root)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stdout


def test_a_large_run_writes_the_cache_at_the_config_root_and_a_second_run_reports_the_same(tmp_path: Path) -> None:
    tree(tmp_path)
    uncached = check(tmp_path, "--no-cache")
    # Run from the package folder: the cache belongs beside pyproject.toml, not in the working directory.
    first = check(tmp_path / "pkg")
    assert (tmp_path / FOLDER).is_dir() and not (tmp_path / "pkg" / FOLDER).exists()
    assert "*" in (tmp_path / FOLDER / ".gitignore").read_text().splitlines()
    assert len(cache_files(tmp_path)) == 1
    second = check(tmp_path / "pkg")
    assert first == second
    assert first[0] == 1 and first[1].count(": RPL101 ") == 2 and first[1].count(": RPL301 ") == 1
    assert check(tmp_path) == uncached


@pytest.fixture
def checked_paths(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files actually checked (read, parsed, ruled on) in this process, in order."""
    # One core: the files are checked here, where the calls can be counted, not in a pool.
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    checked: list[Path] = []
    real = engine._check_bytes

    def counting(path: Path, data: bytes, settings: Settings) -> list[Diagnostic]:
        checked.append(path)
        return real(path, data, settings)

    monkeypatch.setattr(engine, "_check_bytes", counting)
    return checked


def cached_run(root: Path, files: list[Path], settings: Settings) -> list[Diagnostic]:
    """One run the way `check` makes it: a cache loaded from disk, used, and saved."""
    cache = ResultCache.for_run(root, [rule.code for rule in settings.rules], settings.per_file_ignores)
    found = check_paths(files, settings, cache)
    cache.save()
    return found


def found_in(diagnostics: list[Diagnostic]) -> list[tuple[str, str]]:
    return [(Path(d.path).name, d.code) for d in diagnostics]


def test_a_warm_run_checks_only_the_files_that_changed(tmp_path: Path, checked_paths: list[Path]) -> None:
    files = tree(tmp_path)
    settings = Settings(select_rules(["ALL"], []), tmp_path)
    cold = cached_run(tmp_path, files, settings)
    assert sorted(checked_paths) == files
    assert found_in(cold) == [("hazard_0.py", "RPL101"), ("hazard_1.py", "RPL101"), ("merge.py", "RPL301")]

    checked_paths.clear()
    assert cached_run(tmp_path, files, settings) == cold
    assert checked_paths == []

    # A fixed hazard: checked again, and its old finding is gone rather than replayed from the cache.
    (tmp_path / "pkg" / "hazard_0.py").write_text(INT_ARANGE)
    assert found_in(cached_run(tmp_path, files, settings)) == [("hazard_1.py", "RPL101"), ("merge.py", "RPL301")]
    assert checked_paths == [tmp_path / "pkg" / "hazard_0.py"]

    # A new hazard, in bytes the cache has never seen, in a file it knew as clean.
    checked_paths.clear()
    (tmp_path / "pkg" / "clean_05.py").write_text(FLOAT_ARANGE.replace("positions", "steps"))
    assert found_in(cached_run(tmp_path, files, settings)) == [
        ("clean_05.py", "RPL101"),
        ("hazard_1.py", "RPL101"),
        ("merge.py", "RPL301"),
    ]
    assert checked_paths == [tmp_path / "pkg" / "clean_05.py"]


@pytest.fixture
def read_paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files whose bytes the run reads, in this process (one core), in order."""
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    read: list[str] = []
    real = engine.read_bytes

    def counting(path: str) -> bytes | Diagnostic:
        read.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(engine, "read_bytes", counting)
    return read


def test_a_warm_run_imports_no_rule(tmp_path: Path) -> None:
    """A run whose every file the cache answers checks none, so it imports no rule, nor the analyses only rules use,
    nor what parses a file (the prefilter, `ast`, the lookup of a helper's callers, the origins of a generated file),
    nor `pathlib`, `signal` or `hashlib` (which loads OpenSSL: `files.digest` takes BLAKE2b from where hashlib does):
    each would cost a warm check a twentieth of its time or more (`rules.Selection`, `rules.payloads`, the imports
    inside `engine`). A file that changed brings the rules back."""
    tree(tmp_path)
    rule_modules = tuple(f"rope_lint.rules.{entry.module}" for entry in CATALOG)
    analyses = ("rope_lint.rules.analysis.rotary", "rope_lint.rules.analysis.autocast", "rope_lint.rules.base")
    parsing = (
        "ast",
        "rope_lint.prefilter",
        "rope_lint.rules.analysis.context",
        "rope_lint.rules.analysis.helper_uses",
        "rope_lint.transformers.generated",
    )
    imported_by_check(tmp_path, ".", (), settled=True)  # the cold run, which learns each file's status
    warm = imported_by_check(tmp_path, ".", (*rule_modules, *analyses, *parsing, "pathlib", "signal", "hashlib"), True)
    assert warm == []
    (tmp_path / "pkg" / "clean_00.py").write_text(FLOAT_ARANGE + "# a text the cache has not seen\n")
    selected = [f"rope_lint.rules.{entry.module}" for entry in CATALOG if not entry.informational]  # the default
    assert imported_by_check(tmp_path, ".", rule_modules) == sorted(selected)


def test_a_warm_run_reads_no_file_whose_status_is_as_the_cache_saw_it(
    tmp_path: Path, read_paths: list[str], settled_files: None
) -> None:
    files = tree(tmp_path)
    settings = Settings(select_rules(["ALL"], []), tmp_path)
    cold = cached_run(tmp_path, files, settings)
    read_paths.clear()
    assert cached_run(tmp_path, files, settings) == cold
    assert read_paths == []

    # The same size and modification time, other bytes: the change time tells (one tick of the clock later).
    hazard = tmp_path / "pkg" / "hazard_0.py"
    before = hazard.stat()
    time.sleep(0.05)
    hazard.write_text(FLOAT_ARANGE.replace("torch.float16)", "torch.int64)  "))
    os.utime(hazard, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert hazard.stat().st_size == before.st_size and hazard.stat().st_mtime_ns == before.st_mtime_ns
    assert found_in(cached_run(tmp_path, files, settings)) == [("hazard_1.py", "RPL101"), ("merge.py", "RPL301")]
    assert set(read_paths) == {"hazard_0.py"}  # looked up by its bytes, then checked

    # Moved over by a file of the same size and times: another inode.
    read_paths.clear()
    replacement = tmp_path / "replacement"
    replacement.write_text(FLOAT_ARANGE.replace("torch.float16)", "torch.int32)  "))
    os.utime(replacement, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(replacement, tmp_path / "pkg" / "hazard_1.py")
    assert found_in(cached_run(tmp_path, files, settings)) == [("merge.py", "RPL301")]
    assert set(read_paths) == {"hazard_1.py"}


def test_a_file_changed_within_the_clock_s_resolution_is_read_on_every_run(
    tmp_path: Path, read_paths: list[str]
) -> None:
    """Without the settled clock, every file of the tree has just been written: a write in the same tick as the
    run's look at it would leave its status as it was, so the run reads it again, and the findings follow its bytes."""
    files = tree(tmp_path)
    settings = Settings(select_rules(["ALL"], []), tmp_path)
    cold = cached_run(tmp_path, files, settings)
    read_paths.clear()
    assert cached_run(tmp_path, files, settings) == cold
    assert sorted(read_paths) == sorted(path.name for path in files)


def test_a_file_with_the_content_of_another_is_reported_under_its_own_path(
    tmp_path: Path, checked_paths: list[Path]
) -> None:
    files = tree(tmp_path)
    settings = Settings(select_rules(["ALL"], []), tmp_path)
    cached_run(tmp_path, files, settings)
    checked_paths.clear()
    copy = tmp_path / "pkg" / "zz_copy.py"
    copy.write_text(FLOAT_ARANGE)
    found = cached_run(tmp_path, [*files, copy], settings)
    assert checked_paths == [], "same bytes, same key: the copy's findings come from the cache"
    assert [d.path for d in found if d.path.endswith("zz_copy.py")] == [str(copy)]


def test_another_selection_is_answered_by_its_own_entries(tmp_path: Path) -> None:
    tree(tmp_path)
    floats = check(tmp_path, "--select", "RPL1")
    assert floats[1].count(": RPL101 ") == 2 and ": RPL301 " not in floats[1]
    merges = check(tmp_path, "--select", "RPL3")
    assert merges[1].count(": RPL301 ") == 1 and ": RPL101 " not in merges[1]
    assert merges == check(tmp_path, "--select", "RPL3", "--no-cache")
    assert len(cache_files(tmp_path)) == 2
    # The first selection's entries survive the second's run.
    assert check(tmp_path, "--select", "RPL1") == floats


def test_a_per_file_ignores_change_is_honoured_on_the_next_run(tmp_path: Path) -> None:
    tree(tmp_path)
    before = check(tmp_path)
    assert "pkg/hazard_0.py:" in before[1]
    (tmp_path / "pyproject.toml").write_text(
        PYPROJECT + '[tool.rope-lint.per-file-ignores]\n"pkg/hazard_0.py" = ["RPL101"]\n'
    )
    ignoring = check(tmp_path)
    assert "pkg/hazard_0.py:" not in ignoring[1] and "pkg/hazard_1.py:" in ignoring[1]
    assert ignoring == check(tmp_path, "--no-cache")
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    assert check(tmp_path) == before


def test_no_cache_writes_nothing(tmp_path: Path) -> None:
    tree(tmp_path)
    returncode, output = check(tmp_path, "--no-cache")
    assert returncode == 1 and output.count(": RPL") == 3
    assert not (tmp_path / FOLDER).exists()


def poison(cache_file: Path) -> None:
    """Every entry of a cache file made to answer with a finding that no check makes."""
    loaded = json.loads(cache_file.read_bytes())
    fake = ["RPL101", "float-arange", "poisoned entry", 99, 0, 99, 1, None, []]
    loaded["results"] = {key: [fake] for key in loaded["results"]}
    cache_file.write_text(json.dumps(loaded))


def test_no_cache_reads_no_cache(tmp_path: Path) -> None:
    tree(tmp_path)
    truth = check(tmp_path)
    [cache_file] = cache_files(tmp_path)
    poison(cache_file)
    poisoned = cache_file.read_bytes()
    assert "poisoned entry" in check(tmp_path)[1], "the poisoned file is the one a cached run reads"
    assert check(tmp_path, "--no-cache") == truth
    assert cache_files(tmp_path) == [cache_file] and cache_file.read_bytes() == poisoned


CORRUPTIONS = {
    "garbage": b"garbage \x00\xff\xfe not json",
    "empty": b"",
    "truncated": json.dumps({"0" * 64: []}).encode()[:-5],
    "not a dict": json.dumps(["a", "list"]).encode(),
    "an older layout": json.dumps({"0" * 64: []}).encode(),
    "parts of the wrong kinds": json.dumps(
        {"results": {"0" * 64: "x"}, "files": {"/a.py": [], "/b.py": "x"}, "packages": {"/": [1, [["a"]]]}}
    ).encode(),
    "deeply nested": b"[" * 100_000,
    # A pickle that imports a module when loaded: a cache that could run code could run anyone's.
    "a pickle": b"\x80\x04cno_such_module\nName\n.",
}


@pytest.mark.parametrize("garbage", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_a_corrupt_cache_file_is_ignored_and_replaced(tmp_path: Path, garbage: bytes) -> None:
    tree(tmp_path)
    truth = check(tmp_path)
    [cache_file] = cache_files(tmp_path)
    cache_file.write_bytes(garbage)
    assert check(tmp_path) == truth
    assert isinstance(json.loads(cache_file.read_bytes()), dict), "rewritten whole"
    assert check(tmp_path) == truth


def test_a_cache_folder_that_cannot_be_written_leaves_the_run_as_it_was(tmp_path: Path) -> None:
    tree(tmp_path)
    truth = check(tmp_path, "--no-cache")
    (tmp_path / FOLDER).write_text("a file where the cache folder would be\n")
    assert check(tmp_path) == truth
    assert check(tmp_path) == truth
    assert (tmp_path / FOLDER).read_text() == "a file where the cache folder would be\n"


def test_only_a_run_of_at_least_large_run_files_is_cached(tmp_path: Path) -> None:
    small, large = tmp_path / "small", tmp_path / "large"
    small.mkdir()
    large.mkdir()
    tree(small, count=LARGE_RUN - 1)
    tree(large, count=LARGE_RUN)
    assert check(small) == check(small, "--no-cache")
    assert check(small)[1].count(": RPL") == 3
    assert not (small / FOLDER).exists()
    check(large)
    assert len(cache_files(large)) == 1


def test_stale_cache_files_are_removed_when_the_cache_is_written(tmp_path: Path) -> None:
    tree(tmp_path)
    folder = tmp_path / FOLDER
    folder.mkdir()
    month_ago, day_ago = time.time() - 31 * 24 * 3600, time.time() - 24 * 3600
    for name, moment in [("check-old.json", month_ago), ("check-recent.json", day_ago), ("notes", month_ago)]:
        (folder / name).write_text("{}")
        os.utime(folder / name, (moment, moment))
    check(tmp_path)
    remaining = sorted(path.name for path in folder.iterdir())
    assert "check-old.json" not in remaining
    assert {"check-recent.json", "notes", ".gitignore"} <= set(remaining) and len(cache_files(tmp_path)) == 2


def test_baseline_accepts_no_cache(tmp_path: Path) -> None:
    tree(tmp_path)
    written = rope_lint("baseline", "--no-cache", "-o", "baseline.json", ".", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert "Wrote 3 findings" in written.stderr
    assert not (tmp_path / FOLDER).exists()
    # Without the flag, baseline goes through the cache as check does, and writes the same file.
    first = (tmp_path / "baseline.json").read_text()
    cached = rope_lint("baseline", "-o", "baseline.json", ".", cwd=tmp_path)
    assert cached.returncode == 0 and (tmp_path / "baseline.json").read_text() == first
    assert len(cache_files(tmp_path)) == 1
    assert check(tmp_path, "--baseline", "baseline.json") == (0, "All checks passed!\n")


def test_a_content_key_is_128_bits_and_tells_bytes_and_ignored_codes_apart() -> None:
    """Each key is written twice in the cache, which a warm run reads whole: 128 bits of SHA-256, 32 hex digits."""
    from rope_lint.cache import content_key

    keys = {content_key(b"x = 1\n", []), content_key(b"x = 2\n", []), content_key(b"x = 1\n", ["RPL101"])}
    assert len(keys) == 3 and all(len(key) == 32 and int(key, 16) >= 0 for key in keys)


# A transformers tree in miniature: Mistral's modeling file generated from its modular source, which takes LlamaScaler
# from Llama's (each finding of the generated file names where its statement is written).
BANNER = "# This file was automatically generated from src/transformers/models/mistral/modular_mistral.py.\n"
LLAMA = """import torch
from torch import nn


class LlamaScaler(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = torch.arange(dim, dtype=torch.float32)
"""
MODULAR = "from ..llama.modeling_llama import LlamaScaler\n\n\nclass MistralScaler(LlamaScaler):\n    pass\n"


def test_a_warm_run_names_a_generated_files_origins_from_the_cache_while_the_files_they_are_read_from_stay(
    tmp_path: Path, settled_files: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The origins are found again only when a file they were read from changes, or one they looked for and did not
    find appears: here the modular source, then the parent model's file, which the generated file does not mention."""
    tree(tmp_path)
    models = tmp_path / "transformers" / "models"
    (models / "llama").mkdir(parents=True)
    (models / "mistral").mkdir()
    (tmp_path / "transformers" / "__init__.py").write_text("")
    (models / "llama" / "modeling_llama.py").write_text(LLAMA)
    (models / "mistral" / "modeling_mistral.py").write_text(BANNER + LLAMA.replace("Llama", "Mistral"))
    looked_up: list[str] = []  # the files whose origins a run finds
    find = generated.origin_notes

    def finding(path: str, lines: list[int]) -> generated.OriginNotes:
        looked_up.append(Path(path).name)
        return find(path, lines)

    monkeypatch.setattr(generated, "origin_notes", finding)

    def mistral_finding() -> str:
        looked_up.clear()
        found = [d.message for d in api.check([str(tmp_path)]).findings if d.path.endswith("modeling_mistral.py")]
        assert len(found) == 1
        return found[0]

    # No modular source yet: nothing to name, and nothing to find while it stays away.
    assert not mistral_finding().endswith(")") and looked_up == ["modeling_mistral.py"]
    assert not mistral_finding().endswith(")") and looked_up == []
    (models / "mistral" / "modular_mistral.py").write_text(MODULAR)
    named = "(generated from modular_mistral.py, which inherits LlamaScaler from ../llama/modeling_llama.py:8)"
    assert mistral_finding().endswith(named) and looked_up == ["modeling_mistral.py"]
    assert mistral_finding().endswith(named) and looked_up == []
    # The parent's statement two lines lower: the generated file is as it was, and its finding's origin follows.
    (models / "llama" / "modeling_llama.py").write_text("# one\n# two\n" + LLAMA)
    assert mistral_finding().endswith(named.replace(":8)", ":10)")) and looked_up == ["modeling_mistral.py"]
    assert mistral_finding().endswith(named.replace(":8)", ":10)")) and looked_up == []


def test_a_warm_run_of_a_tree_with_a_generated_file_imports_nothing_that_parses(tmp_path: Path) -> None:
    tree(tmp_path)
    models = tmp_path / "transformers" / "models"
    for folder in ("llama", "mistral"):
        (models / folder).mkdir(parents=True)
    (tmp_path / "transformers" / "__init__.py").write_text("")
    (models / "llama" / "modeling_llama.py").write_text(LLAMA)
    (models / "mistral" / "modular_mistral.py").write_text(MODULAR)
    (models / "mistral" / "modeling_mistral.py").write_text(BANNER + LLAMA.replace("Llama", "Mistral"))
    parsing = ("ast", "rope_lint.prefilter", "rope_lint.transformers.generated")
    assert "rope_lint.transformers.generated" in imported_by_check(tmp_path, ".", parsing, settled=True)
    assert imported_by_check(tmp_path, ".", parsing, settled=True) == []
