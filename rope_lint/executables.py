"""Where rope-lint finds the programs it runs (ruff, git): only by absolute paths, so that what the current folder
holds is never run. A PATH entry that is empty or relative (`PATH=.:$PATH`) names the current folder, and
`python -m tool` searches it for `tool.py` first: a repository being checked could bring either.
"""

from __future__ import annotations

import os
import shutil
import sys


def in_environment(name: str) -> str | None:
    """The executable `name` installed with this Python (its scripts folders, the user scheme's, the interpreter's
    own folder), as pip installs a tool's console script; None when there is none."""
    import sysconfig  # only a fix runs ruff: a check does not pay for it

    executable = name + (sysconfig.get_config_var("EXE") or "")
    folders = (
        sysconfig.get_path("scripts"),
        sysconfig.get_path("scripts", vars={"base": sys.base_prefix}),
        os.path.dirname(sys.executable),
        sysconfig.get_path("scripts", sysconfig.get_preferred_scheme("user")),
    )
    for folder in folders:
        if folder and os.path.isabs(folder):
            candidate = os.path.join(folder, executable)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
    return None


def on_path(name: str) -> str | None:
    """`name` as `shutil.which` finds it on the PATH, searching only the PATH's absolute folders; None when absent."""
    folders = [folder for folder in os.environ.get("PATH", os.defpath).split(os.pathsep) if os.path.isabs(folder)]
    found = shutil.which(name, path=os.pathsep.join(folders)) if folders else None
    # On Windows `which` looks in the current folder first, and answers with a relative path from there.
    return found if found and os.path.isabs(found) else None
