import sys

from rope_lint.cli import main

sys.exit(main())
