"""The fix stage: findings with fixes in, edited text out, and written only when it is whole.

`apply` makes the LibCST edits at each finding's range (a rule's own `fix`, or a codemod from
`rope_lint.codemods` for a whole class), `formatting` and `tidy`
format and tidy the rewritten lines with the project's own ruff settings, and `write` replaces a file atomically.
LibCST is imported here and below only, so that `check` never pays for it.
"""
