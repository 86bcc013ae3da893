"""An explicit float32 enumeration in a public helper is a hazard only where code that runs at construction calls the
helper (issue 20, false-alarm shape 7): the rest of the helper's package decides (rope_lint/rules/analysis/callers.py),
through every way a module can reach it, and a cached result never hides a change in another module."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import rope_lint

from rope_lint.cache import ResultCache
from rope_lint.engine import LARGE_RUN, Settings, check_paths
from rope_lint.files import Excludes, discover
from rope_lint.rules import select_rules
from rope_lint.rules.analysis import callers

HELPER = "import torch\n\n\ndef positions(n: int):\n    return torch.arange(n, dtype=torch.float32)\n"
MODEL = (
    "import torch\n"
    "{imports}\n\n\n"
    "class Model(torch.nn.Module):\n"
    "    def __init__(self, n: int):\n"
    "        super().__init__()\n"
    "        self.n = n\n"
    "{init}\n"
    "    def forward(self, x):\n"
    "        return x + {call}\n"
)


def package(root: Path, modules: dict[str, str]) -> Path:
    folder = root / "pkg"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text("")
    (folder / "helpers.py").write_text(HELPER)
    for name, text in modules.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def model(imports: str, call: str, init: str = "") -> str:
    return MODEL.format(imports=imports, call=call, init=init)


def flagged(folder: Path, *only: str, code: str = "RPL101") -> list[str]:
    """The findings of one rule (RPL101 unless given) of a check of the whole package, or of the files `only`
    (pre-commit's changed files)."""
    paths = [str(folder / name) for name in only] or list(discover([str(folder)], Excludes([], str(folder))))
    found = check_paths(paths, Settings(select_rules([code], []), str(folder.parent)))
    return [f"{Path(d.path).relative_to(folder).as_posix()}:{d.start.line}" for d in found]


FORWARD_ONLY = model("from .helpers import positions", "positions(x.shape[1])")


@pytest.mark.parametrize("only", [(), ("helpers.py",)])
def test_a_helper_that_the_package_calls_only_in_forward_is_not_flagged(tmp_path: Path, only: tuple[str, ...]) -> None:
    assert flagged(package(tmp_path, {"model.py": FORWARD_ONLY}), *only) == []


@pytest.mark.parametrize("only", [(), ("helpers.py",)])
def test_a_helper_the_package_calls_only_in_forward_is_an_rpl104_note(tmp_path: Path, only: tuple[str, ...]) -> None:
    """The informational rule stands exactly where RPL101 does not (`Rule.stands_if_called_at_construction`)."""
    folder = package(tmp_path, {"model.py": FORWARD_ONLY})
    assert flagged(folder, *only, code="RPL104") == ["helpers.py:5"]


CONSTRUCTORS = {
    "a relative import": model("from .helpers import positions", "0", "        self.table = positions(n)"),
    "an absolute import under another name": model(
        "from pkg.helpers import positions as grid", "0", "        self.table = grid(n)"
    ),
    "the module's attribute": model("from pkg import helpers", "0", "        self.table = helpers.positions(n)"),
    "a star import": model("from .helpers import *", "0", "        self.table = positions(n)"),
    "a submodule two levels down": model("from ..helpers import positions", "0", "        self.table = positions(n)"),
}


@pytest.mark.parametrize("how", CONSTRUCTORS)
def test_a_helper_that_a_constructor_elsewhere_calls_is_flagged(tmp_path: Path, how: str) -> None:
    name = "models/model.py" if "two levels" in how else "model.py"
    modules = {name: CONSTRUCTORS[how], "other.py": FORWARD_ONLY}
    if "two levels" in how:
        modules["models/__init__.py"] = ""
    folder = package(tmp_path, modules)
    assert flagged(folder) == ["helpers.py:5"]
    assert flagged(folder, code="RPL104") == []


def test_any_use_that_is_not_a_call_after_construction_keeps_the_finding(tmp_path: Path) -> None:
    as_value = "from .helpers import positions\n\nMAKERS = {'positions': positions}\n"
    at_import = "from .helpers import positions\n\nTABLE = positions(8)\n"
    for name, text in {"as_value.py": as_value, "at_import.py": at_import}.items():
        folder = package(tmp_path / name, {"model.py": FORWARD_ONLY, name: text})
        assert flagged(folder, "helpers.py") == ["helpers.py:5"], name


def test_a_module_with_its_own_helper_of_that_name_does_not_count(tmp_path: Path) -> None:
    own = "import torch\n\n\ndef positions(n):\n    return torch.arange(n)\n"
    copies = {
        "model.py": FORWARD_ONLY,
        "copy.py": own + model("", "0", "        self.table = positions(n)").removeprefix("import torch\n"),
        "sibling.py": own,
        "user.py": model("from .sibling import positions", "0", "        self.table = positions(n)"),
    }
    assert flagged(package(tmp_path, copies)) == []


def test_a_helper_that_nothing_in_its_package_calls_is_a_note_since_the_rules_cannot_see_where_it_runs(
    tmp_path: Path,
) -> None:
    # Code outside may call it in a constructor or in a forward pass: a lower severity, RPL104's note (issue 20,
    # shape 7: "report the few other cases with a lower severity"). A type test or an annotation runs nothing.
    typed = "from .helpers import positions\n\n\ndef kind(f) -> positions:\n    return isinstance(f, positions)\n"
    folder = package(tmp_path, {"typed.py": typed})
    assert flagged(folder) == []
    assert flagged(folder, code="RPL104") == ["helpers.py:5"]


def test_a_chain_of_public_helpers_is_followed_across_modules(tmp_path: Path) -> None:
    grid = "from .helpers import positions\n\n\ndef grid(n):\n    return positions(n)[:, None]\n"
    at_run_time = model("from .grid import grid", "grid(x.shape[1])")
    at_construction = model("from .grid import grid", "0", "        self.table = grid(n)")
    assert flagged(package(tmp_path / "late", {"grid.py": grid, "model.py": at_run_time})) == []
    assert flagged(package(tmp_path / "early", {"grid.py": grid, "model.py": at_construction})) == ["helpers.py:5"]


def test_a_warm_cache_answers_for_the_other_modules_as_they_are_now(tmp_path: Path) -> None:
    """A large run caches each file's findings; a constructor added in another module must still flag the helper."""
    (tmp_path / "pyproject.toml").write_text("[tool.rope-lint]\n")
    fillers = {f"clean_{index:02}.py": "import torch\nx = torch.arange(4)\n" for index in range(LARGE_RUN)}
    folder = package(tmp_path, {"model.py": FORWARD_ONLY, **fillers})
    before = rope_lint("check", "--select", "RPL101", "--output-format", "concise", ".", cwd=tmp_path)
    assert before.returncode == 0, before.stdout + before.stderr
    (folder / "other.py").write_text(CONSTRUCTORS["a relative import"])
    after = rope_lint("check", "--select", "RPL101", "--output-format", "concise", ".", cwd=tmp_path)
    assert after.returncode == 1 and "pkg/helpers.py:5:" in after.stdout, after.stdout + after.stderr
    assert (tmp_path / ".rope_lint_cache").is_dir()


def test_a_warm_cache_reads_no_other_module_until_one_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settled_files: None
) -> None:
    """The package's answers are kept with its files' statuses: a warm run of unchanged files reads none of them, and
    takes no status again of a file that it has checked; a constructor added in another module is answered for."""
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    fillers = {f"clean_{index:02}.py": "import torch\nx = torch.arange(4)\n" for index in range(LARGE_RUN)}
    folder = package(tmp_path, {"model.py": FORWARD_ONLY, **fillers})
    paths = list(discover([str(folder)], Excludes([], str(folder))))
    settings = Settings(select_rules(["RPL101"], []), str(tmp_path))
    read: list[str] = []
    real = callers.read_regular
    monkeypatch.setattr(callers, "read_regular", lambda path, *rest: read.append(path) or real(path, *rest))
    statted: list[str] = []
    real_status = callers.status_signature
    monkeypatch.setattr(callers, "status_signature", lambda path: statted.append(path) or real_status(path))

    def cached_run() -> list[str]:
        cache = ResultCache.for_run(tmp_path, ["RPL101"], {})
        found = check_paths(paths, Settings(settings.rules, str(tmp_path)), cache)
        cache.save()
        return [f"{Path(d.path).name}:{d.start.line}" for d in found]

    assert cached_run() == [] and read, "the cold run reads the package"
    read.clear()
    statted.clear()
    assert cached_run() == [] and read == [] and statted == []
    (folder / "other.py").write_text(CONSTRUCTORS["a relative import"])
    paths.append(str(folder / "other.py"))
    assert cached_run() == ["helpers.py:5"]


def test_a_check_asks_the_package_about_every_files_helpers_in_one_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each question about a name not asked before reads every module of the package: a check asks about the helpers
    of all its files at once, not file by file (each process of a check of transformers 5.24.0 read its 2,912 files
    five or six times)."""
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    folder = package(tmp_path, {"spans.py": HELPER.replace("positions", "widths"), "model.py": model("", "x")})
    read: list[str] = []
    real = callers.read_regular
    monkeypatch.setattr(callers, "read_regular", lambda path, *rest: read.append(Path(path).name) or real(path, *rest))
    assert flagged(folder) == []  # neither helper is called by the package
    assert read.count("model.py") == 1


def test_fix_leaves_a_helper_alone_when_its_finding_does_not_stand(tmp_path: Path) -> None:
    folder = package(tmp_path, {"model.py": FORWARD_ONLY})
    fixed = rope_lint("fix", "--select", "RPL101", str(folder / "helpers.py"), cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert (folder / "helpers.py").read_text() == HELPER
    (folder / "other.py").write_text(CONSTRUCTORS["a relative import"])
    fixed = rope_lint("fix", "--select", "RPL101", str(folder / "helpers.py"), cwd=tmp_path)
    assert "dtype=torch.int64" in (folder / "helpers.py").read_text(), fixed.stdout + fixed.stderr
