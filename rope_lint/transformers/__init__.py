"""What is specific to a transformers tree: `# Copied from` groups that must stay identical (`copies`), and generated
`modeling_*.py` files whose findings belong to their modular source (`generated`).

Both read the tree's files as text; neither imports transformers.
"""
