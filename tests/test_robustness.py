"""Never lose a user's code: bad input becomes a one-line finding and the run goes on; a fix is
all or nothing per file; nothing that is read is run."""

from __future__ import annotations

import ast
import difflib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from helpers import REPO, rope_lint, unpacked_wheel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rope_lint.engine import LARGE_RUN, Settings, check_paths, check_source, map_files
from rope_lint.fix import apply as fixes
from rope_lint.fix.apply import apply_fixes, fixable
from rope_lint.rules import select_rules

HAZARD = "import torch\nt = torch.arange(4096, dtype=torch.float32)\n"
FIXED = "import torch\nt = torch.arange(4096, dtype=torch.int64).float()\n"


def one_line_per_finding(output: str) -> None:
    assert "Traceback" not in output
    for line in output.splitlines()[:-1]:
        assert line.count(": RPL") == 1, line


@pytest.fixture
def bad_inputs(tmp_path: Path) -> Path:
    (tmp_path / "good.py").write_text(HAZARD)
    # Each holds a hazard (a float bound): a file with only integer enumerations is never parsed, so a syntax error in
    # it goes unnoticed (docs/usage.md: only what can match is parsed).
    (tmp_path / "syntax.py").write_text("import torch\ndef f(:\n    torch.arange(3.0)\n")
    (tmp_path / "undecodable.py").write_bytes(b"x = '\xff\xfe arange'\n")
    (tmp_path / "binary.py").write_bytes(b"\x00\x01arange\x00\xff" * 100)
    (tmp_path / "empty.py").write_text("")
    (tmp_path / "nested.py").write_text("import torch\nx = " + "-" * 50_000 + "torch.arange(3.0)\n")
    (tmp_path / "parens.py").write_text("import torch\nx = " + "(" * 50_000 + "torch.arange(3.0)" + ")" * 50_000 + "\n")
    (tmp_path / "chain.py").write_text("import torch\nx = torch.arange(3.0)" + ".t" * 50_000 + "\n")
    (tmp_path / "long.py").write_text("import torch\n" + "y = 1\n" * 100_000 + HAZARD.split("\n")[1] + "\n")
    (tmp_path / "large.py").write_text("import torch\n" + ("# " + "x" * 98 + "\n") * 50_000 + HAZARD.split("\n")[1])
    (tmp_path / "loop_a.py").symlink_to(tmp_path / "loop_b.py")
    (tmp_path / "loop_b.py").symlink_to(tmp_path / "loop_a.py")
    return tmp_path


def test_bad_inputs_become_findings_and_every_other_file_is_checked(bad_inputs: Path) -> None:
    result = rope_lint("check", ".", cwd=bad_inputs)
    assert result.returncode == 2
    one_line_per_finding(result.stdout)
    found = {line.split(":")[0]: line for line in result.stdout.splitlines()[:-1]}
    assert "RPL101" in found["good.py"] and "RPL101" in found["long.py"] and "RPL101" in found["large.py"]
    assert "RPL902 syntax error" in found["syntax.py"]
    assert "RPL901 cannot decode" in found["undecodable.py"] and "RPL901 cannot decode" in found["binary.py"]
    for deep in ("nested.py", "parens.py", "chain.py"):
        assert "RPL902" in found[deep], found[deep]
    assert "RPL901 cannot read: Too many levels of symbolic links" in found["loop_a.py"]
    assert "empty.py" not in found
    assert os.path.getsize(bad_inputs / "large.py") > 5_000_000


def test_fix_of_bad_inputs_fixes_the_rest_and_damages_nothing(bad_inputs: Path) -> None:
    before = {p.name: p.read_bytes() for p in bad_inputs.iterdir() if not p.is_symlink()}
    result = rope_lint("fix", ".", cwd=bad_inputs)
    assert result.returncode == 2
    one_line_per_finding(result.stdout)
    assert (bad_inputs / "good.py").read_text() == FIXED
    for name, data in before.items():
        if name not in ("good.py", "long.py", "large.py"):
            assert (bad_inputs / name).read_bytes() == data, name


def test_an_unreadable_folder_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As root, chmod does not stop reading: make the listing fail the way it does for other users.
    (tmp_path / "locked").mkdir()
    (tmp_path / "good.py").write_text(HAZARD)
    real_scandir = os.scandir

    def scandir(path: object = ".") -> object:
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    from rope_lint.files import Excludes, discover

    found = check_paths(
        discover([str(tmp_path)], Excludes([], tmp_path)), Settings(select_rules(["ALL"], []), tmp_path)
    )
    assert {(Path(d.path).name, d.code) for d in found} == {("good.py", "RPL101"), ("locked", "RPL901")}
    assert "Permission denied" in next(d.message for d in found if d.code == "RPL901")


def test_a_file_deleted_during_the_run_is_reported(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(HAZARD)
    gone = tmp_path / "gone.py"
    found = check_paths([tmp_path / "good.py", gone], Settings(select_rules(["ALL"], []), tmp_path))
    assert [(Path(d.path).name, d.code) for d in found] == [("good.py", "RPL101"), ("gone.py", "RPL901")]


@pytest.mark.parametrize(
    ("original", "expected"),
    [
        (b"# -*- coding: latin-1 -*-\nimport torch\n# caf\xe9\nt = torch.arange(8, dtype=torch.float32)\n", None),
        (b"\xef\xbb\xbfimport torch\r\nt = torch.arange(8, dtype=torch.float32)\r\n", None),
        (b"import torch\r\nx = 1\nt = torch.arange(8, dtype=torch.float32)\r\ny = 2\n", None),
        (b"import torch\nif True:\n\tt = torch.arange(8, dtype=torch.float32)\n", None),
    ],
    ids=["latin-1 cookie", "BOM and CRLF", "mixed line endings", "tabs"],
)
def test_fix_keeps_bytes_outside_the_edit(tmp_path: Path, original: bytes, expected: bytes | None) -> None:
    path = tmp_path / "model.py"
    path.write_bytes(original)
    path.chmod(0o640)
    assert rope_lint("fix", str(path)).returncode == 0
    assert path.read_bytes() == original.replace(b"torch.float32)", b"torch.int64).float()")
    assert path.stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize(
    "head",
    [
        b"# coding=utf-8\n",
        b"# -*- coding: UTF_8 -*-\n",
        b"# vim: set fileencoding=utf-8-unix :\n",
        b"# coding: utf8\n",  # tokenize keeps this name: no shortcut
        b"# coding: latin-1\n",
        b"# coding=utf-8\n# coding: latin-1\n",  # the first line rules
        b"#!/usr/bin/env python\n# coding: latin-1\n",
        b"x = 1  # coding: latin-1\n",  # not a comment line: no cookie
        b"\n# -*- coding: cp1252 -*-\n",
        b"\xef\xbb\xbf# coding: utf-8\n",
        b"# coding: utf-8\rx = 1  # coding: latin-1\n",  # a lone CR does not end the first line for tokenize
    ],
)
def test_the_encoding_is_the_one_python_reads(head: bytes) -> None:
    """Most files say UTF-8 on their first line, and skip `tokenize`; every file gets the encoding it would."""
    import io
    import tokenize

    from rope_lint.files import SourceFile

    data = head + b"import torch\n"
    read_as = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    source = SourceFile.decode(Path("model.py"), data)
    assert (source.encoding, source.bom) == (read_as.removesuffix("-sig"), read_as.endswith("-sig"))


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full, a device that is always full (Linux)")
@pytest.mark.parametrize("buffered", [True, False])
@pytest.mark.parametrize("command", [["check", "fixtures/hazards"], ["rule", "RPL101"]])
def test_output_that_cannot_be_written_is_a_one_line_error(command: list[str], buffered: bool) -> None:
    """Written while the command runs, or flushed as it ends (`command.run`): either way one line, exit 2."""
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    if not buffered:
        environment["PYTHONUNBUFFERED"] = "1"
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "rope_lint", *command], cwd=REPO, stdout=full, stderr=subprocess.PIPE, text=True,
            env=environment,
        )  # fmt: skip
    assert (result.returncode, result.stderr) == (2, "rope-lint: error: No space left on device\n")


def test_a_baseline_that_cannot_be_written_is_a_one_line_error(tmp_path: Path) -> None:
    result = rope_lint("baseline", "fixtures/hazards", "-o", str(tmp_path / "missing" / "baseline.json"), cwd=REPO)
    assert result.returncode == 2
    assert result.stderr == f"rope-lint: error: {tmp_path / 'missing' / 'baseline.json'}: No such file or directory\n"


def test_a_fix_that_would_not_parse_is_not_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import libcst as cst

    from rope_lint.rules.float_arange import FloatArange

    monkeypatch.setattr(FloatArange, "fix", lambda self, node, fix: cst.Name("await"))
    path = tmp_path / "model.py"
    path.write_text(HAZARD)
    outcome = fixes.fix_file(path, Settings([FloatArange()], tmp_path), unsafe=False, diff_only=False)
    assert outcome.error and "would not compile" in outcome.error
    assert path.read_text() == HAZARD
    assert list(tmp_path.iterdir()) == [path], "no temporary file is left behind"


def test_a_fix_that_parses_but_does_not_compile_is_not_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`yield` outside a function parses with `ast` and fails only when compiled."""
    import libcst as cst

    from rope_lint.rules.float_arange import FloatArange

    monkeypatch.setattr(FloatArange, "fix", lambda self, node, fix: cst.parse_expression("(yield)"))
    path = tmp_path / "model.py"
    path.write_text(HAZARD)
    outcome = fixes.fix_file(path, Settings([FloatArange()], tmp_path), unsafe=False, diff_only=False)
    assert outcome.error and "would not compile" in outcome.error and "outside function" in outcome.error
    assert path.read_text() == HAZARD


@pytest.mark.parametrize("stage", ["formatted_like_original", "imports_tidied"])
def test_a_formatted_or_tidied_text_that_does_not_compile_is_written_unformatted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    """ruff runs after the fix is checked: a formatter or tidier that returns broken text must not reach the file.
    `return` at module level parses with `ast` and fails to compile, the case `ast.parse` alone would let through."""

    def broken(path: Path, original: str, fixed: str, *regions: object) -> str:
        return "return 1\n" + fixed

    from rope_lint.rules.float_arange import FloatArange

    monkeypatch.setattr(fixes, stage, broken)
    path = tmp_path / "model.py"
    path.write_text(HAZARD)
    outcome = fixes.fix_file(path, Settings([FloatArange()], tmp_path), unsafe=False, diff_only=False)
    assert outcome.error is None
    assert path.read_text() == FIXED
    compile(path.read_text(), str(path), "exec")


def test_a_fix_compiles_the_draft_only_where_ruffs_formatting_of_it_does_not_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ruff formats only code that parses and keeps its syntax tree, so a formatting that compiles vouches for the
    draft: the fix compiles the texts ruff made, and the draft only where they do not compile. The enumerations'
    fixture has fixes that ruff formats and an import that the tidy adds."""
    path = tmp_path / "enumeration_bounds.py"
    shutil.copy(REPO / "fixtures" / "hazards" / path.name, path)
    settings = Settings(select_rules(["ALL"], []), tmp_path)
    draft = fixes.drafted(path, settings, unsafe=True)
    assert isinstance(draft, fixes.FixDraft)
    compiled: list[str] = []
    real_compile_error = fixes.compile_error
    monkeypatch.setattr(fixes, "compile_error", lambda text: compiled.append(text) or real_compile_error(text))
    outcome = fixes.fix_file(path, settings, unsafe=True, diff_only=False)
    assert outcome.error is None and outcome.fixed
    assert len(compiled) == 2 and compiled[-1] == path.read_text() != compiled[0]
    assert draft.result.text not in compiled


def test_a_file_changed_since_it_was_read_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "model.py"
    path.write_text(HAZARD)
    real_apply = fixes.unverified_fixes

    def apply_while_someone_edits(source: str, diagnostics: list, package: object = None) -> fixes.FixResult:
        path.write_text(HAZARD + "# edited meanwhile\n")
        return real_apply(source, diagnostics, package)

    monkeypatch.setattr(fixes, "unverified_fixes", apply_while_someone_edits)
    outcome = fixes.fix_file(path, Settings(select_rules(["ALL"], []), tmp_path), unsafe=False, diff_only=False)
    assert outcome.error and "changed on disk" in outcome.error
    assert path.read_text() == HAZARD + "# edited meanwhile\n"


def test_a_failing_rule_is_reported_with_its_code_and_the_rest_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rope_lint.rules.default_dtype_promotion import DefaultDtypePromotion

    def broken(self: object, ctx: object) -> list:
        raise ValueError("boom")

    monkeypatch.setattr(DefaultDtypePromotion, "check", broken)
    found = check_source("model.py", HAZARD, Settings(select_rules(["ALL"], []), tmp_path))
    assert {(d.code, d.message) for d in found} >= {("RPL903", "rule RPL103 failed: ValueError: boom")}
    assert any(d.code == "RPL101" for d in found)


def test_check_and_fix_never_run_the_code_they_read(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    (tmp_path / "trap.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\nraise SystemExit('imported')\n" + HAZARD
    )
    (tmp_path / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    assert rope_lint("check", str(tmp_path)).returncode == 1
    assert rope_lint("fix", "--unsafe-fixes", str(tmp_path)).returncode == 0
    assert not marker.exists()


def test_killing_a_fix_leaves_every_file_old_or_new(tmp_path: Path) -> None:
    """A fix run over the transformers corpus, killed at random moments: each file compiles and is the old or the
    new version, never half of one."""
    models = unpacked_wheel("transformers", "4.37.2") / "transformers" / "models"
    settings_all = Settings(select_rules(["RPL1", "RPL2"], []), models)
    # The files with findings: the ones a fix writes.
    touched = sorted({Path(d.path) for d in check_paths(sorted(models.rglob("modeling_*.py")), settings_all)})
    old = {path.relative_to(models): path.read_bytes() for path in touched}
    reference = tmp_path / "reference"
    for relative, data in old.items():
        (reference / relative).parent.mkdir(parents=True, exist_ok=True)
        (reference / relative).write_bytes(data)
    rope_lint("fix", "--unsafe-fixes", "--select", "RPL1,RPL2", str(reference))
    new = {relative: (reference / relative).read_bytes() for relative in old}
    assert sum(new[r] != old[r] for r in old) > 20
    rng = random.Random(0)
    for attempt in range(3):
        victim = tmp_path / f"run{attempt}"
        shutil.copytree(reference, victim, ignore=shutil.ignore_patterns("*"))
        for relative, data in old.items():
            (victim / relative).parent.mkdir(parents=True, exist_ok=True)
            (victim / relative).write_bytes(data)
        command = [sys.executable, "-m", "rope_lint", "fix", "--unsafe-fixes", "--select", "RPL1,RPL2", str(victim)]
        # A session of its own, so that the kill takes the worker processes too, mid-write, and none outlives the test.
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO, start_new_session=True
        )
        time.sleep(rng.uniform(0.5, 4.0))
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        for relative in old:
            data = (victim / relative).read_bytes()
            assert data in (old[relative], new[relative]), f"run {attempt}: {relative} is neither old nor new"
            compile(data, str(relative), "exec")
        leftovers = [p for p in victim.rglob("*") if p.is_file() and Path(p.relative_to(victim)) not in old]
        assert all(p.name.endswith(".rope-lint") for p in leftovers)  # at most an unrenamed temporary file


# Generated programs: hazard snippets mixed with arbitrary code; a fix must keep each one compiling.
SNIPPETS = [
    "t = torch.arange(n, dtype=torch.float32)",
    "u = torch.arange(0.0, d, 2.0)",
    "inv = 1.0 / (10000 ** (torch.arange(0, d, 2) / d))",
    "lse = torch.log(torch.exp(a) + torch.exp(b))",
    "s = torch.log(1 + torch.exp(x))",
    "e = torch.exp(x) - 1",
    "q = torch.log(x + 1e-8)",
    "r = torch.arange(0, 1, 0.1)",
    "k = torch.arange(n, dtype=torch.int64).float()",
]
FILLER = st.sampled_from(
    ["x = 1", "y = [i for i in range(3)]", "# a comment with torch.arange(3) in it", "z = 'torch.exp(x) - 1'", "pass"]
)
ASSIGNMENT = st.from_regex(r"w[a-z]{0,6} = [1-9][0-9]{0,2}", fullmatch=True)
STATEMENT = st.one_of(st.sampled_from(SNIPPETS), FILLER, ASSIGNMENT)


@st.composite
def programs(draw: st.DrawFn) -> str:
    body = [*draw(st.lists(STATEMENT, min_size=1, max_size=12)), "pass"]  # a block is never only comments
    wrap = draw(st.sampled_from(["module", "function", "class"]))
    if wrap == "function":
        body = ["def f(n, d, a, b, x):", *(f"    {line}" for line in body)]
    elif wrap == "class":
        body = ["class M:", "    def forward(self, n, d, a, b, x):", *(f"        {line}" for line in body)]
    return "import torch\n" + "\n".join(body) + "\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_fix_parses_is_idempotent_and_changes_only_reported_ranges(program: str) -> None:
    settings_all = Settings(select_rules(["RPL1", "RPL3"], []), Path("."))
    found = check_source("generated.py", program, settings_all)
    fixed = apply_fixes(program, fixable(found, unsafe=True)).text
    ast.parse(fixed)
    assert apply_fixes(fixed, fixable(check_source("generated.py", fixed, settings_all), unsafe=True)).text == fixed
    flagged = {line for d in found for line in range(d.start.line, d.end.line + 1)}
    imports = {f"import {d.fix.adds_import}" for d in fixable(found, unsafe=True) if d.fix and d.fix.adds_import}
    old_lines, new_lines = program.splitlines(), fixed.splitlines()
    # These fixes rewrite expressions; the only lines they add are the imports they ask for (`import math` for an
    # end rounded up), with the blank line that sets them apart.
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, first, last, new_first, new_last in matcher.get_opcodes():
        if tag == "insert":
            assert set(new_lines[new_first:new_last]) <= {*imports, ""}, new_lines[new_first:new_last]
        elif tag != "equal":
            changed = range(first + 1, last + 1)
            assert all(number in flagged for number in changed), f"lines {list(changed)} changed without a finding"


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("torch.arange(exp)log 1+-*/=:\n\t#'\"0.5x_[]")), max_size=200))
def test_check_never_crashes(text: str) -> None:
    for finding in check_source("noise.py", "import torch\n" + text, Settings(select_rules(["ALL"], []), Path("."))):
        assert finding.code != "RPL903", finding.message


@pytest.mark.parametrize("verbose", [False, True])
def test_a_traceback_reaches_the_user_only_with_verbose(tmp_path: Path, verbose: bool) -> None:
    (tmp_path / "model.py").write_text(HAZARD)
    code = (
        "import sys\n"
        "from rope_lint.rules.float_arange import FloatArange\n"
        "def broken(self, ctx):\n"
        "    raise ValueError('boom')\n"
        "FloatArange.check = broken\n"
        "from rope_lint.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    flags = ["--verbose"] if verbose else []
    result = subprocess.run(
        [sys.executable, "-c", code, "check", *flags, str(tmp_path)], capture_output=True, text=True, cwd=REPO
    )
    assert result.returncode == 2
    assert "RPL903 rule RPL101 failed: ValueError: boom" in result.stdout
    assert ("Traceback" in result.stderr) is verbose


def _name_or_fail(path: Path) -> str:
    if path.name == "f7":
        raise ValueError(f"cannot handle {path}")
    return path.name


def _name_and_process(path: Path) -> tuple[str, int]:
    if path.name == "f0":
        time.sleep(1.0)  # a costly file: whichever process takes it
    return path.name, os.getpid()


# Long-lived processes (this one among them), and fresh ones of 5 files each (this one starts them and does none).
@pytest.mark.parametrize("items_per_process", [None, 5])
def test_a_large_run_spread_over_processes_keeps_the_order_and_raises_a_workers_error(
    items_per_process: int | None,
) -> None:
    files = [Path(f"f{index}") for index in range(LARGE_RUN + 12)]
    done = map_files(_name_and_process, files, 2, items_per_process)
    assert [name for name, _ in done] == [path.name for path in files]
    by_process = Counter(pid for _, pid in done)
    if items_per_process is None:
        # Each long-lived process takes the next file none has taken: while one works on the costly file, the other
        # takes the rest, where fixed shares (every other file) would have kept half of them waiting behind it.
        assert len(by_process) == 2 and os.getpid() in by_process
        assert by_process[done[0][1]] <= 3, by_process
    else:
        assert len(by_process) == -(-len(files) // items_per_process) and os.getpid() not in by_process
        assert max(by_process.values()) == items_per_process
    with pytest.raises(ValueError, match="cannot handle f7"):  # whichever process took f7
        map_files(_name_or_fail, files, 2, items_per_process)


def _name_and_found(found: list[str], path: Path) -> tuple[str, int]:
    return path.name, len(found)


def test_fresh_processes_start_while_their_items_are_still_being_found(monkeypatch) -> None:
    """An iterator's items (the probe's classes, found module by module): a process of 5 starts once its 5 are found,
    and where the next items cannot be found, the processes running are killed and waited for before the error."""
    found: list[str] = []

    def finding(count: int, failing: bool = False) -> Iterator[Path]:
        for index in range(count):
            found.append(f"f{index}")
            yield Path(f"f{index}")
        if failing:
            raise ValueError("no such target")

    total = LARGE_RUN + 12
    done = map_files(partial(_name_and_found, found), finding(total), 2, 5)
    assert [name for name, _ in done] == [f"f{index}" for index in range(total)]
    # A forked process sees what was found when it started: the first started before the last items were found.
    assert done[0][1] < total and done[-1][1] == total
    children = []
    real_fork = os.fork

    def recorded_fork() -> int:
        pid = real_fork()
        children.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", recorded_fork)
    with pytest.raises(ValueError, match="no such target"):
        map_files(_name_and_process, finding(total, failing=True), 2, 5)
    assert children
    for pid in children:
        with pytest.raises(ChildProcessError):  # waited for already
            os.waitpid(pid, os.WNOHANG)
