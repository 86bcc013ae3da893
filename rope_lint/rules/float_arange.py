from __future__ import annotations

import ast
from collections.abc import Iterator

from rope_lint import TYPE_CHECKING
from rope_lint.diagnostics import FixSafety
from rope_lint.prefilter import PrefilterSpec, screens
from rope_lint.rules import payloads
from rope_lint.rules.analysis import enumerations
from rope_lint.rules.analysis.context import FileContext
from rope_lint.rules.analysis.dtypes import dtype_argument, is_floating_tensor, qualified_dtype
from rope_lint.rules.base import FixAvailability, Flagged, Invalid, Rule, Valid

if TYPE_CHECKING:
    import libcst as cst


# A dataclass whose `__post_init__` enumerates in float32, for the examples of where a plain class runs.
_SCHEDULE = (
    "import torch\n"
    "from dataclasses import dataclass\n"
    "@dataclass\n"
    "class Schedule:\n"
    "    ratios: tuple = (1.0, 0.5)\n"
    "    def __post_init__(self):\n"
    "        self.grid = torch.arange(len(self.ratios), dtype=torch.float32)\n"
)
_MAKES_A_SCHEDULE = (
    "class Model(torch.nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.schedule = Schedule((1.0,) * 64)\n"
)


class FloatArange(Rule):
    """
    `torch.arange` enumerates integer positions in a floating dtype, or is cast to one right after.

    ## What it does
    Flags `torch.arange` with integer-valued bounds (or a fractional start and an integral step, as in
    `torch.arange(0.5, n)`) and a floating `dtype=` that can be low precision where the call runs:
    - bf16 or fp16 (`torch.bfloat16`, `torch.half`, ...), anywhere;
    - a dtype that follows the model: `torch.get_default_dtype()`, or the `.dtype` of a tensor that the
      surrounding code shows to be floating (an `inv_freq` computed by division, `self.theta` assigned
      floats or what a function of the file returns, an activation such as `hidden_states`, a module's
      parameter such as `self.proj.weight`, a name that says it holds ratios or detection boxes), also through a
      `dtype` parameter whose callers in the file pass one (`dtype=q.dtype`), anywhere;
    - an explicit float32 (a literal, a name bound to one, or a `dtype` parameter that defaults to one and that
      no caller in the file overrides) only in code that may run while a model is built: `__init__`, the
      methods it reaches, initialisers and cache builders, code at module level, and a module-level function,
      a plain class's initialiser or a table of functions' entry with a caller that may.

    An explicit float64 is never flagged: it holds integers exactly up to 2**53. Nor is an explicit float32 in code that
    the rules do not see run at construction (the informational RPL104 reports it, a note that only `--select RPL104`
    turns on): `forward`, a pipeline's `__call__`, a scheduler step, the methods that only these call, and module-level
    helpers that only these call; for a public helper, in any module of its package (the tree of folders with an
    `__init__.py` that holds the file): a module that imports it, by any name, star imports included, or reads it off an
    imported module (`embeddings.helper(...)`), and calls it only after construction. A module that defines its own
    helper of that name, or imports one from a module that does, does not count, nor does naming it as a type (an
    annotation, `isinstance`). A public helper that its package never calls is for code outside, which may run it
    anywhere: a note too. A class that is not a module (no base but `object`, a dataclass) runs its `__init__` and
    `__post_init__` where it is made, as a function runs where it is called. An entry of a table of functions
    (`FEATURES = {"time": time_features}`) runs where an entry read off the table is called; one that a method keeps
    on `self` (`self.fns.append(functools.partial(...))`) runs where a method of the class reads it. A tensor cast to
    a literal dtype just before (`x = x.to(torch.float32)`, then `dtype=x.dtype`) counts as that literal, and a
    submodule's `forward` gets the dtype that the module holding it passes (`self.rope(n, dtype=torch.float32)` where
    `self.rope = Rope()`).

    An integer enumeration cast right after to such a dtype counts too, wherever it runs: `.to(x.dtype)`,
    `.to(dtype=dtype)`, `.to(device, dtype)`, `.type(dtype)`, `.type_as(x)` with `x` shown to be floating, `.half()`
    and `.bfloat16()`. A cast to an explicit float32 or float64 (`.float()`, `.to(torch.float32)`,
    `.to(torch.promote_types(dtype, torch.float32))`) is exact, and nothing casts what it made.

    ## Why is this bad?
    DeepSpeed's `zero.Init()` casts every floating tensor that a constructor returns to the training
    dtype, and `from_pretrained(torch_dtype=torch.bfloat16)` makes bf16 the default dtype while the model's
    `__init__` runs; a dtype taken from an activation or a weight is bf16 or fp16 in mixed-precision
    training. bf16 holds integers exactly only up to 256 (fp16: 2048), and half-integers only up to 128:
    position 257 becomes 256, and every RoPE angle built from it is wrong. transformers 4.37's Llama rotary
    table is off by up to 2.0 in cos under `zero.Init`. An int64 enumeration is never cast. Both act only
    while modules are built: after that an explicit float32 stays float32, exact up to 2**24.

    ## Example
    ```python
    class Positions(nn.Module):
        def __init__(self, max_positions):
            super().__init__()
            self.register_buffer("positions", torch.arange(max_positions, dtype=torch.float32))
    ```

    ## Use instead
    ```python
    class Positions(nn.Module):
        def __init__(self, max_positions):
            super().__init__()
            self.register_buffer("positions", torch.arange(max_positions, dtype=torch.int64).float())
    ```

    ## Fix safety
    The int64 rewrite is offered only where the start, the end and the step are proven integral (integer
    literals, `len(...)`, `.shape[...]`, `.size(...)`, `int(...)`, `//`, parameters annotated `int`, and
    names bound only to such values): `torch.arange(-t, t + 0.1, 1)` has one element more in float32
    than in int64, and a step of `4 / dim` becomes 0 in int64. A fractional start is never fixed: no int64
    enumeration holds 0.5. Where only the end is not proven, and the
    step is a literal, the end is rounded up (`math.ceil`, `math.floor` for a negative step), which keeps
    every element for any real end: `torch.arange(math.ceil(self.max_seq_len_cached), dtype=torch.int64)`
    (with `import math` added where the file has none). A dtype is never lowered:
    - float32: `.float()`, safe: the same float32 tensor, without the rounding.
    - bf16, fp16: `.float()`, unsafe: the result becomes float32.
    - a dtype known only at run time (`x.dtype`, a parameter, `torch.get_default_dtype()`), which may be
      float64: `.to(torch.promote_types(<dtype>, torch.float32))`, unsafe: bf16 becomes float32, while
      float32 and float64 stay as they were. Where the code alone does not show the dtype floating (only a
      name, a parameter named `dtype` or a model's `self.dtype` say so), the cast keeps an integer dtype:
      `.to(torch.promote_types(dtype, torch.float32) if dtype.is_floating_point else dtype)`, since an index
      enumerated as float32 breaks the code that indexes with it. Where the float32 positions then meet bf16
      tensors in an operation that does not promote (a matmul, `einsum`, a convolution), it raises: compute in
      float32 there, and cast the result to the bf16 dtype.

    A cast after an integer enumeration (`torch.arange(n).to(x.dtype)`) gets no fix: positions of float32 or wider
    would make what follows float32 where it was bf16, and a matmul of them with bf16 weights raises. Cast them to
    float32 or wider, and cast what they compute to the model's dtype where it is used. In a rotary class that the
    rope codemod rewrites (RPL202), `.type_as(self.inv_freq)` goes with the class: the codemod casts those positions to
    float32.

    Where the start or the step is not proven integral, the enumeration stays floating. A dtype known only at run
    time becomes `torch.promote_types(<dtype>, torch.float32)` (an integer one kept, as above), unsafe for the same
    reason, and only in a
    method that no constructor runs (neither `__init__`, a method it reaches through `self.`, nor a
    cache builder) of a class that defines its own `__init__`: there neither zero.Init nor a bf16
    default dtype can cast the result. Elsewhere, and for a literal dtype, no fix is offered: in a
    constructor zero.Init casts any floating enumeration; outside one, a literal bf16 or fp16 made float32
    would still be flagged here, so the fix could not clear its finding.

    ## Known problems
    Whether code runs at construction is read from its own file, and for a public helper from its package. A method is
    taken to run after construction when its class's own `__init__` does not reach it; a constructor of another class
    that calls it, or a forward pass run by a constructor, is not seen. Where the class inherits its `__init__`, only
    `forward`, `__call__` and what only they call count as run time. A function passed as a value to a call counts as
    construction code (`self.apply(init_fn)` runs it there), and so does one kept anywhere but on `self`. An instance of
    a plain class copied with `dataclasses.replace` is not seen made. Callers outside the package (an application, a
    script) are not seen: a public helper, or a public plain class, that its package never calls is RPL104's note, not a
    hazard here, even where an application calls it from a constructor. A dtype that arrives through a call the file
    cannot follow (a helper from another module, `self.child.method(...)`) counts as unknown: a literal default then
    decides nothing, and a parameter named `dtype` or annotated `torch.dtype` is taken to be floating. A dtype that a
    helper returns from literal dtypes alone (`adjust_for_device(torch.float64, ids.device)`, no argument naming another
    dtype) is taken as explicit: one of those given; a helper that lowers float64 to float32 where a device lacks it
    (Apple's MPS) lowers it where DeepSpeed's zero.Init does not run, and one that returns bf16 from them is not seen. A
    module built inside a pipeline call runs its `__init__` after the model is loaded; rope-lint cannot tell it from a
    model's module, and reports it. Bounds read from attributes (`self.max_seq_len`, `config.hidden_size`) are not
    proven integral: as an end they are rounded up, as a start or a step they leave the finding without a fix. A cast
    is read only where it follows the call directly, and `.to(x)` only where its argument names a dtype: a cast after
    another method (`torch.arange(n)[None].to(dtype)`), and `.to(other_tensor)`, which takes that tensor's dtype, are
    not seen. A cast to a `dtype` parameter that may be None counts only where a caller in the file passes a floating
    dtype, where an enumeration's `dtype=` of such a parameter is flagged whatever the callers: a public helper's cast
    that only callers outside the file give bf16 is not seen.
    """

    code = "RPL101"
    name = "float-arange"
    prefilter = PrefilterSpec(triggers=(b"arange",), screen=screens.arange_may_be_hazard)
    fix_availability = FixAvailability.SOMETIMES  # none where the file has no name for torch to write `torch.int64`
    fix_safeties = frozenset({FixSafety.SAFE, FixSafety.UNSAFE})
    fix_payloads = (payloads.Int64Enumeration, payloads.PromotedDtype)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        for call in ctx.calls("torch.arange"):
            if enumerations.is_integer_enumeration(ctx, call):
                yield from self._floating_casts(ctx, call)
                continue
            dtype = dtype_argument(call)
            if dtype is None or enumerations.is_fractional(call):
                continue
            # The public helpers that the file runs only after construction: the rest of its package decides.
            called = enumerations.rounds_where_it_runs(ctx, call, dtype)
            if called is None:
                continue
            hazard = (
                f"`torch.arange` enumerates positions in floating dtype `{ast.unparse(dtype)}`, which zero.Init "
                "and bf16 runs round above 256"
            )
            if enumerations.fractional_start(call):
                yield self.report(
                    call, f"{hazard} (above 128 from a fractional start); no int64 enumeration holds it", None, called
                )
                continue
            rounding = enumerations.end_rounding(ctx, call)
            if rounding is not None:
                fix = enumerations.int64_fix(ctx, call, dtype, rounding)
                yield self.report(call, f"{hazard}; {enumerations.int64_hint(ctx, dtype, rounding)}", fix, called)
            else:
                # An int64 enumeration of bounds not proven integral could lose elements or raise: at most a wider
                # dtype, where the dtype is known only at run time and zero.Init cannot cast the result.
                runtime_dtype = qualified_dtype(ctx, dtype) is None
                fix = enumerations.promoted_dtype_fix(ctx, call, dtype) if runtime_dtype else None
                yield self.report(
                    call, f"{hazard}; its start or step is not proven integral, so int64 may change it", fix, called
                )

    def _floating_casts(self, ctx: FileContext, call: ast.Call) -> Iterator[Flagged]:
        """An integer enumeration cast right after to a floating dtype that can be low precision: rounded as an
        enumeration in that dtype is, though neither zero.Init nor the default dtype acts on the cast."""
        found = enumerations.cast_after(ctx, call)
        if found is None:
            return
        cast, argument = found
        method = cast.func.attr  # type: ignore[union-attr]  # `cast_after` gives a method's call
        rounding = "above 256 in bf16"
        if argument is None:  # `.half()`, `.bfloat16()`
            literal = enumerations.cast_literal(ctx, cast)
            target, rounding = f"`{literal}`", "above 2048" if literal == "torch.float16" else "above 256"
        elif method == "type_as":
            if is_floating_tensor(ctx, argument) is not True:
                return
            if enumerations.at_least_float32(enumerations.tensor_literal_dtypes(ctx, argument)):
                return  # float32 holds integers exactly to 2**24, and nothing casts what a cast made
            target = f"the dtype of `{ast.unparse(argument)}`"
        else:
            if enumerations.may_be_none(ctx, call, argument):
                # Unlike `dtype=`, where RPL101 takes such a parameter to carry the model's dtype for callers outside
                # the file too (Known problems): a cast may be to None (`.to(dtype=None)` keeps the int64), so only a
                # caller in the file that passes a floating dtype counts.
                floating = enumerations.passed_floating_dtype(ctx, argument)
            else:
                floating = enumerations.shown_floating(ctx, argument)
            if not floating:
                return
            if enumerations.at_least_float32(enumerations.literal_dtypes(ctx, argument)):
                return
            target = f"`{ast.unparse(argument)}`"
        shown = f".{method}()" if argument is None else f".{method}(...)"
        yield self.report(
            cast,
            f"`torch.arange` enumerates integer positions, then `{shown}` casts them to {target}, which rounds them "
            f"{rounding}; cast to float32 or wider, and to the model's dtype only where they are used",
        )

    def fix(self, node: cst.CSTNode, payload: payloads.Int64Enumeration | payloads.PromotedDtype) -> cst.CSTNode:
        from rope_lint.rules import edits

        if isinstance(payload, payloads.PromotedDtype):
            return edits.promoted_dtype(node, payload)
        return edits.int64_enumeration(node, payload)

    examples = (
        Invalid(
            "import torch\nt = torch.arange(4096, dtype=torch.float32)\n",
            fixed="import torch\nt = torch.arange(4096, dtype=torch.int64).float()\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            "import torch as t\ndef f(n: int):\n    return t.arange(0, n, 2, dtype=t.bfloat16)\n",
            fixed="import torch as t\ndef f(n: int):\n    return t.arange(0, n, 2, dtype=t.int64).float()\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            "from torch import arange, float16\nimport torch\nx = arange(10, dtype=float16)\n",
            fixed="from torch import arange, float16\nimport torch\nx = arange(10, dtype=torch.int64).float()\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            # A dtype known only at run time may be float64: it is promoted to float32 at least, never lowered.
            "import torch\nt = torch.arange(8, dtype=torch.get_default_dtype())\n",
            fixed="import torch\n"
            "t = torch.arange(8, dtype=torch.int64)"
            ".to(torch.promote_types(torch.get_default_dtype(), torch.float32))\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            "import torch\n"
            "class Rotary(torch.nn.Module):\n"
            "    def __init__(self, dim, base=10000):\n"
            "        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))\n"
            '        self.register_buffer("inv_freq", inv_freq)\n'
            "    def cache(self, seq_len: int, device):\n"
            "        t = torch.arange(seq_len, device=device, dtype=self.inv_freq.dtype).float()\n"
            "        return torch.outer(t, self.inv_freq)\n",
            fixed="import torch\n"
            "class Rotary(torch.nn.Module):\n"
            "    def __init__(self, dim, base=10000):\n"
            "        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))\n"
            '        self.register_buffer("inv_freq", inv_freq)\n'
            "    def cache(self, seq_len: int, device):\n"
            "        t = torch.arange(seq_len, device=device, dtype=torch.int64).float()\n"
            "        return torch.outer(t, self.inv_freq)\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            "import torch\n"
            "def f(hidden_states):\n"
            "    batch, length, _ = hidden_states.shape\n"
            "    return torch.arange(length, dtype=hidden_states.dtype) / length\n"
            "GRID = f(torch.zeros(1, 8, 4))\n",
            fixed="import torch\n"
            "def f(hidden_states):\n"
            "    batch, length, _ = hidden_states.shape\n"
            # Only its name says that `hidden_states` is floating: an integer dtype is kept. The quotient is floating
            # where that dtype is, as it was (RPL103 finds nothing new).
            "    return torch.arange(length, dtype=torch.int64)"
            ".to(torch.promote_types(hidden_states.dtype, torch.float32) if hidden_states.dtype.is_floating_point "
            "else hidden_states.dtype) / length\n"
            "GRID = f(torch.zeros(1, 8, 4))\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            "import torch\n"
            "def f(x, window: int):\n"
            "    beg, end = x.size(1) + window, -(window // 2)\n"
            "    return torch.arange(beg, end, -1.0, dtype=torch.float)\n"
            "TABLE = f(torch.zeros(1, 8), 4)\n",
            fixed="import torch\n"
            "def f(x, window: int):\n"
            "    beg, end = x.size(1) + window, -(window // 2)\n"
            "    return torch.arange(beg, end, -1, dtype=torch.int64).float()\n"
            "TABLE = f(torch.zeros(1, 8), 4)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # An end not proven integral (a fraction would be truncated by int64): rounded up with `math.ceil`, which
            # keeps the elements, since the start and the step are integral.
            # A helper run at import, which may be inside a constructor's module (`TABLE = f(8)`).
            "import torch\ndef f(t: int):\n    return torch.arange(-t, t + 0.1, 1, dtype=torch.float32)\n"
            "TABLE = f(8)\n",
            fixed="import torch\nimport math\n\n"
            "def f(t: int):\n"
            "    return torch.arange(-t, math.ceil(t + 0.1), 1, dtype=torch.int64).float()\n"
            "TABLE = f(8)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # A start not proven integral, a dtype known only at run time, in a method that no constructor runs: the
            # enumeration stays floating, at float32 or wider.
            "import torch\n"
            "class Positions(torch.nn.Module):\n"
            "    def __init__(self, length):\n"
            "        self.length = length\n"
            "    def forward(self, x):\n"
            "        return torch.arange(-self.length, self.length, dtype=x.dtype)\n",
            fixed="import torch\n"
            "class Positions(torch.nn.Module):\n"
            "    def __init__(self, length):\n"
            "        self.length = length\n"
            "    def forward(self, x):\n"
            "        return torch.arange(-self.length, self.length, dtype=torch.promote_types(x.dtype, torch.float32) "
            "if x.dtype.is_floating_point else x.dtype)\n",
            safety=FixSafety.UNSAFE,
        ),
        # A fractional or unknown step, or a start not proven integral: an int64 enumeration could lose an element or
        # raise, so no fix.
        Invalid(
            "import torch\ndef f(dim):\n    return torch.arange(0, 1, 4 / dim, dtype=torch.float32)\nTABLE = f(8)\n"
        ),
        Invalid(
            "import torch\ndef f(n: int, step):\n    return torch.arange(0, n, step, dtype=torch.float32)\n"
            "TABLE = f(8, 2)\n"
        ),
        Invalid(
            # At construction, zero.Init casts a floating enumeration whatever its dtype.
            "import torch\n"
            "class Positions(torch.nn.Module):\n"
            "    def __init__(self, length, x):\n"
            "        self.table = torch.arange(-length / 2, length / 2, dtype=x.dtype)\n"
        ),
        Invalid(
            # No name for torch itself to write `torch.int64` with: flagged, not fixed.
            "from torch import arange, float32\nt = arange(8, dtype=float32)\n",
        ),
        Invalid(
            # A float32 default that a caller in the file overrides with bf16.
            "import torch\n"
            "def grid(n: int, dtype=torch.float32):\n"
            "    return torch.arange(n, dtype=dtype)\n"
            "def half_grid(n: int):\n"
            "    return grid(n, dtype=torch.bfloat16)\n",
            fixed="import torch\n"
            "def grid(n: int, dtype=torch.float32):\n"
            "    return torch.arange(n, dtype=torch.int64).to(torch.promote_types(dtype, torch.float32))\n"
            "def half_grid(n: int):\n"
            "    return grid(n, dtype=torch.bfloat16)\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            # The dtype of a module's parameter follows the model into bf16, in forward too.
            "import torch\n"
            "class Bias(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            "        super().__init__()\n"
            "        self.proj = torch.nn.Linear(dim, dim)\n"
            "    def forward(self, x, n: int):\n"
            "        return torch.arange(n, dtype=self.proj.weight.dtype)\n",
            fixed="import torch\n"
            "class Bias(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            "        super().__init__()\n"
            "        self.proj = torch.nn.Linear(dim, dim)\n"
            "    def forward(self, x, n: int):\n"
            "        return torch.arange(n, dtype=torch.int64).to(torch.promote_types(self.proj.weight.dtype, "
            "torch.float32) if self.proj.weight.dtype.is_floating_point else self.proj.weight.dtype)\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            # A dtype parameter that a caller in the file gives an activation's dtype.
            "import torch\n"
            "def _positions(n: int, kind):\n"
            "    return torch.arange(n, dtype=kind)\n"
            "def attend(q):\n"
            "    return _positions(q.shape[1], q.dtype)\n",
            fixed="import torch\n"
            "def _positions(n: int, kind):\n"
            "    return torch.arange(n, dtype=torch.int64).to(torch.promote_types(kind, torch.float32) "
            "if kind.is_floating_point else kind)\n"
            "def attend(q):\n"
            "    return _positions(q.shape[1], q.dtype)\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            # `self.theta` was computed as floats: its dtype is the model's after `.to(torch.bfloat16)`.
            "import torch\n"
            "class Rope(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            "        super().__init__()\n"
            "        self.theta = torch.nn.Parameter(1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim))\n"
            "    def forward(self, x):\n"
            "        t = torch.arange(x.shape[1], dtype=self.theta.dtype)\n"
            "        return torch.outer(t, self.theta)\n",
            fixed="import torch\n"
            "class Rope(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            "        super().__init__()\n"
            "        self.theta = torch.nn.Parameter(1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim))\n"
            "    def forward(self, x):\n"
            "        t = torch.arange(x.shape[1], dtype=torch.int64).to(torch.promote_types(self.theta.dtype, torch.float32))\n"  # noqa: E501
            "        return torch.outer(t, self.theta)\n",
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            # A module-level helper that a constructor builds a buffer with: explicit float32 at construction.
            "import torch\n"
            "def _angles(n: int, dim: int):\n"
            "    return torch.arange(n, dtype=torch.float32)[:, None] / dim\n"
            "class Table(torch.nn.Module):\n"
            "    def __init__(self, n, dim):\n"
            "        super().__init__()\n"
            '        self.register_buffer("angles", _angles(n, dim))\n'
            "    def forward(self, x):\n"
            "        return x + _angles(x.shape[1], x.shape[2])\n",
            fixed="import torch\n"
            "def _angles(n: int, dim: int):\n"
            "    return torch.arange(n, dtype=torch.int64).float()[:, None] / dim\n"
            "class Table(torch.nn.Module):\n"
            "    def __init__(self, n, dim):\n"
            "        super().__init__()\n"
            '        self.register_buffer("angles", _angles(n, dim))\n'
            "    def forward(self, x):\n"
            "        return x + _angles(x.shape[1], x.shape[2])\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # A public helper that the file calls at import as well as in forward.
            "import torch\n"
            "def timestep_embedding(t, dim: int):\n"
            "    return t[:, None] * torch.arange(dim, dtype=torch.float32)\n"
            "NULL_EMBEDDING = timestep_embedding(torch.zeros(1), 8)\n"
            "class Embed(torch.nn.Module):\n"
            "    def forward(self, t):\n"
            "        return timestep_embedding(t, 8)\n",
            fixed="import torch\n"
            "def timestep_embedding(t, dim: int):\n"
            "    return t[:, None] * torch.arange(dim, dtype=torch.int64).float()\n"
            "NULL_EMBEDDING = timestep_embedding(torch.zeros(1), 8)\n"
            "class Embed(torch.nn.Module):\n"
            "    def forward(self, t):\n"
            "        return timestep_embedding(t, 8)\n",
            safety=FixSafety.SAFE,
        ),
        # A fractional start with an integral step enumerates half-integers: no int64 rewrite holds them.
        Invalid("import torch\ndef f(n: int, x):\n    return torch.arange(0.5, n, dtype=x.dtype)\n"),
        # float64 holds integers exactly up to 2**53: exact wherever it runs.
        # Positions that index a tensor are integers, whatever the name of the tensor whose dtype they take.
        Valid(
            "import torch\n"
            "def pair_scores(logits, x):\n"
            "    rows = torch.arange(x.size(0), dtype=x.dtype)\n"
            "    return logits[rows, x]\n"
        ),
        # The dtype of a tensor subclass's own values, which may be an integer one: nothing says it is floating.
        Valid(
            "import torch\n"
            "class IndexTensor(torch.Tensor):\n"
            "    def positions(self):\n"
            "        return torch.arange(self.size(0), dtype=self.dtype)\n"
        ),
        Invalid(
            # A module that a caller hands over, in a file that imports it only inside functions: the fix would have
            # to import it at module level, which such a file is written not to do.
            "def f(n, torch):\n"
            "    return torch.arange(0, n, 2, dtype=torch.bfloat16)\n"
            "def g(n):\n"
            "    import torch\n"
            "    return f(n, torch)\n"
        ),
        Valid("import torch\ndef f(x):\n    return torch.arange(len(x), dtype=torch.float64)\n"),
        Valid("import torch\ndef f(start, n):\n    return torch.arange(start, n, dtype=torch.double)\n"),
        Valid(
            # An integer lookup table held as a parameter that is never trained: its dtype is int32.
            "import torch\n"
            "class Router(torch.nn.Module):\n"
            "    def __init__(self, vocab_size, topk):\n"
            "        super().__init__()\n"
            "        self.token_to_expert = torch.nn.Parameter(\n"
            "            torch.empty(vocab_size, topk, dtype=torch.int32), requires_grad=False\n"
            "        )\n"
            "        rows = torch.arange(vocab_size, dtype=self.token_to_expert.dtype)\n"
            "        self.token_to_expert.data.copy_(rows[:, None] % topk)\n"
        ),
        Valid(
            "import torch\n"
            "def f(ids):\n"
            "    dtype = torch.float64\n"
            "    return torch.arange(ids.shape[-1], dtype=dtype)\n"
        ),
        # Explicit float32 in code that runs only after construction: forward, and what only forward calls.
        Valid(
            "import torch\n"
            "class Positions(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            "        super().__init__()\n"
            "        self.dim = dim\n"
            "    def grid(self, n: int):\n"
            "        return torch.arange(n, dtype=torch.float32)\n"
            "    def forward(self, x):\n"
            "        return x + self.grid(x.shape[1])[:, None] + torch.arange(self.dim, dtype=torch.float)\n"
        ),
        Valid(
            # A private helper that only forward calls.
            "import torch\n"
            "def _grid(n: int):\n"
            "    return torch.arange(n, dtype=torch.float32)\n"
            "class Positions(torch.nn.Module):\n"
            "    def forward(self, x):\n"
            "        return x + _grid(x.shape[1])\n"
        ),
        Valid(
            # A public helper that the file calls only in forward, and no other module of its package calls at
            # construction (here, a file alone: tests/test_package_callers.py has packages).
            "import torch\n"
            "def timestep_embedding(t, dim: int):\n"
            "    return t[:, None] * torch.arange(dim, dtype=torch.float32)\n"
            "class Embed(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            "        super().__init__()\n"
            "        self.dim = dim\n"
            "    def forward(self, t):\n"
            "        return timestep_embedding(t, self.dim)\n"
        ),
        Valid(
            # A public helper that nothing in its package calls: code outside may call it anywhere, which the rules
            # do not see (RPL104's note).
            "import torch\n"
            "def sinusoid_table(n: int, dim: int):\n"
            "    return torch.arange(n, dtype=torch.float32)[:, None] * torch.arange(dim, dtype=torch.float32)\n"
        ),
        Valid(
            # A dataclass is not a module: its `__post_init__` runs where an instance is made, here nowhere in sight.
            _SCHEDULE + "def apply_schedule(model, schedule: Schedule):\n"
            "    if isinstance(schedule, Schedule):\n"
            "        model.grid = schedule.grid\n"
        ),
        Invalid(
            # The same class made by a module's constructor.
            _SCHEDULE + _MAKES_A_SCHEDULE,
            fixed=_SCHEDULE.replace("dtype=torch.float32)", "dtype=torch.int64).float()") + _MAKES_A_SCHEDULE,
            safety=FixSafety.SAFE,
        ),
        Valid(
            # A table of functions whose entries the constructor keeps (`partial`, `append`) and forward runs.
            "import functools\n"
            "import torch\n"
            "def _time_features(t, dim: int):\n"
            "    return t[:, None] * torch.arange(dim, dtype=torch.float32)\n"
            "FEATURES = {'time': _time_features}\n"
            "class Features(torch.nn.Module):\n"
            "    def __init__(self, names, dim: int):\n"
            "        super().__init__()\n"
            "        self.features = []\n"
            "        for name in names:\n"
            "            if name in FEATURES:\n"
            "                self.features.append(functools.partial(FEATURES[name], dim=dim))\n"
            "    def forward(self, t):\n"
            "        return torch.cat([feature(t) for feature in self.features], dim=-1)\n"
        ),
        Invalid(
            # A function kept on `self` and read by the constructor: `self.apply(self.init_fn)` would run it alike.
            "import torch\n"
            "def _positions(n: int):\n"
            "    return torch.arange(n, dtype=torch.float32)\n"
            "class Tables(torch.nn.Module):\n"
            "    def __init__(self, n: int):\n"
            "        super().__init__()\n"
            "        self.make = _positions\n"
            "        self.table = self.make(n)\n",
            fixed="import torch\n"
            "def _positions(n: int):\n"
            "    return torch.arange(n, dtype=torch.int64).float()\n"
            "class Tables(torch.nn.Module):\n"
            "    def __init__(self, n: int):\n"
            "        super().__init__()\n"
            "        self.make = _positions\n"
            "        self.table = self.make(n)\n",
            safety=FixSafety.SAFE,
        ),
        Invalid(
            # A table of functions whose entry the constructor runs.
            "import torch\n"
            "def _positions(n: int):\n"
            "    return torch.arange(n, dtype=torch.float32)\n"
            "TABLES = {'positions': _positions}\n"
            "class Tables(torch.nn.Module):\n"
            "    def __init__(self, kind: str, n: int):\n"
            "        super().__init__()\n"
            "        self.table = TABLES[kind](n)\n",
            fixed="import torch\n"
            "def _positions(n: int):\n"
            "    return torch.arange(n, dtype=torch.int64).float()\n"
            "TABLES = {'positions': _positions}\n"
            "class Tables(torch.nn.Module):\n"
            "    def __init__(self, kind: str, n: int):\n"
            "        super().__init__()\n"
            "        self.table = TABLES[kind](n)\n",
            safety=FixSafety.SAFE,
        ),
        Valid(
            # A submodule's forward, given float32 by the forward of the module that holds it.
            "import torch\n"
            "class Positions(torch.nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "    def forward(self, n: int, dtype=None):\n"
            "        return torch.arange(n, dtype=dtype)\n"
            "class Model(torch.nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.positions = Positions()\n"
            "    def forward(self, x):\n"
            "        return x + self.positions(x.shape[1], dtype=torch.float32)\n"
        ),
        Valid(
            # A pipeline step, and a float32 default that no caller in the file overrides.
            "import torch\n"
            "class Pipeline:\n"
            "    def __init__(self, unet):\n"
            "        self.unet = unet\n"
            "    def guidance_embedding(self, w, dim=512, dtype=torch.float32):\n"
            "        return w[:, None] * torch.arange(dim // 2, dtype=dtype)\n"
            "    def __call__(self, w):\n"
            "        return self.unet(self.guidance_embedding(w, dim=256))\n"
        ),
        Valid(
            # A caller that passes float32 explicitly, from forward.
            "import torch\n"
            "class Rope(torch.nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "    def positions(self, n: int, dtype=None):\n"
            "        return torch.arange(n, dtype=dtype)\n"
            "    def forward(self, x):\n"
            "        return self.positions(x.shape[1], dtype=torch.float32)\n"
        ),
        Valid(
            # An activation cast to float32 just before: its dtype is float32, in forward.
            "import torch\n"
            "class Fourier(torch.nn.Module):\n"
            "    def forward(self, inputs):\n"
            "        inputs = inputs.to(torch.float32)\n"
            "        return inputs * torch.arange(6, 9, dtype=inputs.dtype)[:, None]\n"
        ),
        Invalid(
            # The table's dtype is what a method of the class returns: floats, rounded by zero.Init at construction.
            "import torch\n"
            "class ScaledRotary(torch.nn.Module):\n"
            "    def __init__(self, dim: int, max_positions: int):\n"
            "        super().__init__()\n"
            "        freqs = 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim)\n"
            '        self.register_buffer("theta", self.scaled(freqs))\n'
            "        t = torch.arange(max_positions, dtype=self.theta.dtype)\n"
            '        self.register_buffer("angles", torch.outer(t, self.theta))\n'
            "    def scaled(self, freqs):\n"
            "        return torch.tensor([f / 8 for f in freqs.tolist()], dtype=freqs.dtype)\n",
            fixed="import torch\n"
            "class ScaledRotary(torch.nn.Module):\n"
            "    def __init__(self, dim: int, max_positions: int):\n"
            "        super().__init__()\n"
            "        freqs = 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim)\n"
            '        self.register_buffer("theta", self.scaled(freqs))\n'
            "        t = torch.arange(max_positions, dtype=torch.int64)"
            ".to(torch.promote_types(self.theta.dtype, torch.float32) if self.theta.dtype.is_floating_point "
            "else self.theta.dtype)\n"
            '        self.register_buffer("angles", torch.outer(t, self.theta))\n'
            "    def scaled(self, freqs):\n"
            "        return torch.tensor([f / 8 for f in freqs.tolist()], dtype=freqs.dtype)\n",
            safety=FixSafety.UNSAFE,
        ),
        Valid(
            # The same method returning integers: an int64 enumeration stays exact.
            "import torch\n"
            "class Buckets(torch.nn.Module):\n"
            "    def __init__(self, n: int):\n"
            "        super().__init__()\n"
            '        self.register_buffer("edges", self.edges_of(n))\n'
            "        t = torch.arange(n, dtype=self.edges.dtype)\n"
            "    def edges_of(self, n):\n"
            "        return torch.arange(n) * 4\n"
        ),
        Valid(
            # A dtype that a helper picks from a literal float64 alone, at construction: float64, exact to 2**53.
            "import torch\n"
            "from .utils import adjust_for_device\n"
            "class Rotary(torch.nn.Module):\n"
            "    def __init__(self, dim: int, device=None):\n"
            "        super().__init__()\n"
            "        dtype = adjust_for_device(torch.float64, device)\n"
            "        self.inv_freq = 1.0 / 10000 ** (torch.arange(0, dim, 2, dtype=dtype) / dim)\n"
        ),
        Valid(
            # From a literal float32 in forward: explicit (RPL104's note).
            "import torch\n"
            "from .utils import adjust_for_device\n"
            "class Rotary(torch.nn.Module):\n"
            "    def forward(self, ids, dim: int):\n"
            "        dtype = adjust_for_device(torch.float32, ids.device)\n"
            "        return torch.arange(0, dim, 2, dtype=dtype, device=ids.device)\n"
        ),
        Invalid(
            # The same at construction, where zero.Init casts it.
            "import torch\n"
            "from .utils import adjust_for_device\n"
            "class Rotary(torch.nn.Module):\n"
            "    def __init__(self, dim: int, device=None):\n"
            "        super().__init__()\n"
            "        dtype = adjust_for_device(torch.float32, device)\n"
            "        self.inv_freq = 1.0 / 10000 ** (torch.arange(0, dim, 2, dtype=dtype) / dim)\n",
            fixed="import torch\n"
            "from .utils import adjust_for_device\n"
            "class Rotary(torch.nn.Module):\n"
            "    def __init__(self, dim: int, device=None):\n"
            "        super().__init__()\n"
            "        dtype = adjust_for_device(torch.float32, device)\n"
            "        self.inv_freq = 1.0 / 10000 ** (torch.arange(0, dim, 2, dtype=torch.int64)"
            ".to(torch.promote_types(dtype, torch.float32)) / dim)\n",
            safety=FixSafety.UNSAFE,
        ),
        Valid(
            # A fractional start in forward with an explicit float32.
            "import torch\n"
            "class Grid(torch.nn.Module):\n"
            "    def forward(self, x):\n"
            "        return torch.arange(0.5, x.shape[-1], dtype=torch.float32)\n"
        ),
        Valid("import torch\nt = torch.arange(n, dtype=torch.int64).float()\n"),
        # An integer enumeration cast right after to a dtype that can be low precision: no fix (Fix safety).
        Invalid(
            "import torch\n"
            "def positions(hidden_states, n: int):\n"
            "    return torch.arange(n, device=hidden_states.device).to(hidden_states.dtype)\n"
        ),
        Invalid("import torch\ndef f(n: int, dtype: torch.dtype):\n    return torch.arange(n).to(dtype=dtype)\n"),
        Invalid("import torch\ndef f(x, n: int):\n    return torch.arange(n, dtype=torch.int64).type_as(x)\n"),
        Invalid("import torch\nsteps = torch.arange(4096).bfloat16()\n"),
        # Detection boxes are floating, as their name says.
        Invalid(
            "import torch\n"
            "def encode_boxes(boxes, features: int):\n"
            "    return torch.arange(features, dtype=torch.int64, device=boxes.device).to(boxes.dtype)\n"
        ),
        # Cast to float32 or wider, moved to a device, or cast to an integer tensor's dtype: exact.
        Valid("import torch\ndef f(x, n: int):\n    return torch.arange(n, device=x.device).to(torch.float32)\n"),
        Valid(
            "import torch\n"
            "def f(x, n: int):\n"
            "    return torch.arange(n).to(torch.promote_types(x.dtype, torch.float32))\n"
        ),
        Valid("import torch\ndef f(x, n: int):\n    return torch.arange(n).to(x.device)\n"),
        Valid("import torch\ndef f(input_ids, n: int):\n    return torch.arange(n).type_as(input_ids)\n"),
        Valid(
            # Frequencies computed from a float32 enumeration are float32 or wider, whatever the other operands.
            "import torch\n"
            "def table(n: int, dim: int):\n"
            "    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))\n"
            "    return torch.outer(torch.arange(n).type_as(inv_freq), inv_freq)\n"
        ),
        Valid(
            # A dtype that defaults to None, which no caller in the file gives: `.to(dtype=None)` keeps the int64.
            "import torch\ndef frequencies(dim: int, dtype=None):\n    return torch.arange(0, dim, 2).to(dtype=dtype)\n"
        ),
        Invalid(
            # The same, where a caller in the file passes an activation's dtype.
            "import torch\n"
            "def frequencies(dim: int, dtype=None):\n"
            "    return torch.arange(0, dim, 2).to(dtype=dtype)\n"
            "def embed(hidden_states):\n"
            "    return frequencies(64, dtype=hidden_states.dtype)\n"
        ),
        Valid("import torch\ndef f(bbox):\n    return torch.arange(4, dtype=bbox.dtype)\n"),
        Valid("import torch\ndef f(input_ids):\n    return torch.arange(input_ids.shape[1], dtype=input_ids.dtype)\n"),
        Valid(
            "import torch\n"
            "def f(input_ids):\n"
            "    dtype, device = input_ids.dtype, input_ids.device\n"
            "    return torch.arange(8, dtype=dtype, device=device)\n"
        ),
        Valid(
            "import torch\n"
            "def f(durations):\n"
            "    predicted_lengths = torch.clamp_min(torch.ceil(durations), 1).long()\n"
            "    return torch.arange(predicted_lengths.max(), dtype=predicted_lengths.dtype)\n"
        ),
        Valid("import torch\nsteps = torch.arange(0, 1, 0.1, dtype=torch.float32)\n"),
        Valid("import numpy as np\nx = np.arange(10, dtype=np.float32)\n"),
        Valid("def arange(n, dtype):\n    pass\nx = arange(10, dtype=float)\n"),
    )
