"""The floor of a warm check: what any Python tool must do to know that a tree is unchanged since a cache described it,
with none of rope-lint's code or imports. `bench/run.py` times it beside the warm check (issue 21's warm row).

    python bench/warm_floor.py TREE CACHE_FILE

It walks TREE as the check does (each folder listed once, names sorted, hidden folders left out), takes each Python
file's status, reads the JSON cache file, then walks the rest of the package that holds TREE, takes the status of each
file not taken yet, and hashes every path with its status: the package's fingerprint, which a warm check takes where a
finding rests on public helpers that the package's other modules may call (4.37.2 `models/` has two such findings).
It prints how many files it saw, and how many of them the cache knows with the same status.
"""

from __future__ import annotations

import json
import os
import sys

try:  # the cheapest import of a good hash, as rope-lint's: `hashlib` loads OpenSSL as well
    from _blake2 import blake2b
except ImportError:
    from hashlib import blake2b


def python_files(top: str, skipped: str | None = None) -> list[str]:
    """The Python files under `top`, each folder's in name order before its subfolders', leaving out hidden folders,
    `__pycache__` and the folder `skipped`."""
    found, pending = [], [top]
    while pending:
        folder = pending.pop()
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
        subfolders = []
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if not entry.name.startswith(".") and entry.name != "__pycache__" and entry.path != skipped:
                    subfolders.append(entry.path)
            elif entry.name.endswith((".py", ".pyi")):
                found.append(entry.path)
        pending += reversed(subfolders)
    return found


def package_top(folder: str) -> str:
    """The highest folder with an `__init__.py` that holds `folder`, or `folder` itself."""
    top = folder
    while os.path.isfile(os.path.join(os.path.dirname(top), "__init__.py")):
        top = os.path.dirname(top)
    return top


def status(path: str) -> list[int]:
    found = os.stat(path)
    return [found.st_size, found.st_mtime_ns, found.st_ctime_ns, found.st_ino]


def main(tree: str, cache_file: str) -> None:
    tree = os.path.abspath(tree)
    statuses = {path: status(path) for path in python_files(tree)}
    with open(cache_file, "rb") as stream:
        known = json.loads(stream.read()).get("files", {})
    unchanged = sum(known.get(path, [None])[:-1] == taken for path, taken in statuses.items())
    others = python_files(package_top(tree), skipped=tree)
    digest = blake2b(digest_size=16)
    for path in sorted([*statuses, *others]):
        digest.update(f"{path}\0{statuses.get(path) or status(path)}\n".encode())
    print(f"{len(statuses)} files, {unchanged} unchanged in the cache; {len(others)} other files in the package")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: python bench/warm_floor.py TREE CACHE_FILE", file=sys.stderr)
        sys.exit(2)
    main(*sys.argv[1:])
