"""`python -m rope_lint`, as the `rope-lint` command."""

import os
import sys

# `-m` puts the current folder first on sys.path (Python 3.11's -P would not): a `json.py` or `torch.py` of the project
# being checked would then be imported in place of the module rope-lint imports later. rope_lint itself is imported
# already, and its submodules are found from the package.
if not sys.flags.safe_path and sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from rope_lint.command import run

run()
