from rope_lint.cli import run

run()
