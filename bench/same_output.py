"""Whether a change of rope-lint's code changed what it reports or fixes: the outputs of `check --output-format json`
and `fix --unsafe-fixes --diff` on the whole transformers 4.37.2 and 5.24.0 packages, saved once and compared later.

    python bench/same_output.py save DIR      # before the change
    python bench/same_output.py compare DIR   # after it: exit 1 and the first differing lines when any output differs

The wheels are downloaded once into the git-ignored `.cache/`, and unpacked where both runs see the same paths.
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "same-output"
RELEASES = ("4.37.2", "5.24.0")
# transformers' own ruff setting, which the fix formats rewritten statements with.
TRANSFORMERS_RUFF = "[tool.ruff]\nline-length = 119\n"
COMMANDS = {
    "check.json": ["check", "--no-cache", "--quiet", "--output-format", "json"],
    "fix.diff": ["fix", "--unsafe-fixes", "--diff"],
}


def tree(version: str) -> Path:
    """The release's `transformers` package, unpacked beside a pyproject.toml with transformers' ruff settings."""
    target = CACHE / f"transformers-{version}"
    if not (target / ".complete").exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        download = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", f"transformers=={version}"]
        subprocess.run([*download, "-d", CACHE], check=True)
        with zipfile.ZipFile(next(CACHE.glob(f"transformers-{version}-*.whl"))) as wheel:
            wheel.extractall(target)
        (target / "pyproject.toml").write_text(TRANSFORMERS_RUFF)
        (target / ".complete").touch()
    return target / "transformers"


def outputs() -> dict[str, bytes]:
    found = {}
    for version in RELEASES:
        # Run from the cache with a relative path, so that the paths in the outputs do not depend on the checkout.
        package = tree(version).relative_to(CACHE)
        environment = {**os.environ, "PYTHONPATH": str(REPO)}
        for name, command in COMMANDS.items():
            result = subprocess.run(
                [sys.executable, "-m", "rope_lint", *command, str(package)],
                capture_output=True,
                cwd=CACHE,
                env=environment,
            )
            found[f"{version}-{name}"] = result.stdout + f"\nexit {result.returncode}\n".encode()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("save", "compare"))
    parser.add_argument("folder", type=Path)
    args = parser.parse_args()
    if args.action == "save":
        args.folder.mkdir(parents=True, exist_ok=True)
        for name, data in outputs().items():
            (args.folder / name).write_bytes(data)
        return 0
    differing = 0
    for name, data in outputs().items():
        saved = (args.folder / name).read_bytes()
        if data == saved:
            print(f"{name}: identical ({len(data):,} bytes)")
            continue
        differing += 1
        print(f"{name}: DIFFERS")
        lines = difflib.unified_diff(saved.decode().splitlines(), data.decode().splitlines(), lineterm="", n=1)
        print("\n".join(list(lines)[:40]))
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
