from __future__ import annotations

import ast
from collections.abc import Iterator

from rope_lint.prefilter import PrefilterSpec
from rope_lint.rules.analysis import dtypes, enumerations
from rope_lint.rules.analysis.context import FileContext
from rope_lint.rules.base import FixAvailability, Flagged, Invalid, Rule, Valid


class LinspaceEnumeration(Rule):
    """
    `torch.linspace` with points one apart enumerates positions in a floating dtype.

    ## What it does
    Flags `torch.linspace(start, end, steps)` whose points are one apart (`end - start == steps - 1`:
    `torch.linspace(0, n - 1, n)`, or `torch.linspace(0.5, h - 0.5, h)` for the centres of a grid's cells) in
    a floating dtype that can be low precision, wherever it runs: bf16 or fp16; the dtype of a tensor shown to be
    floating (an activation's, a weight's), or a `dtype` parameter whose callers in the file pass one, as RPL101
    reads them; or, without `dtype=` (or with `dtype=None`), the default dtype, which RPL101 reads as
    `torch.get_default_dtype()`: one that follows the model. Points one apart are read from a literal start, and
    an end and a step count that differ from one expression by literals. With literal bounds alone, only points
    that bf16 cannot hold are flagged.

    An explicit float32 or float64 is never flagged: DeepSpeed's `zero.Init()` patches `torch.arange` and the
    other constructors that RPL101 names, not `torch.linspace`, and a default dtype set for loading leaves an
    explicit dtype alone.

    ## Why is this bad?
    It is RPL101's enumeration under another name. bf16 holds integers exactly only up to 256, and
    half-integers only up to 128: on a feature map 300 cells wide, `torch.linspace(0, 299, 300,
    dtype=torch.bfloat16)` has 278 distinct points, and the reference points or anchors built on them are off by
    up to 2 cells. A dtype taken from an activation is bf16 in mixed-precision training, and
    `from_pretrained(torch_dtype=torch.bfloat16)` makes bf16 the default dtype while the model's `__init__` runs.

    ## Example
    ```python
    def reference_points(height, width, valid_ratios):
        ys, xs = torch.meshgrid(
            torch.linspace(0.5, height - 0.5, height, dtype=valid_ratios.dtype),
            torch.linspace(0.5, width - 0.5, width, dtype=valid_ratios.dtype),
            indexing="ij",
        )
    ```

    ## Use instead
    ```python
    def reference_points(height, width, valid_ratios):
        ys, xs = torch.meshgrid(
            torch.arange(height, dtype=torch.int64).float() + 0.5,
            torch.arange(width, dtype=torch.int64).float() + 0.5,
            indexing="ij",
        )
    ```
    and cast what they compute to the model's dtype where it is used.

    ## Fix safety
    No fix. Float32 points would make what follows float32 where it was bf16, and a matmul of them with bf16
    weights raises; where the points' dtype flows decides what a rewrite must cast back.

    ## Known problems
    Only the spellings above are read: a centred grid (`torch.linspace(-(n - 1) / 2, (n - 1) / 2, n)`) or a start
    that is not a literal (`torch.linspace(a, a + n - 1, n)`) is not seen. The dtype is read as RPL101 reads it,
    with its known problems. Small grids (a kernel of 7 points) are exact in bf16, but a count read from a name is
    not bounded, so they are flagged.
    """

    code = "RPL105"
    name = "linspace-enumeration"
    prefilter = PrefilterSpec(triggers=(b"linspace",))
    fix_availability = FixAvailability.NEVER

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        for call in ctx.calls("torch.linspace"):
            offset = enumerations.unit_spacing_offset(call)
            if offset is None:
                continue
            dtype = dtypes.dtype_argument(call)
            if dtypes.takes_the_default_dtype(call):
                shown = "the default dtype (bf16 while a bf16 load builds the model)"
            elif not enumerations.shown_floating(ctx, dtype):
                continue
            elif enumerations.at_least_float32(enumerations.literal_dtypes(ctx, dtype)):
                continue  # exact to 2**24 at least, and nothing casts what `torch.linspace` makes
            else:
                shown = f"floating dtype `{ast.unparse(dtype)}`"
            positions = "integer" if not offset else "half-integer" if offset == 0.5 else "fractional"
            limit = enumerations.bf16_holds_up_to(offset)
            rounded = f"rounds them above {limit:g}" if limit >= 1 else "cannot hold them"
            yield self.report(
                call,
                f"`torch.linspace` with points one apart enumerates {positions} positions in {shown}, and bf16 "
                f"{rounded}; enumerate with `torch.arange` in int64, in float32 or wider, and cast to the model's "
                "dtype only where they are used",
            )

    examples = (
        Invalid(
            "import torch\n"
            "def reference_points(height, width, hidden_states):\n"
            "    return torch.linspace(0, height - 1, height, dtype=hidden_states.dtype)\n"
        ),
        # Half-integers: the centres of a grid's cells. A tensor named as a ratio is floating.
        Invalid(
            "import torch\n"
            "def reference_points(height, valid_ratios):\n"
            "    return torch.linspace(0.5, height - 0.5, height, dtype=valid_ratios.dtype)\n"
        ),
        Invalid("import torch\ndef f(n):\n    return torch.linspace(0.5, n - 0.5, n, dtype=torch.bfloat16)\n"),
        # Quarters, which bf16 holds only up to 64.
        Invalid("import torch\nGRID = torch.linspace(0.25, 99.25, 100, dtype=torch.bfloat16)\n"),
        # The default dtype, which follows the model, also as `dtype=None`.
        Invalid("import torch\ndef grid(n):\n    return torch.linspace(1, n, n)\n"),
        Invalid("import torch\ndef grid(n):\n    return torch.linspace(0, n - 1, n, dtype=None)\n"),
        # Keywords in any order.
        Invalid(
            "import torch\n"
            "def anchors(size, x):\n"
            "    return torch.linspace(steps=size + 1, start=0, end=size, dtype=x.dtype)\n"
        ),
        # Literal bounds that bf16 cannot hold.
        Invalid("import torch\nGRID = torch.linspace(0, 511, 512, dtype=torch.bfloat16)\n"),
        # Fractional points: not an enumeration.
        Valid("import torch\ndef f(n, x):\n    return torch.linspace(0, 1, n, dtype=x.dtype)\n"),
        # Points more than one apart, or a count that is not the end's.
        Valid("import torch\ndef f(width, cells, x):\n    return torch.linspace(0, width - 1, cells, dtype=x.dtype)\n"),
        # An explicit float32, even while a model is built: zero.Init does not patch `torch.linspace`.
        Valid(
            "import torch\n"
            "class Anchors(torch.nn.Module):\n"
            "    def __init__(self, size):\n"
            "        super().__init__()\n"
            "        self.grid = torch.linspace(0, size - 1, size, dtype=torch.float32)\n"
        ),
        # float64, and literal bounds that bf16 holds.
        Valid("import torch\ndef f(n):\n    return torch.linspace(0, n - 1, n, dtype=torch.float64)\n"),
        Valid("import torch\nGRID = torch.linspace(0, 255, 256, dtype=torch.bfloat16)\n"),
        Valid("import torch\nGRID = torch.linspace(0.25, 63.25, 64, dtype=torch.bfloat16)\n"),
    )
