"""`[tool.rope-lint]` in the nearest pyproject.toml, or in the file `--config` names, and the command-line flags that
override it."""

from __future__ import annotations

import os
import sys

SECTION = "rope-lint"
_LIST_KEYS = ("select", "ignore", "exclude")


class ConfigError(ValueError):
    """A configuration that cannot be used; its message names the file and the key."""


class Config:
    """The settings of a run; flags replace what the file says, key by key."""

    def __init__(self, root: str, source: str | None = None) -> None:
        self.root = root  # paths in `exclude` and `per-file-ignores` are relative to it
        self.source = source
        self.select: list[str] = ["ALL"]
        self.ignore: list[str] = []
        self.exclude: list[str] = []
        self.per_file_ignores: dict[str, list[str]] = {}


def find_pyproject(start: str | os.PathLike[str]) -> str | None:
    """The nearest pyproject.toml at or above `start` that has a `[tool.rope-lint]` section."""
    folder = os.path.realpath(start)
    if not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    while True:
        pyproject = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(pyproject) and _section(pyproject) is not None:
            return pyproject
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def load(start: str | os.PathLike[str]) -> Config:
    """The configuration of the nearest pyproject.toml at or above `start` (`find_pyproject`); every rule and no
    exclusion where there is none."""
    pyproject = find_pyproject(start)
    if pyproject is None:
        return Config(root=os.getcwd())
    return load_file(pyproject)


def load_file(pyproject: str) -> Config:
    """The configuration in the `[tool.rope-lint]` section of the file `pyproject` (`--config` names one), its
    patterns relative to the file's folder. A file without the section is a ConfigError: whoever names a file means
    its settings to apply."""
    table = _section(pyproject)
    if table is None:
        raise ConfigError(f"{pyproject}: no [tool.{SECTION}] section")
    config = Config(root=os.path.dirname(os.path.abspath(pyproject)), source=pyproject)
    for key, value in table.items():
        if key in _LIST_KEYS:
            setattr(config, key, _string_list(value, pyproject, key))
            if key == "select" and not value:
                raise ConfigError(f"{pyproject}: [tool.{SECTION}] select is empty, which checks nothing")
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{pyproject}: [tool.{SECTION}] per-file-ignores must be a table")
            config.per_file_ignores = {
                pattern: _string_list(codes, pyproject, f"per-file-ignores.{pattern}")
                for pattern, codes in value.items()
            }
        else:
            raise ConfigError(f"{pyproject}: unknown key {key!r} in [tool.{SECTION}]")
    return config


def _section(pyproject: str) -> dict | None:
    """The `[tool.rope-lint]` table of a pyproject.toml, None when it has none; ConfigError when `tool` or the section
    is there but is not a table (`[tool] rope-lint = 5`, `[[tool.rope-lint]]`)."""
    tool = _read(pyproject).get("tool")
    if tool is None:
        return None
    if not isinstance(tool, dict):
        raise ConfigError(f"{pyproject}: `tool` must be a table")
    table = tool.get(SECTION)
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{pyproject}: [tool.{SECTION}] must be a table, not {type(table).__name__}")
    return table


def _read(pyproject: str) -> dict:
    try:
        with open(pyproject, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as error:
        raise ConfigError(f"{pyproject}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{pyproject}: cannot read: not UTF-8 ({error.reason} at byte {error.start})") from None
    if not _may_hold_section(text):
        return {}  # most projects have no section of ours: importing a TOML parser costs more than a check
    try:
        return parsed_toml(text)
    except ValueError as error:  # tomllib's TOMLDecodeError
        raise ConfigError(f"{pyproject}: invalid TOML: {error}") from None
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise ConfigError(f"{pyproject}: invalid TOML: nested too deeply") from None


def parsed_toml(text: str) -> dict:
    """`text` parsed as TOML, by the standard library's tomllib (tomli, the same parser, on Python 3.10). Raises
    ValueError (tomllib's TOMLDecodeError) or RecursionError for text that is not TOML."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    return tomllib.loads(text)


def _may_hold_section(text: str) -> bool:
    """Whether the TOML text can define `[tool.rope-lint]`, told without parsing it: a project that names rope-lint
    only as a dependency (or as its own name) is not parsed. Blanks and quotes are dropped first, so that every
    spelling of the keys counts: `[tool . "rope-lint"]`, `tool.rope-lint.select = ...` at the top, a `rope-lint` key
    under `[tool]`, or an inline `tool = {...}`."""
    if SECTION not in text:
        return False
    compact = "\n" + text.replace(" ", "").replace("\t", "").replace('"', "").replace("'", "")
    return f"tool.{SECTION}" in compact or "[tool]" in compact or "\ntool=" in compact


def _string_list(value: object, pyproject: str, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{pyproject}: [tool.{SECTION}] {key} must be a list of strings")
    return value
