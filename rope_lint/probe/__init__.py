"""The runtime probe: build rotary-embedding classes under precision triggers and measure their cos/sin tables.

`check` and `fix` only read source; the probe is the one part of rope-lint that imports and runs model code, and
the only part that needs torch. This package's `__init__`, `cli`, `sizes` and `plot` stay free of torch so that
`rope-lint probe --help` and a missing-torch or missing-matplotlib message work without it; every other module here
imports torch at its top. matplotlib is imported by `plot` alone, and only for `--plot`.

Modules, one concept each:

- `triggers`: the conditions that change precision (zero.Init stand-in and the real one, default dtype, `.to()`,
  autocast), as context managers that always restore global state.
- `discover`: turns TARGETs into modules and finds their rotary classes.
- `build`: works out how to construct a class and call its forward, and normalises what it returns.
- `reference`: the float64 reference tables (the class's own math, or a textbook RoPE).
- `report`: error metrics and the result records, rendered as a table or JSON.
- `markdown`: a report, or a before/after pair of them, as GitHub Markdown tables.
- `compare`: `--compare`, the targets probed again in an original tree, in a process of its own; side by side.
- `plot`: `--plot`, per-class error curves and a summary heat map as PNGs (the optional matplotlib).
- `memory`: the memory budget: a class's allocations at full size, estimated from runs at small sizes.
- `sizes`: sizes in bytes for `--max-memory`, read and written.
- `runner`: probes each class under each trigger.
- `cli`: the `rope-lint probe` arguments and entry point.
"""

# Torch-free so that the CLI can list and validate trigger names before importing torch;
# `triggers.TRIGGERS` defines one trigger for each name, in this order.
TRIGGER_NAMES: tuple[str, ...] = (
    "fp32",
    "default-dtype-bf16",
    "default-dtype-fp16",
    "zero-init-bf16",
    "deepspeed-zero-init",
    "to-bf16",
    "autocast-bf16",
)
