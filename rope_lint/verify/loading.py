"""The original and the fixed text of one file, imported side by side from the same package context.

Both are executed as siblings of the file's own module: same package (`__package__`), so that `from . import x` and
`from ..y import z` resolve to the real package's modules, and the package's parent folder on `sys.path`. The file on
disk is not touched: each text is executed from memory under a module name of its own.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import linecache
import sys
import types
from pathlib import Path

ORIGINAL_SUFFIX = "__rope_lint_original"
FIXED_SUFFIX = "__rope_lint_fixed"


class TextLoader(importlib.abc.Loader):
    """Executes a text given in memory as the module's code, under a file name of its own.

    The name is registered with `linecache`, so that `inspect.getsource` of the text's functions reads this text and
    not the file on disk, which holds only one of the two.
    """

    def __init__(self, text: str, code_name: str) -> None:
        self.text = text
        self.code_name = code_name

    def exec_module(self, module: types.ModuleType) -> None:
        lines = self.text.splitlines(keepends=True)
        linecache.cache[self.code_name] = (len(self.text), None, lines, self.code_name)
        exec(compile(self.text, self.code_name, "exec", dont_inherit=True), module.__dict__)


def package_of(path: Path) -> tuple[Path, str]:
    """The folder that holds the file's top-level package (or the file's own folder, for a file in no package), and
    the file's package as a dotted name ("" for none): found by walking up the folders that have an `__init__.py`."""
    folder = path.resolve().parent
    packages: list[str] = []
    while (folder / "__init__.py").is_file():
        packages.insert(0, folder.name)
        folder = folder.parent
    return folder, ".".join(packages)


def load_sibling(path: Path, text: str, suffix: str) -> types.ModuleType:
    """Import `text` as a sibling of the module of `path`, named after it with `suffix`. Raises whatever the text's
    import raises (the package's own import included)."""
    root, package = package_of(path)
    if sys.path[:1] != [str(root)]:
        # As for running the code: its top-level package (or its folder) is importable, and first, so that an
        # installed copy of the same package (a site folder on PYTHONPATH) does not answer for the tree being fixed.
        sys.path.insert(0, str(root))
    if package:
        _import_from(importlib.import_module(package), root)
    stem = "init" if path.name == "__init__.py" else path.stem
    name = f"{package}.{stem}{suffix}" if package else f"{stem}{suffix}"
    loader = TextLoader(text, f"{path.resolve()} ({suffix.strip('_').replace('_', ' ')})")
    spec = importlib.util.spec_from_file_location(name, path.resolve(), loader=loader)
    assert spec is not None  # a loader and a location always make a spec
    module = importlib.util.module_from_spec(spec)
    module.__package__ = package
    # Registered while it runs, as an import does: dataclasses and typing look their module up by name.
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _import_from(module: types.ModuleType, root: Path) -> None:
    """Raises ImportError where the file's package was imported from somewhere else than `root` (imported before,
    from an installed copy): its siblings would then be another tree's code, and the comparison would prove nothing."""
    location = getattr(module, "__file__", None)
    if location is not None and not Path(location).resolve().is_relative_to(root):
        raise ImportError(f"package {module.__name__} is imported from {Path(location).parent}, not from {root}")


def unload(module: types.ModuleType) -> None:
    """Forget a module that `load_sibling` made, so that a large tree's modules do not pile up."""
    sys.modules.pop(module.__name__, None)
    code_name = getattr(module.__loader__, "code_name", None)
    if code_name is not None:
        linecache.cache.pop(code_name, None)
