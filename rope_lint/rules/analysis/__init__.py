"""What several rules ask of a file, answered once: the file's index (`context`), the dtype of an expression
(`dtypes`), what an enumeration's arguments are (`enumerations`), the log/exp ops in either spelling
(`logdomain`), and which classes are rotary embeddings with which tables (`rotary`).

Detection only: stdlib `ast`, never LibCST or torch.
"""
