"""What ruff says of the files a fix rewrites, as they were, is asked of them on disk in one run for them all
(`fix.apply.ruff_on_originals`), between the fix's two maps: the answers are those that each file would get alone,
and the fix writes what it wrote when each file asked alone."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from rope_lint import api, engine, ruff
from rope_lint.engine import Settings
from rope_lint.fix import apply, formatting, tidy
from rope_lint.rules import select_rules

FIXABLE = "import torch\n\n\ndef f(a, b):\n    return (a.exp() + b.exp()).log()\n"
ORIGINALS = {
    "clean.py": FIXABLE,
    # ruff rewrites `-- x` as `--x`: the line its diff removes reads `--- x`, as the header of a file's diff does.
    "dashes.py": FIXABLE + "\n\nx = ( 1 )\n-- x\n",
    "no_newline_at_end.py": FIXABLE + "\n\ny=2",
    "unused_import.py": "import os\n" + FIXABLE,
    "unsorted.py": "import torch\nimport os\n" + FIXABLE[len("import torch\n") :] + "\nos.sep\n",
}


@pytest.fixture
def command() -> list[str]:
    found = ruff.command()
    assert found is not None, "ruff is a test dependency"
    return found


def _written(folder: Path, originals: dict[str, str]) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in originals.items():
        (folder / name).write_text(text)
    return sorted(os.path.abspath(folder / name) for name in originals)


# A line that ruff's default settings break, and a project's of 120 columns does not.
OF_NO_PROJECT = {"long_line.py": FIXABLE + "\n\nlong = [" + ", ".join(["1000000"] * 11) + "]\n"}
# Settings that answer otherwise than ruff's own: no F401, and lines of 120 columns.
OTHER_SETTINGS = '[tool.ruff]\nline-length = 120\n[tool.ruff.lint]\nselect = ["E"]\n'


@pytest.mark.parametrize("project", [False, True], ids=["files of no project", "files of a project of their own"])
def test_one_run_each_answers_as_each_file_asked_alone(
    tmp_path: Path, command: list[str], project: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from a folder of no project, or, for files of a project of their own, from another project's."""
    folder = tmp_path / "package"
    paths = _written(folder, {**ORIGINALS, **OF_NO_PROJECT})
    if project:
        (folder / "pyproject.toml").write_text(OTHER_SETTINGS)
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "elsewhere" / "ruff.toml").write_text("line-length = 60\n")
        monkeypatch.chdir(tmp_path / "elsewhere")
    else:
        monkeypatch.chdir(folder)
    assert ruff.with_settings_as_for_text(paths) == paths
    diffs, codes = formatting.original_diffs(paths), tidy.original_codes(paths)
    assert sorted(diffs) == sorted(codes) == paths
    for path in paths:
        text = Path(path).read_text()
        whole = ["format", "--quiet", "--diff", "--range", f"1-{len(text.splitlines()) + 1}"]
        alone = ruff.run_on_text(command, whole, path, text, allowed=(0, 1))
        assert alone is not None
        assert (diffs[path] == "") is (alone == ""), path
        assert formatting._changed_lines(diffs[path]) == formatting._changed_lines(alone), path
        assert codes[path] == tidy._codes(command, Path(path), text), path
    named = {Path(path).name: path for path in paths}
    assert diffs[named["clean.py"]] == ""
    assert "--- x" in diffs[named["dashes.py"]]
    # The project's settings, or ruff's own.
    assert ("F401" in codes[named["unused_import.py"]], diffs[named["long_line.py"]] != "") == (not project,) * 2


def test_a_file_of_no_project_is_asked_alone_from_a_projects_folder(
    tmp_path: Path, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ruff gives the text of a file of no project its own settings, and the file on disk those of the project that
    the current folder is in: such a file asks ruff of its text itself."""
    paths = _written(tmp_path / "package", OF_NO_PROJECT)
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(OTHER_SETTINGS)
    for folder, asked in [(project, False), (tmp_path / "package", True)]:
        monkeypatch.chdir(folder)
        assert ruff.with_settings_as_for_text(paths) == (paths if asked else [])
        # On disk, from the project's folder, the file gets its 120 columns.
        assert (formatting.original_diffs(paths)[paths[0]] == "") is not asked


def test_a_file_ruff_cannot_read_as_the_fix_read_it_asks_ruff_alone(
    tmp_path: Path, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file in another encoding than UTF-8 (which ruff reads), or whose bytes changed on disk after the fix read
    them, gets no answer from the run for all: it asks ruff of its text itself."""
    originals = {**ORIGINALS, "latin1.py": "# -*- coding: latin-1 -*-\n# café\n" + FIXABLE}
    folder = tmp_path / "package"
    _written(folder, originals)
    monkeypatch.chdir(folder)  # a folder of no project, as the files' own
    (folder / "latin1.py").write_bytes((folder / "latin1.py").read_text().encode("latin-1"))
    settings = Settings(select_rules(["ALL"], []), tmp_path)
    drafts = [apply.drafted(folder / name, settings, unsafe=False) for name in sorted(originals)]
    assert all(isinstance(draft, apply.FixDraft) for draft in drafts)
    (folder / "clean.py").write_text(FIXABLE + "\n")  # changed after the fix read it
    answers = apply.ruff_on_originals(drafts)  # type: ignore[arg-type]
    assert sorted(path.name for path in answers) == sorted(set(originals) - {"latin1.py", "clean.py"})
    assert all(answer.diff is not None and answer.import_codes is not None for answer in answers.values())


def test_a_fix_asks_ruff_about_the_originals_once_for_all_and_writes_what_each_file_alone_would(
    tmp_path: Path, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    alone, together = tmp_path / "alone" / "package", tmp_path / "together" / "package"
    _written(alone, ORIGINALS)
    settings = Settings(select_rules(["ALL"], []), tmp_path)
    for name in ORIGINALS:
        assert apply.fix_file(alone / name, settings, unsafe=False, diff_only=False).error is None
    shutil.copytree(alone.parent, together.parent, dirs_exist_ok=True)
    _written(together, ORIGINALS)

    monkeypatch.chdir(together)  # a folder of no project, as the files' own
    monkeypatch.setattr(os, "cpu_count", lambda: 1)  # every run of ruff in this process, where it is counted
    whole_original, on_files = [], []
    run_on_text, run_on_files = ruff.run_on_text, ruff.run_on_files

    def text_run(command: list[str], arguments: list[str], path: object, text: str, **keywords: object) -> str | None:
        # What the run for all answers: an original's diff, and its codes (a region of one is still asked alone).
        if "--diff" in arguments or (arguments[0] == "check" and text in ORIGINALS.values()):
            whole_original.append(arguments[0])
        return run_on_text(command, arguments, path, text, **keywords)  # type: ignore[arg-type]

    def files_run(command: list[str], arguments: list[str], paths: list[str], **keywords: object) -> str | None:
        on_files.append(arguments[0])
        return run_on_files(command, arguments, paths, **keywords)  # type: ignore[arg-type]

    monkeypatch.setattr(ruff, "run_on_text", text_run)
    monkeypatch.setattr(ruff, "run_on_files", files_run)
    report = api.fix([str(together)])
    assert report.files_changed == len(ORIGINALS)
    assert sorted(on_files) == ["check", "format"]
    assert whole_original == []
    for name in ORIGINALS:
        assert (together / name).read_text() == (alone / name).read_text(), name


def _tagged(results: list[int]) -> list[tuple[int, int, int]]:
    return [(os.getpid(), len(results), result) for result in results]


def test_each_process_finishes_the_results_of_its_items_once_it_has_taken_the_last() -> None:
    """The fix's processes ask ruff about the files they rewrote in one run each: `map_files` passes each process's
    results through `finish` once, whichever items the process took."""
    items = list(range(engine.LARGE_RUN * 3))
    finished = engine.map_files(abs, items, processes=2, finish=_tagged)
    assert [result for _, _, result in finished] == items
    by_process: dict[int, set[int]] = {}
    for pid, finished_together, _ in finished:
        by_process.setdefault(pid, set()).add(finished_together)
    assert 1 <= len(by_process) <= 2
    assert all(len(sizes) == 1 for sizes in by_process.values())  # one call of `finish` in each process
    assert sum(size for sizes in by_process.values() for size in sizes) == len(items)
    assert engine.map_files(abs, [3, 4], processes=2, finish=_tagged) == [(os.getpid(), 2, 3), (os.getpid(), 2, 4)]
