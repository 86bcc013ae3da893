from __future__ import annotations

import ast
from collections.abc import Iterator

from rope_lint.diagnostics import FixSafety
from rope_lint.prefilter import PrefilterSpec, screens
from rope_lint.rules.analysis import dtypes, logdomain, rotary
from rope_lint.rules.analysis.context import FileContext, FunctionNode, child_nodes, is_self_attribute, walk
from rope_lint.rules.base import FixAvailability, Flagged, Invalid, Rule, Valid
from rope_lint.rules.payloads import ClassRewrite

# A rotary class whose constructor builds its tables through a method that a subclass may override (an example's).
_BUILDING_BASE = (
    "import torch\n"
    "class RotaryEmbedding(torch.nn.Module):\n"
    "    def __init__(self, dim):\n"
    "        super().__init__()\n"
    '        self.inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, device="cpu").float() / dim))\n'
    "        self._build(64)\n"
    "    def _build(self, n):\n"
    '        self.angles = torch.outer(torch.arange(n, device="cpu").float(), self.inv_freq)\n'
)


class RopeDeviceMath(Rule):
    """
    RoPE frequencies or tables are computed on the accelerator.

    ## What it does
    In the methods of a rotary class that build its tables (`__init__`, the methods it reaches, cache builders,
    and a subclass's overrides of what a rotary base class of the file reaches from its `__init__`), flags
    `torch.arange(..., device=device)` with a device other than the CPU, an enumeration with no device at all
    (DeepSpeed's `zero.Init()` fills in the accelerator), and `.to(device)` applied to an enumeration before
    the `pow`, `outer`, `cos` and `sin` that build the tables.

    Only an enumeration whose values reach float math there is flagged: a floating cast, `/`, `**`, a product
    with anything not proven integer (frequencies), `torch.outer`, `torch.polar`, `cos`, `sin`, or any call
    that is not known to keep integers. Its value is followed through local names, the class's methods it is
    passed to (`self.rope_params(positions, dim)`), and its buffers' reads in those methods. An integer
    enumeration that is only indexed with, gathered or scattered by, compared or masked with (here, or as an
    integer buffer that the class reads only so) is exact on any device, and is not flagged; nor is one whose
    table is dead: every other method recomputes it before reading it, or reads it only for its dtype or device.

    ## Why is this bad?
    The tables are computed once and reused for every token, so they should be computed once, exactly. GPU
    `pow`, `cos` and `sin` round differently from the CPU's and from one another across GPU generations, so
    the same checkpoint gets different tables on different machines; and under `zero.Init` an enumeration
    with no device is built on the accelerator in the training dtype. Computing on the CPU in float32 and
    moving the result costs a copy of a few kilobytes, once.

    ## Example
    ```python
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float().to(device) / dim))
    ```

    ## Use instead
    ```python
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64, device="cpu").float() / dim))
    ```

    ## Fix safety
    Unsafe, and made by the rope codemod on the whole class: the tables then live on the CPU until `forward`
    moves them to the device of a tensor it takes. The codemod places each enumeration on the CPU and leaves
    its dtype to RPL101. A class whose methods return tables without taking a tensor (a sequence length, a
    shape) has no device to move them to, and the codemod leaves it as it is; so it does a class whose code after
    construction uses what its construction code returns, and one built in part by a base in another module (a
    method of the base computes part of the tables on the default device, or the base keeps what the class's
    builders return); `fix` leaves one whose tables other code of the package reads off the module (see RPL202). No
    fix in a file written for TorchScript, which could not script what the codemod writes. The rewrite is RPL202's
    fix too, and hands on what its Fix safety says: a forward that returns its tables, or what it computes from them,
    without a cast to a dtype returns float32 in a module cast to bf16, where it returned bf16.

    ## Known problems
    A table is judged dead from its class alone: a subclass, or another module, that reads
    `rotary.inv_freq`'s values is not seen, and the enumeration that built it is not flagged.
    """

    code = "RPL203"
    name = "rope-device-math"
    prefilter = PrefilterSpec(
        triggers=(b"inv_freq", *rotary.ROTARY_NAME_TRIGGERS),  # the table, or a rotary class by its name
        screen=screens.rotary_name_may_be_class,
        parses_whole_class=rotary.may_be_rotary,
    )
    fix_availability = FixAvailability.SOMETIMES  # none for a class whose tables have no device to move to
    fix_safeties = frozenset({FixSafety.UNSAFE})
    fix_payloads = (ClassRewrite,)

    def check(self, ctx: FileContext) -> Iterator[Flagged]:
        classes = rotary.top_level_classes(ctx.tree)
        # A buffer kept with a float32 copy beside it (the fix's) only carries a state_dict key: the class computes
        # from the copy, wherever the buffer's value was computed.
        beside_a_copy = {id(node) for store in rotary.stores_beside_a_copy(ctx) for node in walk(store.value)}
        for cls in rotary.rotary_classes(ctx):
            rewrite = rotary.rope_class_fix(ctx, cls)
            construction = rotary.construction_methods(cls, classes)
            flow = _Flow(ctx, cls, construction)
            for method in rotary.methods(cls):
                if method.name not in construction:
                    continue
                for node in walk(method):
                    if not isinstance(node, ast.Call) or id(node) in beside_a_copy:
                        continue
                    if not _flagged(ctx, node, flow, method):
                        continue
                    if ctx.qualified_name(node.func) == "torch.arange" and not _on_cpu(ctx, node):
                        yield self.report(
                            node,
                            "RoPE positions or frequencies are enumerated on the accelerator (or left to zero.Init "
                            'to place there); compute the tables on the CPU (`device="cpu"`) and move them',
                            rewrite,
                        )
                    else:
                        yield self.report(
                            node,
                            "the enumeration moves to the accelerator before the RoPE math; compute on the CPU "
                            "and move the finished table",
                            rewrite,
                        )

    examples = (
        Invalid(
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim, device=None):\n"
            "        inv_freq = 1.0 / (10000 ** (\n"
            "            torch.arange(0, dim, 2).float().to(device) / dim))\n",
            fixed="import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim, device=None):\n"
            "        inv_freq = 1.0 / (10000 ** (\n"
            '            torch.arange(0, dim, 2, device="cpu").float() / dim))\n',
            safety=FixSafety.UNSAFE,
            count=2,
        ),
        Invalid(
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def _set_cache(self, seq_len, device):\n"
            "        t = torch.arange(seq_len, device=device, dtype=torch.int64)\n",
            fixed="import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def _set_cache(self, seq_len, device):\n"
            '        t = torch.arange(seq_len, device="cpu", dtype=torch.int64)\n',
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            # forward takes no tensor: the tables would have no device to move to, so the codemod leaves the class.
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            '        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))\n'
            "    def forward(self, seq_len):\n"
            "        return torch.outer(torch.arange(seq_len, device=self.inv_freq.device).float(), self.inv_freq)\n"
        ),
        Valid(
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            '        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, device="cpu").float() / dim))\n'
            "    def forward(self, x, position_ids):\n"
            "        return torch.arange(x.shape[1], device=x.device)\n"
        ),
        Invalid(
            # The base's `__init__` calls `self._build`, so the subclass's override runs at construction too.
            _BUILDING_BASE + "class ScaledRotaryEmbedding(RotaryEmbedding):\n"
            "    def _build(self, n):\n"
            "        self.angles = torch.outer(torch.arange(n).float() / 2, self.inv_freq)\n",
            fixed=_BUILDING_BASE + "class ScaledRotaryEmbedding(RotaryEmbedding):\n"
            "    def _build(self, n):\n"
            '        self.angles = torch.outer(torch.arange(n, device="cpu").float() / 2, self.inv_freq)\n',
            safety=FixSafety.UNSAFE,
        ),
        Invalid(
            # A base in another module calls the builder and keeps what it returns, where the base's own methods and
            # kernels read it: the codemod leaves the class, which would hand that base a CPU table.
            "import torch\n"
            "from .rotary import RotaryEmbedding\n"
            "class ScaledRotaryEmbedding(RotaryEmbedding):\n"
            "    def _compute_cos_sin_cache(self):\n"
            "        t = torch.arange(self.max_positions).float() / self.scale\n"
            "        freqs = torch.outer(t, self._compute_inv_freq(self.base))\n"
            "        return torch.cat((freqs.cos(), freqs.sin()), dim=-1)\n"
        ),
        Valid(
            # The finished table goes where a buffer registered without a move would be, the default device (the
            # codemod's spelling, or torch's from 2.3 on): not math on a device.
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim, n):\n"
            '        freqs = 1.0 / (10000 ** (torch.arange(0, dim, 2, device="cpu").float() / dim))\n'
            '        angles = torch.outer(torch.arange(n, device="cpu").float(), freqs)\n'
            '        self.register_buffer("angles", angles.to(torch.empty(0).device), persistent=False)\n'
            '        self.register_buffer("steps", torch.arange(n, device="cpu").to(torch.get_default_device()))\n'
        ),
        Valid(
            # A buffer kept with a float32 copy beside it, what the rope codemod leaves of a persistent table, carries
            # only its state_dict key: the class computes from the copy, wherever the buffer's value was computed.
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, d):\n"
            '        self.register_buffer("inv_freq", scale(d) / 10000 ** (torch.arange(0, d, 2).float() / d))\n'
            '        with torch.device("cpu"):\n'
            '            self.inv_freq_fp32 = scale(d) / 10000 ** (torch.arange(0, d, 2, device="cpu").float() / d)\n'
        ),
        # Integer positions passed to a method that builds the angles with `torch.outer` and `torch.polar`.
        # (Here and below, forward takes no tensor, so the codemod leaves the class as it is.)
        Invalid(
            "import torch\n"
            "class EmbedRope(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            "        positions = torch.arange(4096)\n"
            "        self.cos_cached = self.angles(positions, dim).real\n"
            "    def angles(self, index, dim):\n"
            '        inv = 1.0 / torch.pow(10000, torch.arange(0, dim, 2, device="cpu").float() / dim)\n'
            "        freqs = torch.outer(index, inv)\n"
            "        return torch.polar(torch.ones_like(freqs), freqs)\n"
            "    def forward(self, n):\n"
            "        return self.cos_cached[:n]\n"
        ),
        # Integer enumerations only indexed with, compared or kept as integers: exact on any device.
        Valid(
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim, n):\n"
            '        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, device="cpu").float() / dim))\n'
            '        self.register_buffer("even", inv_freq.index_select(0, torch.arange(0, dim // 2, 2)))\n'
            "        idx = torch.arange(n)\n"
            '        self.register_buffer("causal", idx[:, None] >= idx[None, :])\n'
            '        self.register_buffer("swap", torch.arange(dim).view(-1, 2).flip(-1).reshape(-1))\n'
            "    def forward(self, x):\n"
            "        return x[..., self.swap] * self.even.to(x.device)\n"
        ),
        # Near miss: integer positions times the frequencies are float math.
        Invalid(
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim, n):\n"
            '        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, device="cpu").float() / dim))\n'
            "        idx = torch.arange(n)\n"
            '        self.register_buffer("cos_cached", (idx[:, None] * inv_freq[None, :]).cos())\n'
            "    def forward(self, n):\n"
            "        return self.cos_cached[:n]\n"
        ),
        # A dead table: forward recomputes it in float32, and reads the buffer only for its dtype and device.
        Valid(
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            '        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))\n'
            "        self.dim = dim\n"
            "    def forward(self, n):\n"
            "        device = self.inv_freq.device\n"
            "        theta = 1.0 / (10000 ** (torch.arange(0, self.dim, 2, device=device).float() / self.dim))\n"
            "        return torch.outer(torch.arange(n, device=device).float(), theta).to(self.inv_freq.dtype)\n"
        ),
        # ... or assigns it anew before any read.
        Valid(
            "import torch\n"
            "class ScaledRotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            '        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))\n'
            "        self.dim = dim\n"
            "    def forward(self, x, factors):\n"
            "        steps = torch.arange(0, self.dim, 2, device=x.device).float() / self.dim\n"
            "        self.inv_freq = 1.0 / (factors * 10000**steps)\n"
            "        return self.inv_freq[None, :, None] * x\n"
        ),
        # Near miss: a forward that reads the table's values keeps it live.
        Invalid(
            "import torch\n"
            "class RotaryEmbedding(torch.nn.Module):\n"
            "    def __init__(self, dim):\n"
            '        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))\n'
            "    def forward(self, x, factors):\n"
            "        inv_freq = self.inv_freq * factors\n"
            "        self.inv_freq = inv_freq\n"
            "        return inv_freq[None, :, None] * x\n"
        ),
        Valid(
            "import torch\n"
            "class Attention(torch.nn.Module):\n"
            "    def mask(self, n, device):\n"
            "        return torch.arange(n, device=device)\n"
        ),
    )


def _flagged(ctx: FileContext, call: ast.Call, flow: _Flow, method: FunctionNode) -> bool:
    """An enumeration left off the CPU, or moved off it, whose values reach float math and a table that is used."""
    on_device = ctx.qualified_name(call.func) == "torch.arange" and not _on_cpu(ctx, call)
    if not (on_device or _moves_enumeration(ctx, call)):
        return False
    return flow.feeds_float_math(call, method) and flow.live(call, method)


def _on_cpu(ctx: FileContext, call: ast.Call) -> bool:
    device = next((kw.value for kw in call.keywords if kw.arg == "device"), None)
    if isinstance(device, ast.Constant) and device.value == "cpu":
        return True
    # torch.device("cpu")
    return (
        isinstance(device, ast.Call)
        and ctx.qualified_name(device.func) == "torch.device"
        and bool(device.args)
        and isinstance(device.args[0], ast.Constant)
        and device.args[0].value == "cpu"
    )


def _moves_enumeration(ctx: FileContext, call: ast.Call) -> bool:
    """`<expression with torch.arange>.to(device)`: a move to a device named by a variable. Not a move to the default
    device (`rotary.names_default_device`), which places a finished table where a buffer registered without a move
    would be (the rope codemod's own placement of a buffer it keeps)."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "to"):
        return False
    targets = [*call.args, *(kw.value for kw in call.keywords if kw.arg == "device")]
    if any(rotary.names_default_device(ctx, target) for target in targets):
        return False
    moves = any("device" in (ast.unparse(target) if not isinstance(target, ast.Constant) else "") for target in targets)
    return moves and any(
        isinstance(node, ast.Call) and ctx.qualified_name(node.func) == "torch.arange" for node in walk(call.func.value)
    )


# What consumes an enumeration's value, followed through the methods of its class (`_Flow`).
_FLOAT = "float"  # float math, or a use not known to keep integers (another function's call, a return)
_INDEX = "index"  # consumed as integers, or not at all: an index, a position, a mask, a comparison, a dtype
_STORE = "store"  # kept as `self.<name>`, whose reads decide

# Methods that keep their receiver's integer values (their other arguments are shapes, dimensions or devices);
# `.to(...)` unless to a floating dtype.
_INTEGER_PRESERVING = frozenset(
    {
        "unsqueeze", "squeeze", "view", "reshape", "expand", "expand_as", "repeat", "permute", "transpose", "flip",
        "flatten", "contiguous", "clone", "detach", "cpu", "cuda", "roll", "repeat_interleave", "t", "long", "int",
        "abs", "neg", "to",
    }
)  # fmt: skip
# Methods and torch functions that read an integer tensor as positions, a mask or a comparison.
_INDEX_USES = frozenset(
    {
        "gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "index_select", "index_add", "index_add_",
        "index_copy", "index_copy_", "index_fill", "index_fill_", "index_put", "index_put_", "take",
        "take_along_dim", "masked_fill", "masked_fill_", "masked_select", "where", "eq", "ne", "lt", "le", "gt",
        "ge", "bucketize", "searchsorted",
    }
)  # fmt: skip
# Reading these of a tensor reads none of its values.
_METADATA = frozenset({"dtype", "device", "shape", "ndim"})
_JOINS = frozenset({"torch.cat", "torch.concat", "torch.stack"})


class _Flow:
    """Follows the value of an expression in a rotary class's method to what consumes it: up through the expressions
    around it, into the local names it is assigned to, into the class's methods it is passed to
    (`self.rope_params(pos, dim)`), and into `self.<name>`.

    `feeds_float_math`: whether any of it may reach float math; an enumeration only indexed with, gathered by or
    compared is exact on any device. An integer buffer that no method of the class reads may be read elsewhere,
    and counts as float math. `live`: whether any of it reaches a use; a table that every method recomputes before
    it reads it, or reads only for its dtype or device, is dead.
    """

    def __init__(self, ctx: FileContext, cls: ast.ClassDef, construction: set[str]) -> None:
        self.ctx = ctx
        self.methods = {method.name: method for method in rotary.methods(cls)}
        self.construction = construction

    def feeds_float_math(self, node: ast.expr, method: FunctionNode) -> bool:
        return any(sink == _FLOAT for sink, _ in self._sinks(node, method, set(), through_float=False))

    def live(self, node: ast.expr, method: FunctionNode) -> bool:
        sinks = self._sinks(node, method, set(), through_float=True)
        return any(sink == _FLOAT or (sink == _STORE and self._values_read(name)) for sink, name in sinks)

    def _values_read(self, name: str) -> bool:
        """Whether a method reads the values of `self.<name>`, unless it first assigns it anew; and, as another
        module may read them, whether no method outside construction mentions it at all."""
        mentioned = False
        for method in self.methods.values():
            for statement in method.body:
                if self._value_reads(statement, method, name):
                    return True
                if method.name in self.construction:
                    continue
                mentioned = mentioned or any(is_self_attribute(node) and node.attr == name for node in walk(statement))
                if _assigns(statement, name):
                    break  # recomputed before any read
        return not mentioned

    def _value_reads(self, scope: ast.AST, method: FunctionNode, name: str) -> list[ast.Attribute]:
        return [
            node
            for node in walk(scope)
            if is_self_attribute(node)
            and node.attr == name
            and isinstance(node.ctx, ast.Load)
            and not self._is_metadata(node, method)
        ]

    def _is_metadata(self, node: ast.expr, method: FunctionNode) -> bool:
        parent = _parents(self.ctx, method).get(node)
        return isinstance(parent, ast.Attribute) and parent.attr in _METADATA

    def _sinks(
        self, node: ast.expr, method: FunctionNode, seen: set[ast.AST], *, through_float: bool
    ) -> Iterator[tuple[str, str]]:
        if node in seen or len(seen) > 500:
            if node not in seen:
                yield _FLOAT, ""
            return
        seen.add(node)
        parent = _parents(self.ctx, method).get(node)

        def up(next_node: ast.expr, in_method: FunctionNode = method) -> Iterator[tuple[str, str]]:
            return self._sinks(next_node, in_method, seen, through_float=through_float)

        if isinstance(parent, ast.Attribute):
            call = _parents(self.ctx, method).get(parent)
            if not (isinstance(call, ast.Call) and call.func is parent):
                yield (_INDEX, "") if parent.attr in _METADATA else (_FLOAT, "")
            elif parent.attr in _INDEX_USES:
                yield _INDEX, ""
            elif through_float or (parent.attr in _INTEGER_PRESERVING and not self._floating_cast(call)):
                yield from up(call)
            else:
                yield _FLOAT, ""
        elif isinstance(parent, ast.Subscript):
            yield from up(parent) if parent.value is node else iter([(_INDEX, "")])
        elif isinstance(parent, ast.Compare):
            yield _INDEX, ""
        elif isinstance(parent, ast.UnaryOp | ast.List | ast.Tuple | ast.Starred):
            yield from up(parent)
        elif isinstance(parent, ast.BinOp):
            other = parent.right if parent.left is node else parent.left
            integral = isinstance(parent.op, ast.Add | ast.Sub | ast.Mult | ast.FloorDiv | ast.Mod)
            if through_float or (integral and logdomain.is_integral(self.ctx, other, method)):
                yield from up(parent)
            else:
                yield _FLOAT, ""
        elif isinstance(parent, ast.Call | ast.keyword):
            yield from self._argument(node, parent, method, seen, through_float=through_float)
        elif isinstance(parent, ast.Assign | ast.AnnAssign) and parent.value is node:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    reads = [
                        read
                        for read in walk(method)
                        if isinstance(read, ast.Name) and read.id == target.id and isinstance(read.ctx, ast.Load)
                    ]
                    if not reads:
                        yield _FLOAT, ""  # a local that nothing reads: code cut short, taken as it stands
                    for read in reads:
                        yield from up(read)
                elif is_self_attribute(target):
                    yield from self._stored(target.attr, seen, through_float=through_float)
                else:
                    yield _FLOAT, ""
        else:
            yield _FLOAT, ""

    def _argument(
        self, node: ast.expr, parent: ast.Call | ast.keyword, method: FunctionNode, seen: set[ast.AST], *,
        through_float: bool,
    ) -> Iterator[tuple[str, str]]:  # fmt: skip
        call = _parents(self.ctx, method).get(parent) if isinstance(parent, ast.keyword) else parent
        if not isinstance(call, ast.Call) or call.func is node:
            yield _FLOAT, ""
            return
        name = self.ctx.qualified_name(call.func)
        attribute = call.func.attr if isinstance(call.func, ast.Attribute) else None
        if name in _JOINS:
            yield from self._sinks(call, method, seen, through_float=through_float)
        elif (name or "").removeprefix("torch.") in _INDEX_USES or (name is None and attribute in _INDEX_USES):
            yield _INDEX, ""
        elif attribute == "register_buffer" and call.args and isinstance(call.args[0], ast.Constant):
            yield from self._stored(str(call.args[0].value), seen, through_float=through_float)
        elif is_self_attribute(call.func) and call.func.attr in self.methods:
            callee = self.methods[call.func.attr]
            parameter = _parameter_bound(callee, call, parent, node)
            if parameter is None:
                yield _FLOAT, ""
                return
            for read in walk(callee):
                if isinstance(read, ast.Name) and read.id == parameter and isinstance(read.ctx, ast.Load):
                    yield from self._sinks(read, callee, seen, through_float=through_float)
        else:
            yield _FLOAT, ""

    def _stored(self, name: str, seen: set[ast.AST], *, through_float: bool) -> Iterator[tuple[str, str]]:
        """`self.<name> = value`: for `live`, the store itself; for `feeds_float_math`, what the class's methods do
        with its reads, or float math where none reads it (another module may)."""
        if through_float:
            yield _STORE, name
            return
        reads = [(read, method) for method in self.methods.values() for read in self._value_reads(method, method, name)]
        if not reads:
            yield _FLOAT, ""
        for read, method in reads:
            yield from self._sinks(read, method, seen, through_float=False)

    def _floating_cast(self, call: ast.Call) -> bool:
        """`.to(...)` with a floating dtype, or one this cannot tell."""
        assert isinstance(call.func, ast.Attribute)
        if call.func.attr != "to":
            return False
        dtype = next((keyword.value for keyword in call.keywords if keyword.arg == "dtype"), None)
        dtype = dtype or next((arg for arg in call.args if not _names_a_device(arg)), None)
        return dtype is not None and dtypes.is_floating_dtype(self.ctx, dtype) is not False


def _names_a_device(node: ast.expr) -> bool:
    """`device`, `x.device`, `"cuda"`: a `.to(...)` argument that moves and does not cast."""
    text = ast.unparse(node)
    return "device" in text or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _parameter_bound(callee: FunctionNode, call: ast.Call, parent: ast.AST, node: ast.expr) -> str | None:
    """The parameter of a method that `self.callee(...)` binds `node` to."""
    if isinstance(parent, ast.keyword):
        return parent.arg
    if any(isinstance(arg, ast.Starred) for arg in call.args):
        return None
    parameters = [argument.arg for argument in [*callee.args.posonlyargs, *callee.args.args]][1:]
    index = next(i for i, arg in enumerate(call.args) if arg is node)
    return parameters[index] if index < len(parameters) else None


def _assigns(statement: ast.stmt, name: str) -> bool:
    """`self.<name> = ...` (a method that starts so recomputes the attribute before any read)."""
    targets = statement.targets if isinstance(statement, ast.Assign) else []
    return any(is_self_attribute(target) and target.attr == name for target in targets)


def _parents(ctx: FileContext, method: FunctionNode) -> dict[ast.AST, ast.AST]:
    return ctx.derived(_parent_map, method)


def _parent_map(ctx: FileContext, method: FunctionNode) -> dict[ast.AST, ast.AST]:
    return {child: node for node in walk(method) for child in child_nodes(node)}
