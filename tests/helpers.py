"""What several test modules share: running the CLI, and pinned releases from PyPI in a git-ignored cache."""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import pty
import shutil
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "rope-lint-tests"


def load_module(path: Path, name: str) -> ModuleType:
    """The module of the Python file `path`, imported under `name` (a fixture, or what a fix made of it)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rope_lint(
    *args: str,
    cwd: Path | None = None,
    timeout: float = 600,
    preexec_fn: Callable[[], None] | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the installed command line the way a user does, in a fresh process (`preexec_fn` sets its limits), with
    `stdin` on its standard input where given."""
    return subprocess.run(
        [sys.executable, "-m", "rope_lint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=preexec_fn,
        input=stdin,
    )


def imported_by_check(folder: Path, path: str, packages: tuple[str, ...], settled: bool = False) -> list[str]:
    """The modules of `packages` (or packages below them: `rope_lint.rules`) that `rope-lint check path` imports, run
    in `folder` (which has an RPL101 finding), apart from those the interpreter had before. `settled`: with the clock
    read as a minute later, as the `settled_files` fixture has `files` read it, so that a file just written counts as
    unchanged where its status is; patched in `time` itself, so that no rope-lint module is imported before the
    modules are counted."""
    settle = "import time\nnow = time.time_ns\ntime.time_ns = lambda: now() + 60 * 10**9\n"
    probe = (
        "import json, sys\n"
        f"{settle if settled else ''}"
        "before = set(sys.modules)\n"
        "from rope_lint.cli import main\n"
        f"main(['check', {path!r}])\n"
        f"packages = {packages!r}\n"
        "found = [m for m in set(sys.modules) - before if any(m == p or m.startswith(p + '.') for p in packages)]\n"
        "print(json.dumps(sorted(found)))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=folder, capture_output=True, text=True)
    assert "RPL101" in result.stdout, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def on_a_terminal(*args: str, cwd: Path, stream: str = "stdout", env: dict[str, str] | None = None) -> str:
    """Run the CLI with `stream` (`stdout` or `stderr`) on a pseudo-terminal, as a person at a shell has it, and the
    other a pipe; what it wrote to the terminal (whose line ends are `\r\n`)."""
    primary, secondary = pty.openpty()
    try:
        subprocess.run(
            [sys.executable, "-m", "rope_lint", *args],
            cwd=cwd,
            env=env,
            timeout=300,
            **{"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, stream: secondary},
        )
    finally:
        os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # EIO: the terminal's other end is closed and everything was read
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    return b"".join(chunks).decode()


@contextlib.contextmanager
def cache_lock(name: str) -> Iterator[None]:
    """Held while one test process downloads or installs `name` into the cache: the suite runs in two (pytest-xdist),
    and both may ask for the same release at once on a fresh machine."""
    folder = CACHE / ".locks"
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def pypi_wheel(package: str, version: str) -> Path:
    """A release's wheel, downloaded once into the cache. A failed download fails the test: never a skip."""
    return _pypi_download(package, version, "wheels", f"{package.replace('-', '_')}-{version}-*.whl")


def pypi_sdist(package: str, version: str) -> Path:
    """A release's source distribution, downloaded once into the cache. A failed download fails the test."""
    pattern = f"{package.replace('-', '_')}-{version}.tar.gz"
    return _pypi_download(package, version, "sdists", pattern, "--no-binary", ":all:")


def _pypi_download(package: str, version: str, kind: str, pattern: str, *options: str) -> Path:
    folder = CACHE / kind
    folder.mkdir(parents=True, exist_ok=True)
    with cache_lock(f"{kind}-{package}-{version}"):
        found = sorted(folder.glob(pattern))
        if not found:
            command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", *options]
            result = subprocess.run(
                [*command, f"{package}=={version}", "-d", str(folder)], capture_output=True, text=True
            )
            found = sorted(folder.glob(pattern))
            if result.returncode != 0 or not found:
                pytest.fail(f"could not download {package}=={version} from PyPI: {result.stderr.strip()[-500:]}")
        return found[0]


def unpacked_wheel(package: str, version: str) -> Path:
    """The wheel's files, unpacked once; returns the folder that holds the top-level package."""
    target = CACHE / "unpacked" / f"{package}-{version}"
    marker = target / ".complete"
    with cache_lock(f"unpacked-{package}-{version}"):
        if not marker.exists():
            with zipfile.ZipFile(pypi_wheel(package, version)) as wheel:
                wheel.extractall(target)
            marker.touch()
    return target


@dataclass(frozen=True)
class ProbeRun:
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        return json.loads(self.stdout)


def _environment(pythonpath: Sequence[Path]) -> dict[str, str]:
    environment = dict(os.environ)
    # The repository first, so that this checkout's rope_lint is the one that runs.
    paths = [str(REPO), *map(str, pythonpath)]
    environment["PYTHONPATH"] = os.pathsep.join([*paths, environment.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return environment


def run_python(code: str, *args: str, pythonpath: Sequence[Path] = (), stderr: Any = None) -> ProbeRun:
    """`python -c code args...` in a fresh process from the repository root."""
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        env=_environment(pythonpath),
        stdout=subprocess.PIPE,
        stderr=stderr if stderr is not None else subprocess.PIPE,
        text=True,
        timeout=600,
    )
    return ProbeRun(result.returncode, result.stdout, result.stderr or "")


def probe(*targets: str, pythonpath: Sequence[Path], triggers: str, options: Sequence[str] = ()) -> dict[str, Any]:
    """`rope-lint probe TARGETS --trigger TRIGGERS OPTIONS` in a fresh process, its JSON report; exit 0 or 1 (findings,
    or a class it could not measure), never a usage or internal error."""
    code = "import sys\nfrom rope_lint.cli import main\nsys.exit(main(['probe', *sys.argv[1:]]))\n"
    arguments = [*targets, "--trigger", triggers, *options, "--output-format", "json"]
    run = run_python(code, *arguments, pythonpath=pythonpath)
    assert run.returncode in (0, 1), run.stderr[-3000:]
    return run.json()


def class_of(probed: str) -> str:
    """The qualified name of the class a probe's report entry measured: one measured once per layer type
    (`...RotaryEmbedding[layer_type=sliding_attention]`) is one class in code."""
    return probed.split("[")[0]


def module_of(probed: str) -> str:
    """The module of the class a probe's report entry measured."""
    return class_of(probed).rpartition(".")[0]


def exceeding(report: dict[str, Any]) -> dict[str, list[str]]:
    """The classes over the threshold, with the triggers they exceed under."""
    return {
        c["class"]: [name for name, t in c["triggers"].items() if t["status"] == "exceeds"]
        for c in report["classes"]
        if c.get("triggers") and any(t["status"] == "exceeds" for t in c["triggers"].values())
    }


def install_release(package: str, version: str) -> Path:
    """package==version and its dependencies, installed once into a folder of their own (never torch, which comes from
    the project's environment). A failed install fails the test: never a skip."""
    target = CACHE / f"site-{package}-{version}"
    with cache_lock(target.name):
        marker = target / ".installed"
        if marker.exists():
            return target
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-input", "--disable-pip-version-check"]
        result = subprocess.run(
            [*pip, "--target", str(partial), f"{package}=={version}"],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if result.returncode != 0:
            pytest.fail(f"could not install {package}=={version} from PyPI: {result.stderr.strip()[-1500:]}")
        if (partial / "torch").exists():
            pytest.fail(f"installing {package}=={version} pulled torch into {partial}; the tests use the project's")
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        marker.touch()
        return target


def install_transformers(version: str) -> Path:
    return install_release("transformers", version)


def broken_fix(old: str, new: str) -> str:
    """The code of a command line whose fix is replaced by one that writes `new` for `old` in the file: what a fix
    that changes a result would write, for the tests of `fix --verify`. Run it with `run_python`."""
    return (
        "import sys\n"
        "from rope_lint.fix import apply\n"
        "def broken(source, diagnostics, package=None):\n"
        f"    return apply.FixResult(source.replace({old!r}, {new!r}), list(diagnostics))\n"
        "apply.unverified_fixes = broken\n"
        "from rope_lint.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )


def verify_changes_prelude(path: Path) -> str:
    """Code that defines `verify(fixed)`: `verify_changes` on the module at `path`, its text against a fixed text,
    printing each verification as `status|name|detail`. Prefix a test's code with it and run it with `run_python`,
    a fresh process, as the command line runs it."""
    return textwrap.dedent(f"""
        from pathlib import Path
        from rope_lint.verify.changes import verify_changes
        PATH = Path({str(path)!r})
        ORIGINAL = PATH.read_text()

        def verify(fixed):
            for verification in verify_changes([(PATH, ORIGINAL, fixed)]):
                print(verification.status, verification.name, verification.detail, sep="|")
    """)


def enumeration_cast(path: str, line: int, column: int) -> bool:
    """Whether the RPL101 finding at `path`:`line`:`column` is of an integer enumeration that a cast right after gives a
    floating dtype (`torch.arange(n).to(dtype)`), not of an enumeration in a floating `dtype=`."""
    import ast

    from rope_lint.rules.analysis import enumerations
    from rope_lint.rules.analysis.context import FileContext

    source = Path(path).read_text()
    ctx = FileContext(path, source, ast.parse(source), ("arange",))
    [call] = [c for c in ctx.calls("torch.arange") if (c.lineno, c.col_offset) == (line, column)]
    return enumerations.is_integer_enumeration(ctx, call) and enumerations.cast_after(ctx, call) is not None
