"""What the RPL2xx rules, the rope codemods and the probe share: which classes are rotary embeddings, and where
they store their tables.

Whether a class is rotary is decided here alone (`is_rotary_class`), from facts that each reader gathers in its
own way: the rules from `ast`, the codemods from LibCST, the probe from the imported class. A class is rotary when
its name says so, when it stores a table, or when a base is rotary. Its tables are `inv_freq` (and
`original_inv_freq`, `long_inv_freq`, ...) and cos/sin caches.

Whether a store holds a table is decided here alone too (`table_stores`): its name says so (the names above, which
the rope codemod rewrites, or a name holding `freq` or a `cos`/`sin` word), or its value is computed as one (see
`computation.is_table_value`: frequencies, an angle, or its cos/sin), or the class multiplies it with positions as
frequencies. The same data flow finds the classes that compute tables for the probe.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import namedtuple
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping

from rope_lint import TYPE_CHECKING, banner
from rope_lint.diagnostics import Fix, FixSafety
from rope_lint.rules.analysis import computation
from rope_lint.rules.analysis.context import (
    FileContext,
    FunctionNode,
    child_nodes,
    is_self_attribute,
    walk,
    written_for_torchscript,
)
from rope_lint.rules.analysis.dtypes import (
    FLOAT32_DTYPES,
    FLOATING_DTYPES,
    INTEGER_DTYPES,
    held_words,
    is_floating_tensor,
    names_a_count,
    qualified_dtype,
)
from rope_lint.rules.payloads import ClassRewrite

if TYPE_CHECKING:
    from typing import TypeGuard

    from rope_lint.prefilter.candidates import Occurrences

# Names are told by the words they hold, with `in`: compiling a pattern costs more than checking a small file.
# A rotary class's name holds one of these.
ROTARY_NAME_WORDS = ("Rotary", "Rope", "RoPE")
ROTARY_NAME_TRIGGERS = tuple(word.encode() for word in ROTARY_NAME_WORDS)
# The methods that cast a tensor to a low-precision dtype whatever their argument: `t.half()`, `t.bfloat16()`, and
# `t.type_as(x)`, which takes the dtype of a tensor that is bf16 or fp16 in mixed precision.
LOW_PRECISION_CAST_METHODS = frozenset({"half", "bfloat16", "type_as"})
# A table's name holds one of these: files and statements without any hold no table.
TABLE_NEEDLES = (
    "inv_freq",
    "cos_cache",
    "sin_cache",
    "coscache",
    "sincache",
    "cached_cos",
    "cached_sin",
    "cos_table",
    "sin_table",
)
# What every table needle holds, fewer and shorter: a search of a whole package for tables looks for these first.
TABLE_NEEDLE_CORES = ("inv_freq", "cache", "_table")
TABLE_TRIGGERS = tuple(needle.encode() for needle in TABLE_NEEDLES)
# The rope codemod keeps a persistent table registered and computes from a float32 copy, `<table>_fp32`.
FP32_COPY_SUFFIX = "_fp32"
# Where a tensor is kept on a module under any name, and the words of the math that computes a table: a class
# holding both may store a table under a name of its own (`angles`, `freqs_base_t`), and a function holding the
# math may compute one for it.
STORE_NEEDLES = ("register_buffer", "register_parameter", "Parameter(", "Buffer(", "setattr(")
# What a line that stores a buffer or a parameter, or assigns a cast (`is_low_precision_cast`), spells.
_STORE_LINE_NEEDLES = (*STORE_NEEDLES, ".to(", *(f".{method}(" for method in sorted(LOW_PRECISION_CAST_METHODS)))
COMPUTATION_NEEDLES = ("arange", "linspace", "exp(", "cos(", "sin(", "outer(", "einsum(", "polar(")
STORE_TRIGGERS = tuple(needle.encode() for needle in (*TABLE_NEEDLES, *STORE_NEEDLES, *COMPUTATION_NEEDLES))
# What says that a store may hold a table (`table_stores`): a table's name, a rotary class's name, the cos/sin (or
# complex exponential) of table math, or a name that `names_table` reads (`freqs`, `emb_cos`; `_names_cos_or_sin`).
_TABLE_EVIDENCE = (*TABLE_NEEDLES, *ROTARY_NAME_WORDS, "cos(", "sin(", "polar(")
# A name that holds one of these words says it is frequencies or a cos/sin table, even where the rope codemod does
# not rewrite it.
_TABLE_WORDS = re.compile(r"(?:^|_)(?:freqs?|frequenc(?:y|ies))$|(?:^|_)(?:cos|sin|cis)(?:$|_|\d)", re.IGNORECASE)
# The function through which the rope codemod's rewrite reads a table at run time: `_rope_table_on_device(self,
# "inv_freq", x.device)` reads `self.inv_freq` (its copy on the input's device).
TABLE_ON_DEVICE = "_rope_table_on_device"
# Where the rope codemod places a buffer or parameter that it keeps, computed on the CPU with the tables: the default
# device, where a tensor made without a device goes and the original made it. `torch.get_default_device()` says the
# same from torch 2.3 on only; this runs on any torch (transformers 4.37 supports 1.11), and under DeepSpeed's
# zero.Init, which sends factories to the accelerator without setting a default device, it names the device that the
# original's factories used.
DEFAULT_DEVICE = "torch.empty(0).device"
# The default device as the codemod writes it, and as torch 2.3 spells it (a file fixed by an earlier rope-lint, or
# written so by hand): `names_default_device` reads either, under any alias of torch.
DEFAULT_DEVICE_SPELLINGS = (DEFAULT_DEVICE, "torch.get_default_device()")


class TableStore(
    namedtuple(
        "TableStore",
        ("node", "name", "value", "as_buffer", "persistent", "parameter", "trained", "rewritten"),
        defaults=(False, False, True),
    )
):
    """One place a table is stored: `register_buffer(...)`, `x = nn.Buffer(...)`, `x = nn.Parameter(...)`,
    `setattr(...)` or `self.x = ...`."""

    __slots__ = ()
    node: ast.expr | ast.stmt  # the call, or the assignment
    name: str  # the attribute name, or the literal tail of an f-string name
    value: ast.expr
    as_buffer: bool
    persistent: bool
    parameter: bool  # default False: an `nn.Parameter`, which `module.to(dtype)` casts as it casts a buffer
    trained: bool  # default False: a parameter that is not frozen (`requires_grad=False`)
    rewritten: bool  # default True: whether the rope codemod rewrites it (`is_table_name`)


def names_default_device(ctx: FileContext, node: ast.expr) -> bool:
    """Whether `node` is the default device: `torch.empty(...).device` (`DEFAULT_DEVICE`) or
    `torch.get_default_device()`."""
    if isinstance(node, ast.Call):
        return ctx.qualified_name(node.func) == "torch.get_default_device"
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "device"
        and isinstance(node.value, ast.Call)
        and not node.value.keywords
        and ctx.qualified_name(node.value.func) == "torch.empty"
    )


def is_table_name(name: str) -> bool:
    """Whether a name is one of the tables that the rope codemod rewrites."""
    return any(needle in name for needle in TABLE_NEEDLES)


def names_table(name: str) -> bool:
    """Whether a name says it is a table: one the rope codemod rewrites, or frequencies (a name ending in `freqs`,
    `pos_frequencies`; not `freq_embed`) or a cos/sin table (`freqs_cos`, `rope_sin`, `freqs_cis`); not a name that
    says it counts (`num_freqs`, `num_bands_per_freq`: `dtypes.names_a_count`)."""
    if is_table_name(name):
        return True
    return not names_a_count(name) and _TABLE_WORDS.search(held_words(name)) is not None


def is_rotary_class_name(name: str) -> bool:
    return any(word in name for word in ROTARY_NAME_WORDS)


def is_rotary_embedding_name(name: str) -> bool:
    """`*Rotary*Embedding*` in any case: the narrower name test of the probe, which imports whatever a package
    holds (a `RotaryAttention` is no table to measure)."""
    return re.search("rotary.*embedding", name, re.IGNORECASE) is not None


class RotaryEvidence(namedtuple("RotaryEvidence", ("is_rotary_name", "is_table"))):
    """What a reader takes as evidence that a class is rotary: a test of its name, and a test of the names of the
    tables it stores. Each reader keeps the answers it has always given, and its evidence says how they differ."""

    __slots__ = ()
    is_rotary_name: Callable[[str], bool]
    is_table: Callable[[str], bool]


# The rules: a name holding `Rotary`/`Rope`/`RoPE`, or a store (`register_buffer`, `setattr`, `self.x = ...`) of any
# table, cos/sin caches included.
SOURCE_EVIDENCE = RotaryEvidence(is_rotary_class_name, is_table_name)
# The rope codemods: the same names, or any `self.` attribute or one-line string in the class that names an
# `inv_freq`, read or stored (`inv_freq_fp32`, in a class the codemod rewrote already, counts too).
CODEMOD_EVIDENCE = RotaryEvidence(is_rotary_class_name, lambda name: "inv_freq" in name)
# The probe: a name like `*Rotary*Embedding*`, or a class (or a base, whose `__init__` it runs) that stores exactly
# `inv_freq` on itself, as an attribute or a buffer.
RUNTIME_EVIDENCE = RotaryEvidence(is_rotary_embedding_name, lambda name: name == "inv_freq")


def is_rotary_class(
    name: str, tables: Iterable[str], base_is_rotary: bool = False, evidence: RotaryEvidence = SOURCE_EVIDENCE
) -> bool:
    """Whether a class is a rotary embedding: one of its bases is, its name says so, or it stores a table.

    `tables` are the names of what the class stores, by its reader's measure (see `RotaryEvidence`). They are read
    last and only as far as needed, so that a reader can gather them lazily.
    """
    return base_is_rotary or evidence.is_rotary_name(name) or any(map(evidence.is_table, tables))


class ClassFacts(namedtuple("ClassFacts", ("name", "base_names", "tables"))):
    """What a reader of source gathers about one top-level class to tell whether it is rotary."""

    __slots__ = ()
    name: str
    base_names: tuple[str, ...]  # the bases written as plain names, which a class of the same file can be
    tables: Iterable[str]  # the names of the tables it stores (see `is_rotary_class`)


def rotary_class_names(classes: Iterable[ClassFacts], evidence: RotaryEvidence = SOURCE_EVIDENCE) -> set[str]:
    """The names of the rotary classes among a file's top-level classes: those rotary by their own name or tables,
    then, in the file's order, those with a rotary base in the file (the scaling variants)."""
    classes = list(classes)
    rotary = {facts.name for facts in classes if is_rotary_class(facts.name, facts.tables, evidence=evidence)}
    for facts in classes:
        if is_rotary_class(facts.name, (), any(base in rotary for base in facts.base_names), evidence):
            rotary.add(facts.name)
    return rotary


def may_store_a_table(occurrences: Occurrences) -> bool:
    """Whether a file can store a table (`table_stores`), told from the words in its bytes: it names a table, or it
    stores a tensor on a module (`STORE_NEEDLES`) and something says that a store may hold a table (a rotary class's
    name, cos/sin, a complex exponential, a name such as `freqs` or `emb_cos`). Elsewhere the words of table math
    (`arange`, the most common) mark nothing for the rules that read table stores: a model file whose only buffers
    are position ids, or NumPy or JAX code, is parsed only where another rule keeps a word."""
    if occurrences.holds_any(TABLE_NEEDLES):
        return True
    if not occurrences.holds_any(STORE_NEEDLES):
        return False
    if occurrences.holds_any(_TABLE_EVIDENCE):
        return True
    data = occurrences.data
    lowered = data.lower()  # `names_table` reads names in any case
    if b"freq" in lowered or _names_cos_or_sin(lowered):
        return True
    return b"exp(" in data and _complex_literal().search(data) is not None


@functools.cache
def _complex_literal() -> re.Pattern[bytes]:
    """An imaginary literal (`1j`), compiled on first use: most files that can store a table say so before."""
    return re.compile(rb"\d[jJ]\b")


def _names_cos_or_sin(lowered: bytes) -> bool:
    """Whether a lowered file's bytes hold `cos`, `sin` or `cis` as a word of a name (`_TABLE_WORDS`): after neither a
    letter nor a digit, and before no letter (`emb_cos`, `sin1`, `freqs_cis`; not `using`, `cosine`, `precision`)."""
    for word in (b"cos", b"sin", b"cis"):
        start = lowered.find(word)
        while start != -1:
            before, after = lowered[start - 1 : start] if start else b"", lowered[start + 3 : start + 4]
            if not (before.isalnum() or after.isalpha()):
                return True
            start = lowered.find(word, start + 1)
    return False


def may_be_rotary(class_text: bytes) -> bool:
    """Whether a class, from its `class` keyword on, can be a rotary class: its name or bases say so, or it
    mentions a table. Decided on the file's bytes, before parsing: the rotary rules need every method of such a
    class."""
    header = class_text[: class_text.find(b"\n")]
    named = any(word in header for word in ROTARY_NAME_TRIGGERS)
    return named or any(needle in class_text for needle in TABLE_TRIGGERS)


def may_hold_table(class_text: bytes) -> bool:
    """Whether a class, from its `class` keyword on, can store a table: it can be rotary (`may_be_rotary`), or it
    keeps a tensor on itself and holds table math (a table under a name of its own)."""
    return may_be_rotary(class_text) or (
        any(needle.encode() in class_text for needle in STORE_NEEDLES)
        and any(needle.encode() in class_text for needle in COMPUTATION_NEEDLES)
    )


def rotary_classes(ctx: FileContext) -> list[ast.ClassDef]:
    return ctx.derived(_rotary_classes)


def _rotary_classes(ctx: FileContext) -> list[ast.ClassDef]:
    classes = [node for node in ctx.tree.body if isinstance(node, ast.ClassDef)]
    with_tables = set(ctx.statements_with(TABLE_NEEDLES))
    rotary = rotary_class_names(
        ClassFacts(
            cls.name,
            tuple(base.id for base in cls.bases if isinstance(base, ast.Name)),
            # Lazily: a class whose name decides is not walked.
            (store.name for store in _table_stores_under(ctx, cls)) if cls in with_tables else (),
        )
        for cls in classes
    )
    return [cls for cls in classes if cls.name in rotary]


def methods(cls: ast.ClassDef) -> list[FunctionNode]:
    return [node for node in cls.body if isinstance(node, FunctionNode)]


def construction_methods(cls: ast.ClassDef, classes: Mapping[str, ast.ClassDef] | None = None) -> set[str]:
    """The methods that build the tables: `__init__`, what it reaches through `self.`, cache builders, and the
    methods that a base class among `classes` (the file's, by name: `top_level_classes`) reaches from its
    `__init__`: the base's constructor calls the subclass's override. Shared by the RPL203 check and the rope
    codemod, so that both mean the same methods."""
    classes = classes or {}
    inherited: set[str] = set()
    for base in cls.bases:
        parent = classes.get(base.id) if isinstance(base, ast.Name) and base.id != cls.name else None
        if parent is not None:
            inherited |= construction_methods(parent, {k: v for k, v in classes.items() if k != cls.name})
    references = {
        method.name: {node.attr for node in walk(method) if is_self_attribute(node)} for method in methods(cls)
    }
    # Where all of the class's construction is in view, its methods named like a cache builder run at construction
    # only where its `__init__` reaches them (a builder that only forward calls runs at run time).
    return reachable_from_init(references, inherited, builders_by_name=not construction_in_view(cls))


def construction_in_view(cls: ast.ClassDef) -> bool:
    """Whether the class's own `__init__` is all that runs at its construction: it defines one, and its only bases are
    `nn.Module`, whose constructor calls none of its methods. Otherwise a parent out of view (another module, or a run
    of the file's statements without it) may call any method named like a builder."""
    return all(ast.unparse(base) in _PLAIN_MODULES for base in cls.bases) and any(
        method.name == "__init__" for method in methods(cls)
    )


# The spellings of `torch.nn.Module` as a base.
_PLAIN_MODULES = frozenset({"nn.Module", "torch.nn.Module", "Module"})


def top_level_classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    """A module's top-level classes by name: the bases that `construction_methods` reads."""
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def reachable_from_init(
    references: dict[str, set[str]], inherited: set[str] | None = None, builders_by_name: bool = True
) -> set[str]:
    """Given each method's `self.<name>` references: `__init__` and every method it names (a call, or `fn =
    self.compute`), transitively, the methods of `inherited`, which a parent's construction reaches, and, with
    `builders_by_name`, the cache builders, which a subclass overrides and its parent's `__init__` calls, and the
    methods they name."""
    builders = [name for name in references if "cache" in name or "rope_parameters" in name] if builders_by_name else []
    # What a builder calls runs at construction too (`_compute_cos_sin_cache` calling `self._compute_inv_freq`).
    reached, pending = set(), ["__init__", *(inherited or ()), *builders]
    while pending:
        name = pending.pop()
        if name in reached or name not in references:
            continue
        reached.add(name)
        pending.extend(references[name])
    return reached


# What only a tensor has among the values a rotary method takes: reading one of these from a parameter shows it is a
# tensor (an int, a shape or a function has none of them). `shape` is left out: arrays have one too.
_TENSOR_ATTRIBUTES = frozenset(
    {"device", "dtype", "float", "to", "type_as", "unsqueeze", "expand", "size", "dim", "is_floating_point"}
)
_TENSOR_ANNOTATIONS = frozenset({"Tensor", "FloatTensor", "LongTensor"})
# The functions and methods whose arguments are tensors: `emb.cos().type_as(hidden_states)` and
# `torch.outer(positions, self.inv_freq)` show `hidden_states` and `positions` are.
_TENSOR_ARGUMENT_METHODS = frozenset(
    {
        "type_as",
        "expand_as",
        "view_as",
        "reshape_as",
        "matmul",
        "outer",
        "ger",
        "einsum",
        "bmm",
        "mm",
        "mv",
        "tensordot",
    }
)


def device_source(method: FunctionNode) -> str | None:
    """Where a table read in `method` moves to: `x.device` for the first parameter that is a tensor on every path
    through the method, or a parameter annotated `torch.device` or named `device` (and not defaulting to None)
    itself; None when there is none (a sequence length, a shape, the function an `_apply` override takes).

    A parameter is a tensor on every path when it is annotated as one, or when the method reads a tensor's
    attribute from it (`x.dtype`, `position_ids.float()`), indexes it with a new axis (`position_ids[:, None]`),
    multiplies it as a matrix or passes it to `type_as`: a caller passes the same kind of value whichever branch
    runs, unless a condition on the parameter itself chooses the branch (`if x is not None:`). A parameter that
    defaults to None is none, and neither is one annotated otherwise.
    """
    arguments = method.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults = dict(zip(reversed(positional), reversed(arguments.defaults), strict=False))
    defaults.update((arg, default) for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True))
    candidates = [
        arg
        for arg in (*positional, *arguments.kwonlyargs)
        if arg.arg not in ("self", "cls")
        and not (isinstance(defaults.get(arg), ast.Constant) and defaults[arg].value is None)  # type: ignore[union-attr]
    ]
    read = _tensor_reads(method.body)
    # A tensor the method moves to the device of one the module holds (`position_ids.to(self.inv_freq.device)`) may
    # live elsewhere (position ids built on the CPU): where the method computes is not its device.
    elsewhere = _moved_to_the_module(method)
    candidates = [arg for arg in candidates if arg.arg not in elsewhere]
    for arg in candidates:
        annotation = arg.annotation
        name = (
            annotation.attr
            if isinstance(annotation, ast.Attribute)
            else annotation.id
            if isinstance(annotation, ast.Name)
            else None
        )
        if annotation is not None and is_device_parameter(arg):
            return arg.arg
        if name in _TENSOR_ANNOTATIONS or (annotation is None and arg.arg in read):
            return f"{arg.arg}.device"
    return next((arg.arg for arg in candidates if is_device_parameter(arg)), None)


def _moved_to_the_module(method: FunctionNode) -> set[str]:
    """The names that `method` moves to the device of a tensor on `self`: `x.to(self.t.device)`,
    `x.to(device=self.t.device, dtype=...)`."""
    moved = set()
    for node in walk(method):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to"):
            continue
        receiver = node.func.value
        targets = [*node.args, *(keyword.value for keyword in node.keywords if keyword.arg == "device")]
        on_self = any(
            isinstance(t, ast.Attribute) and t.attr == "device" and is_self_attribute(t.value) for t in targets
        )
        if on_self and isinstance(receiver, ast.Name):
            moved.add(receiver.id)
    return moved


def is_device_parameter(arg: ast.arg) -> bool:
    """A parameter that is a device: annotated `torch.device`, or named `device` with no annotation."""
    if arg.annotation is None:
        return arg.arg == "device"
    return isinstance(arg.annotation, ast.Attribute) and arg.annotation.attr == "device"


def _tensor_reads(body: list[ast.stmt]) -> set[str]:
    """The names whose use in the statements shows a tensor (`_TENSOR_ATTRIBUTES`, a new axis, a matrix product),
    wherever the use runs, but not under a condition that tests the name itself (`if x is not None:`,
    `isinstance(x, torch.Tensor) and x.device`), in a `try`, or in a lambda or a nested function."""
    names: set[str] = set()
    pending: list[tuple[ast.AST, frozenset[str]]] = [(statement, frozenset()) for statement in body]
    while pending:
        node, guarded = pending.pop()
        if isinstance(node, ast.Try | ast.Lambda | FunctionNode | ast.ClassDef):
            continue
        names.update(_shown_tensors(node) - guarded)
        if isinstance(node, ast.BoolOp):
            # Each operand runs only as the ones before it allow.
            for index, value in enumerate(node.values):
                pending.append((value, guarded | _names_in(node.values[:index])))
        elif isinstance(node, ast.If | ast.While | ast.IfExp):
            condition = _names_in([node.test])
            for child in child_nodes(node):
                pending.append((child, guarded if child is node.test else guarded | condition))
        else:
            pending.extend((child, guarded) for child in child_nodes(node))
    return names


def _names_in(nodes: list[ast.expr]) -> frozenset[str]:
    return frozenset(name.id for node in nodes for name in walk(node) if isinstance(name, ast.Name))


def _shown_tensors(node: ast.AST) -> set[str]:
    """The plain names that `node` uses as only a tensor is used."""
    if isinstance(node, ast.Attribute) and node.attr in _TENSOR_ATTRIBUTES and isinstance(node.value, ast.Name):
        return {node.value.id}
    if _indexes_as_tensor(node):
        assert isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
        return {node.value.id}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return {operand.id for operand in (node.left, node.right) if isinstance(operand, ast.Name)}
    if _passes_as_tensor(node):
        assert isinstance(node, ast.Call)
        return {argument.id for argument in node.args if isinstance(argument, ast.Name)}
    return set()


def _indexes_as_tensor(node: ast.AST) -> bool:
    """`name[..., None]`, `name[:, None, :]`: an index with a new axis or an ellipsis, which only a tensor (or an
    array) takes; a list, a tuple or a shape does not."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and isinstance(node.slice, ast.Tuple)):
        return False
    return any(isinstance(element, ast.Constant) and element.value in (None, ...) for element in node.slice.elts)


def _passes_as_tensor(node: ast.AST) -> bool:
    """`t.type_as(name)`, `torch.outer(a, b)` and the like: a call whose arguments go where only tensors go."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _TENSOR_ARGUMENT_METHODS
    )


def tables_can_move(cls: ast.ClassDef, classes: Mapping[str, ast.ClassDef]) -> bool:
    """Whether the rope codemod can keep the class's tables as plain CPU attributes: every method that runs after
    construction, reads a table and returns a value or keeps one on `self` has a `device_source` to move the table
    to. Otherwise the class would return tables on the CPU to a model on an accelerator, and the codemod leaves it as
    it is. `classes`: the
    file's rotary classes by name, its bases among them (`construction_methods`)."""
    construction = construction_methods(cls, classes)
    if (
        _reads_kept_buffer(cls, construction)
        or _caches_tables_at_run_time(cls, construction)
        or _places_off_the_cpu(cls, construction)
        or _given_a_device(cls, construction)
        or _uses_construction_after_it(cls, construction)
        or _keeps_a_table_to_load(cls)
        or _built_out_of_view(cls, construction, classes)
    ):
        return False
    # A method out of construction that keeps what it computes on `self`, for another method to return (a cache that
    # only forward fills), where construction is in view: a parent's constructor could call it otherwise. Not
    # `_apply`, `module.to()`'s hook, which stores its tables anew on the CPU, where forward reads them through.
    keeps = construction_in_view(cls)
    for method in methods(cls):
        if method.name in construction or device_source(method) is not None:
            continue
        reads_table = any(is_self_attribute(node) and is_table_name(node.attr) for node in walk(method))
        if reads_table and any(
            _returns_value(node) or (keeps and method.name != "_apply" and _stores_on_self(node))
            for node in own_nodes(method)
        ):
            return False
    return True


def _stores_on_self(node: ast.AST) -> bool:
    """`self.<name> = ...` (or `+=`, or annotated)."""
    if isinstance(node, ast.Assign):
        return any(is_self_attribute(target) for target in node.targets)
    return isinstance(node, ast.AugAssign | ast.AnnAssign) and is_self_attribute(node.target)


def _reads_kept_buffer(cls: ast.ClassDef, construction: set[str]) -> bool:
    """Whether construction reads the values of a buffer or parameter that the codemod keeps registered (a name that
    is not a table's: `freqs`, `angles`): the codemod puts it on the default device, where the original made it, and
    the tables computed from it on the CPU would mix devices in a model built under `with torch.device("meta")`."""
    kept = {store.name for store in _stores_under_class(cls) if not is_table_name(store.name)}
    for method in methods(cls):
        if method.name not in construction:
            continue
        described = {
            id(node.value)
            for node in walk(method)
            if isinstance(node, ast.Attribute) and node.attr in TABLE_DESCRIPTIONS
        }
        if any(
            is_self_attribute(node)
            and node.attr in kept
            and isinstance(node.ctx, ast.Load)
            and id(node) not in described
            for node in walk(method)
        ):
            return True
    return False


def _given_a_device(cls: ast.ClassDef, construction: set[str]) -> bool:
    """Whether construction is given a device, from its caller (a device parameter, `is_device_parameter`, that it
    reads) or of its own (`self.device = ...`), and the class keeps a registration: a persistent buffer, a buffer that
    is not a table's, or a parameter. The codemod would compute it on the CPU and register it on the default device,
    away from the device given, where the class's other tensors (a child module built with `device=device`), or its
    caller's, are."""
    for method in methods(cls):
        if method.name not in construction:
            continue
        devices = {arg.arg for arg in (*method.args.args, *method.args.kwonlyargs) if is_device_parameter(arg)}
        for node in walk(method):
            read = isinstance(node, ast.Name) and node.id in devices
            kept = isinstance(node, ast.Assign) and any(
                is_self_attribute(target) and target.attr == "device" for target in node.targets
            )
            if read or kept:
                return any(_keeps_a_registration(node) for node in walk(cls))
    return False


def _keeps_a_registration(node: ast.AST) -> bool:
    """A registration that the codemod keeps: a persistent buffer, a buffer not named as a table, a parameter."""
    if not isinstance(node, ast.Call):
        return False
    called = _called(node)
    if called == "register_buffer" and node.args:
        name = _literal_name(node.args[0])
        return _persistent(node, position=2) or name is None or not is_table_name(name)
    if called == "Buffer":
        return _persistent(node, position=1)
    return called in ("register_parameter", "Parameter")


def _uses_construction_after_it(cls: ast.ClassDef, construction: set[str]) -> bool:
    """Whether a method that runs after construction uses what a method of construction returns (`self.cache =
    self._precompute_cache()` under `with torch.device(buffer_device):`, a framework's initialisation after
    `to_empty()`). The codemod makes construction's tensors on the CPU, so that method would get them there, where
    the original made them on the device of its context or arguments. A call for its effect alone (forward's
    `self._set_cos_sin_cache(...)`, which stores tables that reads move) is not a use. Not `_apply`, `module.to()`'s
    hook, whose tables are rebuilt after the cast (`rebuilt_by_apply`)."""
    for method in methods(cls):
        if method.name in construction or method.name == "_apply":
            continue
        alone = {id(node.value) for node in walk(method) if isinstance(node, ast.Expr)}
        if any(
            isinstance(node, ast.Call)
            and is_self_attribute(node.func)
            and node.func.attr in construction
            and id(node) not in alone
            for node in walk(method)
        ):
            return True
    return False


def _keeps_a_table_to_load(cls: ast.ClassDef) -> bool:
    """Whether the class registers a persistent table whose value only makes room for one (`torch.empty(n)`,
    `torch.zeros(n)`), which a checkpoint then fills. The codemod keeps a persistent table registered and computes
    from a float32 copy that it makes at construction: that copy would hold the placeholder, and never the values
    loaded."""
    for method in methods(cls):
        for node in walk(method):
            if not isinstance(node, ast.Call):
                continue
            called = _called(node)
            if called == "register_buffer" and node.args and is_table_name(_literal_name(node.args[0]) or ""):
                value = node.args[1] if len(node.args) > 1 else _keyword(node, "tensor")
                persistent = _persistent(node, position=2)
            elif called == "Buffer" and node.args and _assigns_table(method, node):
                value, persistent = node.args[0], _persistent(node, position=1)
            else:
                continue
            if persistent and value is not None and _only_makes_room(method, value):
                return True
    return False


def _assigns_table(method: FunctionNode, call: ast.Call) -> bool:
    """Whether `call` is the value of `self.<table> = ...` in `method`."""
    return any(
        isinstance(node, ast.Assign)
        and node.value is call
        and any(is_self_attribute(target) and is_table_name(target.attr) for target in node.targets)
        for node in walk(method)
    )


def _only_makes_room(method: FunctionNode, value: ast.expr) -> bool:
    """Whether `value` is a tensor that holds no values yet, or only a constant (`torch.empty(...)`,
    `torch.zeros(...)`), directly or through a local name that `method` assigns only such a tensor."""
    if isinstance(value, ast.Name):
        assigned = [
            node.value
            for node in walk(method)
            if isinstance(node, ast.Assign)
            and any(isinstance(target, ast.Name) and target.id == value.id for target in node.targets)
        ]
        return bool(assigned) and all(_is_placeholder(each) for each in assigned)
    return _is_placeholder(value)


def _is_placeholder(value: ast.expr) -> bool:
    return isinstance(value, ast.Call) and _called(value) in _PLACEHOLDER_FACTORIES


# The factories of a tensor that holds no computed values: room for what a checkpoint or a later method puts there.
_PLACEHOLDER_FACTORIES = frozenset(
    {"empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like", "Tensor", "FloatTensor"}
)


def _caches_tables_at_run_time(cls: ast.ClassDef, construction: set[str]) -> bool:
    """Whether a method that runs after construction assigns a table (`self._cos_cached = emb.cos()`): a cache of the
    input's device and of the module's dtype, which the class rebuilds when the input moves, and whose dtype is the
    dtype of what it returns. Rewritten, it would be float32 (a bf16 model would get float32 activations) and its
    device test would compare the input's device with itself. Not `_apply`, `module.to()`'s hook, whose tables are
    rebuilt after the cast (`rebuilt_by_apply`)."""
    return any(
        is_self_attribute(target) and is_table_name(target.attr)
        for method in methods(cls)
        if method.name not in construction and method.name != "_apply"
        for node in walk(method)
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
    )


def _built_out_of_view(cls: ast.ClassDef, construction: set[str], classes: Mapping[str, ast.ClassDef]) -> bool:
    """Whether a base out of view (another module's class) computes part of the tables: construction calls a method
    that neither the class nor its bases among `classes` define or keep (`inv_freq = self._compute_inv_freq(base)`),
    which makes its tensors on the default device, where the codemod's CPU enumerations would meet them in a model
    built under `with torch.device("cuda")`."""
    if not _has_a_base_out_of_view(cls, classes):
        return False
    defined = _defined_methods(cls, classes)
    for method in methods(cls):
        if method.name not in construction:
            continue
        for node in walk(method):
            called = node.func if isinstance(node, ast.Call) else None
            if is_self_attribute(called) and called.attr not in defined | _MODULE_METHODS:
                return True
    return False


# `torch.nn.Module`'s own methods, which any rotary class has: none of them computes a table.
_MODULE_METHODS = frozenset(
    {
        "register_buffer", "register_parameter", "register_module", "add_module", "get_buffer", "get_parameter",
        "get_submodule", "apply", "to", "cpu", "cuda", "float", "half", "double", "bfloat16", "type", "modules",
        "children", "named_modules", "named_children", "parameters", "named_parameters", "buffers", "named_buffers",
        "state_dict", "load_state_dict", "train", "eval", "requires_grad_", "zero_grad", "forward", "extra_repr",
    }
)  # fmt: skip


def builds_for_a_base_out_of_view(cls: ast.ClassDef, classes: Mapping[str, ast.ClassDef]) -> bool:
    """Whether a base out of view (another module's class) keeps what the class builds: a construction method returns
    a value that the class itself never asks for (`_compute_cos_sin_cache`, which the base's `__init__` calls and
    registers). The base would keep a CPU table, where its own methods, and the kernels they call, read it. The
    codemod asks this only of a class whose parents regeneration does not merge into it (a transformers modular
    source's parent model is in view: `transformers.generated.inherited_classes`), and the check, which offers no fix
    for such a class, only outside transformers' modular and generated files (`_building_for_bases_out_of_view`)."""
    if not _has_a_base_out_of_view(cls, classes):
        return False
    named = {node.attr for node in walk(cls) if is_self_attribute(node)}
    construction = construction_methods(cls, classes)
    return any(
        method.name in construction
        and method.name not in named
        and any(_returns_value(node) for node in own_nodes(method))
        for method in methods(cls)
    )


def _has_a_base_out_of_view(cls: ast.ClassDef, classes: Mapping[str, ast.ClassDef]) -> bool:
    """Whether a base of the class is neither `nn.Module` nor one of `classes`: another module's class."""
    bases = [base for base in cls.bases if ast.unparse(base) not in _PLAIN_MODULES]
    return not all(isinstance(base, ast.Name) and base.id in classes for base in bases)


def _defined_methods(cls: ast.ClassDef, classes: Mapping[str, ast.ClassDef]) -> set[str]:
    """The methods that the class and its bases among `classes` define, and the attributes they keep on `self` (a
    function kept there, `self.rope_init_fn = ROPE_INIT_FUNCTIONS[kind]`, which the codemod runs on the CPU)."""
    defined = {method.name for method in methods(cls)}
    defined |= {node.attr for node in walk(cls) if is_self_attribute(node) and isinstance(node.ctx, ast.Store)}
    for base in cls.bases:
        parent = classes.get(base.id) if isinstance(base, ast.Name) and base.id != cls.name else None
        if parent is not None:
            defined |= _defined_methods(parent, {k: v for k, v in classes.items() if k != cls.name})
    return defined


def _places_off_the_cpu(cls: ast.ClassDef, construction: set[str]) -> bool:
    """Whether construction makes or moves tensors where the codemod cannot keep them on the CPU: a factory spelled
    without `torch.` (`arange(n)` imported from torch), which it does not pin, or a table moved to a device
    (`self.inv_freq = self.inv_freq.to(self.device)`, `.cuda()`), which its CPU enumerations would then meet."""
    for method in methods(cls):
        if method.name not in construction:
            continue
        for node in walk(method):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in TENSOR_FACTORIES:
                return True
            if (
                isinstance(node, ast.Assign)
                and any(is_self_attribute(target) and is_table_name(target.attr) for target in node.targets)
                and _moves_off_the_cpu(node.value)
            ):
                return True
    return False


def _moves_off_the_cpu(value: ast.expr) -> bool:
    """`t.cuda()`, or `t.to(<device>)` to anything but the CPU; not `t.to(torch.float32)` or `t.to(dtype=...)`."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        return False
    if value.func.attr == "cuda":
        return True
    if value.func.attr != "to":
        return False
    targets = [*value.args[:1], *(kw.value for kw in value.keywords if kw.arg == "device")]
    return any(not _names_cpu_or_dtype(target) for target in targets)


def _names_cpu_or_dtype(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value == "cpu"
    spelled = ast.unparse(node)
    return spelled in FLOATING_DTYPES or spelled in INTEGER_DTYPES or spelled.endswith("dtype")


# Tensor factories, which allocate on the default device unless told otherwise: construction pins them to the CPU.
TENSOR_FACTORIES = frozenset({"arange", "linspace", "logspace", "ones", "zeros", "full", "empty", "tensor", "eye"})
# What a read of a tensor tells without its values or its device.
TABLE_DESCRIPTIONS = frozenset({"dtype", "shape", "ndim", "size", "dim", "numel"})


def _returns_value(node: ast.AST) -> bool:
    """`return <value>`, other than `return None` or `return self` (a hook such as `_apply` returns the module)."""
    if not isinstance(node, ast.Return) or node.value is None:
        return False
    value = node.value
    return not (isinstance(value, ast.Constant) and value.value is None) and not (
        isinstance(value, ast.Name) and value.id == "self"
    )


def own_nodes(method: FunctionNode) -> Iterator[ast.AST]:
    """The nodes of `method`, without those of the functions and classes nested in it."""
    pending: list[ast.AST] = list(method.body)
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, FunctionNode | ast.Lambda | ast.ClassDef):
            pending.extend(child_nodes(node))


def _rewritable(ctx: FileContext, cls: ast.ClassDef | None) -> bool:
    """Whether the rope codemod rewrites the tables of `cls` (a class of the file, or None outside every class), as far
    as the file tells: the RPL2xx rules offer its fix only then, and only where no other code reads the tables that
    the rewrite moves off the module (`moved_tables`)."""
    return cls is None or cls.name in ctx.derived(_movable_classes) or cls not in rotary_classes(ctx)


def rope_class_fix(ctx: FileContext, cls: ast.ClassDef | None) -> Fix | None:
    """The RPL2xx fix of a finding in `cls` (None outside every class): the rope codemod's rewrite of the class, where
    the file lets it move the class's tables (`_rewritable`), resting on no other code reading them (`moved_tables`).
    None in a file written for TorchScript, which could not script what the codemod writes."""
    if ctx.derived(_written_for_torchscript) or not _rewritable(ctx, cls):
        return None
    rewrite = ClassRewrite("rope_tables", cls.name if cls else None)
    return Fix(FixSafety.UNSAFE, rewrite, moves_tables=moved_tables(ctx, cls))


def _written_for_torchscript(ctx: FileContext) -> bool:
    return written_for_torchscript(ctx.source)


def _movable_classes(ctx: FileContext) -> set[str]:
    classes = rotary_classes(ctx)
    return movable_rotary_classes(classes, left=_building_for_bases_out_of_view(ctx, classes))


def _building_for_bases_out_of_view(ctx: FileContext, classes: list[ast.ClassDef]) -> set[str]:
    """The classes whose base in another module keeps what they build (`builds_for_a_base_out_of_view`), which the
    codemod leaves. None in a transformers modular source or a file generated from one: there the codemod reads the
    parent models' classes that regeneration merges in (`transformers.generated.inherited_classes`), which a check of
    one file does not, and rewrites a class whose parents it finds."""
    if banner.is_modular_source(ctx.path) or banner.has_banner(ctx.source):
        return set()
    in_view = top_level_classes(ctx.tree)
    return {cls.name for cls in classes if builds_for_a_base_out_of_view(cls, in_view)}


def moved_tables(ctx: FileContext, cls: ast.ClassDef | None) -> tuple[str, ...]:
    """The tables that the rope codemod's rewrite of `cls` makes float32 attributes on the CPU: those that it and
    its rotary bases and subclasses in the file store, which are rewritten together. A read of one off the module from
    outside the class (`table_reads`) would get that instead of the module's buffer, so the rewrite rests on there
    being none."""
    return () if cls is None else ctx.derived(_moved_tables, cls)


def _moved_tables(ctx: FileContext, cls: ast.ClassDef) -> tuple[str, ...]:
    classes = rotary_classes(ctx)
    group = _groups(classes)
    family = [c for c in classes if group[c.name] == group.get(cls.name)] or [cls]
    return tuple(sorted(set().union(*map(stored_tables, family))))


def movable_rotary_classes(
    classes: list[ast.ClassDef], read_elsewhere: Collection[str] = (), left: Collection[str] = ()
) -> set[str]:
    """The names of `classes` (a file's rotary classes) whose tables the rope codemod can move. A class and its
    rotary bases and subclasses in the file share their tables' methods, so they are rewritten together or not at
    all. `read_elsewhere`: the tables that other code reads off a module (`table_reads`), which no class that
    stores one can move; `left`: classes that the caller knows cannot move, for reasons out of the file."""
    by_name = {cls.name: cls for cls in classes}
    group = _groups(classes)
    stuck = {
        group[cls.name]
        for cls in classes
        if not tables_can_move(cls, by_name) or not stored_tables(cls).isdisjoint(read_elsewhere) or cls.name in left
    }
    return {name for name in by_name if group[name] not in stuck}


def _groups(classes: list[ast.ClassDef]) -> dict[str, str]:
    """Each class's group, by the name of one class in it: a class with its rotary bases and subclasses among
    `classes`."""
    group = {cls.name: cls.name for cls in classes}

    def root(name: str) -> str:
        while group[name] != name:
            name = group[name]
        return name

    for cls in classes:
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in group:
                group[root(cls.name)] = root(base.id)
    return {name: root(name) for name in group}


def stored_tables(cls: ast.ClassDef) -> frozenset[str]:
    """The tables, by the names the rope codemod rewrites, that the class stores on `self`: assigned, registered as
    buffers, or set by `setattr` under a literal name."""
    names = set()
    for node in walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and is_self_attribute(node):
            names.add(node.attr)
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "register_buffer" and node.args:
                names.add(_literal_name(node.args[0]))
            elif isinstance(func, ast.Name) and func.id == "setattr" and len(node.args) == 3:
                names.add(_literal_name(node.args[1]))
    return frozenset(name for name in names if name and is_table_name(name) and not name.endswith(FP32_COPY_SUFFIX))


def table_stores(ctx: FileContext) -> list[TableStore]:
    """Every store of a table in the file: by the names the rope codemod rewrites (`rewritten`), then, in the
    file's top-level classes, every other store of a buffer, a parameter or an attribute that holds a table by its
    name (`names_table`, buffers and parameters only), by its computation (frequencies or angles, and in a rotary
    class their cos/sin too, following local names, the class's methods and the file's functions), or by its use:
    the class reads it as the frequencies of an angle whose cos/sin it takes."""
    return ctx.derived(_table_stores)


def stores_beside_a_copy(ctx: FileContext) -> list[TableStore]:
    """The stores of tables with a float32 copy beside them in their class (`<name>_fp32`, a plain attribute): what the
    rope codemod leaves of a buffer that it keeps registered. The class reads the copy; the buffer carries only its
    state_dict key."""
    stores = table_stores(ctx)
    copies = {
        (ctx.enclosing_class(store.node), store.name)
        for store in stores
        if not store.as_buffer and store.name.endswith(FP32_COPY_SUFFIX)
    }
    return [store for store in stores if (ctx.enclosing_class(store.node), store.name + FP32_COPY_SUFFIX) in copies]


def _table_stores(ctx: FileContext) -> list[TableStore]:
    named = [store for statement in ctx.statements_with(TABLE_NEEDLES) for store in _table_stores_under(ctx, statement)]
    known = {id(store.node) for store in named}
    classes = [statement for statement in ctx.statements_with(STORE_NEEDLES) if isinstance(statement, ast.ClassDef)]
    computed = [store for cls in classes for store in _computed_stores(ctx, cls) if id(store.node) not in known]
    # Whatever its name: `module.to(dtype)` and zero.Init cast floating tensors only, so integers and bools (a count,
    # a mask, an int64 enumeration) are stored exactly. By the code alone: a table's value may be read into a name
    # that sounds integral (`sin_pos`).
    tables = [
        store for store in [*named, *computed] if is_floating_tensor(ctx, store.value, by_name=False) is not False
    ]
    return sorted(tables, key=lambda store: (store.node.lineno, store.node.col_offset))


def _computed_stores(ctx: FileContext, cls: ast.ClassDef) -> Iterator[TableStore]:
    """The class's stores of buffers and parameters that hold a table, and of plain attributes that hold one cast
    to a low precision (RPL201's concern; RPL202 leaves plain attributes alone)."""
    candidates = [
        store
        for store in _stores_under(ctx, cls)
        if store.as_buffer or store.parameter or is_low_precision_cast(ctx, store.value)
    ]
    # Frequencies count in a class that computes tables from them (not the decays of a linear attention), and a
    # cos/sin table in a rotary class only: a sinusoidal table of absolute positions holds values in [-1, 1], which
    # bf16 rounds as it rounds any activation, while its angles stay exact.
    rotary = cls in rotary_classes(ctx) or is_rotary_class_name(cls.name)
    text = ctx.lines[cls.lineno - 1 : cls.end_lineno]
    if not rotary and not any(needle in line for line in text for needle in COMPUTATION_NEEDLES):
        # No table math in the class: only a name can say it holds a table.
        for store in candidates:
            if (store.as_buffer or store.parameter) and not store.name.startswith("*") and names_table(store.name):
                yield store._replace(rewritten=False)
        return
    if not candidates:
        return
    found = ctx.derived(_same_file_computation).class_stores(cls)

    def table(facts: frozenset[str]) -> bool:
        frequencies = (rotary or found.computes) and computation.holds_frequencies(facts)
        return frequencies or (rotary and computation.holds_table(facts))

    # `self.weight = self.W`: an alias of frequencies holds them too.
    frequencies = set(found.frequencies)
    if frequencies:
        frequencies |= {
            node.value.attr
            for node in walk(cls)
            if isinstance(node, ast.Assign)
            and is_self_attribute(node.value)
            and any(is_self_attribute(target) and target.attr in found.frequencies for target in node.targets)
        }
    for store in candidates:
        literal = not store.name.startswith("*")
        held = found.held.get(store.name, frozenset()) if literal else frozenset()
        by_value = table(found.stored.get(id(store.node), frozenset()))
        by_use = literal and (table(held) or store.name in frequencies)
        by_name = (store.as_buffer or store.parameter) and literal and names_table(store.name)
        if by_value or by_use or by_name:
            yield store._replace(name=store.name.lstrip("*"), rewritten=False)


def _same_file_computation(ctx: FileContext) -> computation.RotaryComputation:
    return computation.RotaryComputation(computation.same_file_resolver(ctx.tree))


def _stores_under(ctx: FileContext, cls: ast.ClassDef) -> Iterator[TableStore]:
    """Every store in the class of a buffer, a parameter, or an attribute assigned a cast, whatever its name; a
    computed name (`f"args_{i}"`) is its literal tail behind a `*`. Only the statements on lines that spell one are
    read."""
    for node in ctx.walk_near(cls, _STORE_LINE_NEEDLES):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("register_buffer", "register_parameter") and len(node.args) > 0:
                value = node.args[1] if len(node.args) > 1 else _keyword(node, "tensor") or _keyword(node, "param")
                if value is None:
                    continue
                name = _store_name(node.args[0])
                if node.func.attr == "register_buffer":
                    yield TableStore(node, name, value, True, _persistent(node, position=2))
                else:
                    yield _parameter(ctx, node, name, value) or TableStore(node, name, value, False, False, True, True)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            if len(node.args) == 3:
                yield _store(ctx, node, _store_name(node.args[1]), node.args[2])
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and is_self_attribute(node.targets[0]):
            yield _store(ctx, node, node.targets[0].attr, node.value)


def _store_name(node: ast.expr) -> str:
    """A literal name, or `*` and the literal tail of a computed one (its source when it has none)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    tail = _literal_name(node) if isinstance(node, ast.JoinedStr) else None
    return "*" + (tail or ast.unparse(node))


def _table_stores_under(ctx: FileContext, scope: ast.AST) -> Iterator[TableStore]:
    for node in ctx.walk_near(scope, TABLE_NEEDLES):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register_buffer":
            name = _literal_name(node.args[0]) if node.args else None
            value = node.args[1] if len(node.args) > 1 else _keyword(node, "tensor")
            if name and value is not None and is_table_name(name):
                persistent = _persistent(node, position=2)
                yield TableStore(
                    node, name, value, True, persistent, rewritten=_rewrites_registration(node, persistent)
                )
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            if len(node.args) == 3 and (name := _literal_name(node.args[1])) and is_table_name(name):
                yield _store(ctx, node, name, node.args[2])
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if is_self_attribute(target) and is_table_name(target.attr):
                yield _store(ctx, node, target.attr, node.value)


def is_low_precision_cast(ctx: FileContext, node: ast.expr) -> bool:
    """`t.to(dtype)`, `t.to(x.dtype)`, `t.half()`, `t.type_as(x)`: a cast to a dtype that is not float32.

    A literal float32 target is not; a runtime dtype is, as it is bf16 or fp16 in mixed precision. A call that only
    lays the result out follows it as often (`t.to(dtype).contiguous()`): the cast under it counts.
    """
    cast = dtype_cast(ctx, node)
    if cast is None or cast.func.attr in _WIDENING_METHODS:
        return False
    if cast.func.attr == "to":
        dtype = cast_dtype(ctx, cast)
        return ctx.qualified_name(dtype) not in ("torch.float", "torch.float32") and not promotes_to_float32(ctx, dtype)
    return True


# `t.float()`, `t.double()`: casts to float32 and wider.
_WIDENING_METHODS = frozenset({"float", "double"})
# The methods that cast a tensor to a dtype they name: `to` names it only sometimes (`t.to(x.device)`).
_CAST_METHODS = LOW_PRECISION_CAST_METHODS | _WIDENING_METHODS


def dtype_cast(ctx: FileContext, node: ast.expr) -> ast.Call | None:
    """The call that gives `node` a dtype of its own, whatever its receiver's: `t.to(dtype)`, `t.to(x.dtype)`,
    `t.half()`, `t.float()`, `t.type_as(x)`, under calls that only lay the result out (`t.to(dtype).contiguous()`);
    None for anything else."""
    while _lays_out_only(node):
        node = node.func.value
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    method = node.func.attr
    if method in _CAST_METHODS or (method == "to" and cast_dtype(ctx, node) is not None):
        return node
    return None


def cast_dtype(ctx: FileContext, call: ast.Call) -> ast.expr | None:
    """The dtype that `t.to(...)` names, by `dtype=` or positionally; None for a move alone (`t.to(x.device)`)."""
    return _keyword(call, "dtype") or next((arg for arg in call.args if _looks_like_dtype(ctx, arg)), None)


def promotes_to_float32(ctx: FileContext, dtype: ast.expr | None) -> bool:
    """`torch.promote_types(<dtype>, torch.float32)`: float32, or a wider dtype where `<dtype>` is one (the cast
    back that the fixes write where a dtype is known only at run time)."""
    return (
        isinstance(dtype, ast.Call)
        and ctx.qualified_name(dtype.func) == "torch.promote_types"
        and any(ctx.qualified_name(argument) in ("torch.float", "torch.float32") for argument in dtype.args)
    )


# Methods that copy or lay out a tensor and keep its values and dtype.
LAYOUT_METHODS = frozenset({"contiguous", "clone", "detach"})


def _lays_out_only(node: ast.expr) -> TypeGuard[ast.Call]:
    """`t.contiguous()`, `t.clone()`, `t.detach()`: `t`'s values and dtype, laid out anew."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in LAYOUT_METHODS
        and not node.args
        and not node.keywords
    )


def _looks_like_dtype(ctx: FileContext, node: ast.expr) -> bool:
    if promotes_to_float32(ctx, node):
        return True
    name = ctx.qualified_name(node) or ""
    if name.startswith("torch.") and name.split(".")[-1].startswith(("float", "bfloat", "half", "double")):
        return True
    text = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return "dtype" in text


def _store(ctx: FileContext, node: ast.AST, name: str, value: ast.expr) -> TableStore:
    """A `setattr` or an assignment: a buffer when the value is `nn.Buffer(...)`, a parameter when it is
    `nn.Parameter(...)`, a plain attribute otherwise."""
    if isinstance(value, ast.Call) and ctx.qualified_name(value.func) in ("torch.nn.Buffer", "torch.nn.modules.Buffer"):
        inner = value.args[0] if value.args else _keyword(value, "data")
        if inner is not None:
            return TableStore(node, name, inner, True, _persistent(value, position=None))
    return _parameter(ctx, node, name, value) or TableStore(node, name, value, False, False)


def _parameter(ctx: FileContext, node: ast.AST, name: str, value: ast.expr) -> TableStore | None:
    """`nn.Parameter(t)` (trained) or `nn.Parameter(t, requires_grad=False)` (frozen) as a store; None otherwise."""
    if not (isinstance(value, ast.Call) and ctx.qualified_name(value.func) in _PARAMETER_CLASSES):
        return None
    inner = value.args[0] if value.args else _keyword(value, "data")
    if inner is None:
        return None
    flag = _keyword(value, "requires_grad") or (value.args[1] if len(value.args) > 1 else None)
    trained = not (isinstance(flag, ast.Constant) and flag.value is False)
    return TableStore(node, name, inner, False, False, True, trained)


_PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def _rewrites_registration(call: ast.Call, persistent: bool) -> bool:
    """Whether the rope codemod rewrites a `<receiver>.register_buffer(name, value, ...)` of a table: one whose value is
    positional, on a name (`self`, or the module that a function outside the class takes), and, for a persistent
    buffer, on `self` by a literal name. It keeps such a buffer registered beside a float32 copy for its class to
    read, and no class reads a copy that other code puts on it."""
    assert isinstance(call.func, ast.Attribute)
    receiver = call.func.value
    if not isinstance(receiver, ast.Name) or len(call.args) < 2:
        return False
    return not persistent or (receiver.id == "self" and isinstance(call.args[0], ast.Constant))


def _persistent(call: ast.Call, position: int | None) -> bool:
    """Buffers are persistent (in the state_dict) unless `persistent=False` says otherwise."""
    flag = _keyword(call, "persistent")
    if flag is None and position is not None and len(call.args) > position:
        flag = call.args[position]
    return not (isinstance(flag, ast.Constant) and flag.value is False)


def _literal_name(node: ast.expr) -> str | None:
    """A string literal, or the literal tail of an f-string (`f"{prefix}inv_freq"` -> "inv_freq")."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        last = node.values[-1]
        if isinstance(last, ast.Constant) and isinstance(last.value, str):
            return last.value
    return None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def guarded(ctx: FileContext, store: TableStore) -> bool:
    """Whether the class of a stored table keeps its values exact whatever `module.to(dtype)` does: nothing reads
    the values it stores (`values_unread`), or an `_apply` override stores it anew after the cast
    (`rebuilt_by_apply`)."""
    cls = ctx.enclosing_class(store.node)
    if cls is None or not _literal_store(store):
        return False
    return rebuilt_by_apply(cls, store.name) or values_unread(ctx, store.name, store.node)


def _literal_store(store: TableStore) -> bool:
    """A store whose name is written out (not `f"{prefix}inv_freq"`), so that every read of it can be found."""
    node = store.node
    if isinstance(node, ast.Call):
        named = node.args[1] if isinstance(node.func, ast.Name) else node.args[0]
        return isinstance(named, ast.Constant)
    return True


# What reads a tensor's metadata and not its values.
_METADATA = TABLE_DESCRIPTIONS | {"device", "is_floating_point"}


def values_unread(ctx: FileContext, name: str, store: ast.AST) -> bool:
    """Whether the file's code uses `self.<name>` and yet never reads the values that `store` keeps there: every
    read takes its metadata only (`self.inv_freq.dtype`, `.device`), or follows, in the same method, a statement of
    that method's own body, other than `store`, that stores it anew (a forward that recomputes `self.inv_freq`
    before using it). A name that occurs in the file's text where the parsed code does not show it (a comment, code
    left unparsed) counts as a read, and so does a name that nothing in the file reads: code elsewhere may."""
    occurrences = _word_count(ctx.source, name)
    shown = guarded_reads = 0
    for node in ctx.derived(_nodes_by_name).get(name, ()):
        if isinstance(node, ast.Constant) and node.value == name:
            shown += 1
            parent = ctx.parent(node)
            if not (isinstance(parent, ast.Call) and _stores_name(parent, name)):
                return False  # `getattr(self, "inv_freq")`, or a name kept for later
        elif isinstance(node, ast.Attribute) and node.attr == name:
            shown += 1
            if isinstance(node.ctx, ast.Load):
                if not (
                    _metadata_read(ctx, node) or _read_after_store(ctx, node, store) or _read_where_float32(ctx, node)
                ):
                    return False
                guarded_reads += 1
        else:
            shown += 1  # a local of the same name, a parameter or a keyword argument
    return guarded_reads > 0 and shown == occurrences


def _word_count(text: str, word: str) -> int:
    """`len(re.findall(rf"\\b{re.escape(word)}\\b", text))`, tried only where `word` occurs: a pattern that starts
    with `\\b` is tried at every character (1.7 ms for each of a file's table names, most of a one-file check)."""
    whole_word = re.compile(rf"\b{re.escape(word)}\b")
    count, start = 0, text.find(word)
    while start != -1:
        found = whole_word.match(text, start)  # `\b` reads the character before `start`, as `findall` does
        count += found is not None
        start = text.find(word, max(found.end() if found else 0, start + 1))  # an empty word moves on too
    return count


def _nodes_by_name(ctx: FileContext) -> dict[str, list[ast.AST]]:
    """The file's nodes that spell a name, by the name: attributes, string constants, names, parameters and keyword
    arguments, in `ast.walk` order."""
    found: dict[str, list[ast.AST]] = {}
    for node in walk(ctx.tree):
        if isinstance(node, ast.Attribute):
            spelled = node.attr
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            spelled = node.value
        elif isinstance(node, ast.Name):
            spelled = node.id
        elif isinstance(node, ast.arg | ast.keyword) and node.arg:
            spelled = node.arg
        else:
            continue
        found.setdefault(spelled, []).append(node)
    return found


def _stores_name(call: ast.Call, name: str) -> bool:
    """`register_buffer("<name>", ...)`, `setattr(self, "<name>", ...)`: the call stores the name."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in ("register_buffer", "register_parameter"):
        return bool(call.args) and isinstance(call.args[0], ast.Constant) and call.args[0].value == name
    if isinstance(func, ast.Name) and func.id == "setattr":
        return len(call.args) == 3 and isinstance(call.args[1], ast.Constant) and call.args[1].value == name
    return False


def _metadata_read(ctx: FileContext, node: ast.Attribute) -> bool:
    parent = ctx.parent(node)
    return isinstance(parent, ast.Attribute) and parent.attr in _METADATA


def _read_after_store(ctx: FileContext, node: ast.Attribute, store: ast.AST) -> bool:
    """Whether `self.<name>` is read after a statement of its method's own body (not a branch), other than
    `store`, stores it anew."""
    if not is_self_attribute(node):
        return False
    method = next(ctx.enclosing_functions(node), None)
    if method is None:
        return False
    statement = _body_statement(ctx, method, node)
    for earlier in method.body:
        if earlier is statement:
            return False
        if _stores_attribute(earlier, node.attr) and store not in (earlier, getattr(earlier, "value", None)):
            return True
    return False


def _read_where_float32(ctx: FileContext, node: ast.Attribute) -> bool:
    """Whether `self.<name>` is read in a branch that runs only where it is float32: the body of `if
    self.<name>.dtype == torch.float32:`, or the `else` of `!=`, whose other branch computes the table anew (a class
    that keeps a cast from rounding its angles)."""
    table = ast.unparse(node)
    child: ast.AST = node
    parent = ctx.parent(node)
    while parent is not None and not isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        if isinstance(parent, ast.If) and child is not parent.test:
            equal = _dtype_compared_to_float32(ctx, parent.test, table)
            if equal is not None and (child in parent.body) == equal:
                return True
        child, parent = parent, ctx.parent(parent)
    return False


def _dtype_compared_to_float32(ctx: FileContext, test: ast.expr, table: str) -> bool | None:
    """True for `<table>.dtype == torch.float32`, False for `!=`, None for any other test."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq | ast.NotEq)):
        return None
    sides = [test.left, *test.comparators]
    of_table = any(
        isinstance(side, ast.Attribute) and side.attr == "dtype" and ast.unparse(side.value) == table for side in sides
    )
    float32 = any(qualified_dtype(ctx, side) in FLOAT32_DTYPES for side in sides)
    return isinstance(test.ops[0], ast.Eq) if of_table and float32 else None


def _body_statement(ctx: FileContext, method: FunctionNode, node: ast.AST) -> ast.AST | None:
    """The statement of `method.body` that holds `node`."""
    current: ast.AST | None = node
    while current is not None and ctx.parent(current) is not method:
        current = ctx.parent(current)
    return current


def _stores_attribute(statement: ast.stmt, name: str) -> bool:
    """`self.<name> = ...`, `register_buffer("<name>", ...)` or `setattr(self, "<name>", ...)` as a statement."""
    if isinstance(statement, ast.Assign):
        return any(is_self_attribute(target) and target.attr == name for target in statement.targets)
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Call)
        and _stores_name(statement.value, name)
    )


def rebuilt_by_apply(cls: ast.ClassDef, name: str) -> bool:
    """Whether the class overrides `_apply` (through which `module.to()`, `.half()` and `from_pretrained` cast every
    buffer and parameter) and, after calling the parent's, stores `self.<name>` anew, itself or through a method of
    the class, from values that the cast did not round: the statements that compute it read no buffer or parameter
    of the class but for its metadata, and call neither the function `_apply` applies nor a low-precision cast."""
    by_name = {method.name: method for method in methods(cls)}
    apply = by_name.get("_apply")
    if apply is None:
        return False
    rounded = {store.name for store in _stores_under_class(cls) if store.as_buffer or store.parameter}
    applied = apply.args.args[1].arg if len(apply.args.args) > 1 else None
    body = apply.body
    parent_call = next((index for index, statement in enumerate(body) if _calls_parent_apply(statement)), -1)
    after = body[parent_call + 1 :]
    helpers = [
        by_name[call.func.attr]
        for statement in after
        for call in walk(statement)
        if isinstance(call, ast.Call) and is_self_attribute(call.func) and call.func.attr in by_name
    ]
    stores = any(_stores_attribute(statement, name) for statement in _after_any_cast(after, name)) or any(
        _stores_attribute(statement, name) for helper in helpers for statement in helper.body
    )
    computing = [*after, *(statement for helper in helpers for statement in helper.body)]
    return stores and _reads_nothing_rounded(computing, rounded, applied)


def _after_any_cast(statements: list[ast.stmt], name: str) -> Iterator[ast.stmt]:
    """The statements that run after any cast of `self.<name>`: each of `statements`, and the body of an `if` among
    them that runs whenever the cast changed its dtype (`if self.<name>.dtype != torch.float32:`; timm's MRoPE:
    `if wanted(self.inv_freq.dtype) != self.inv_freq.dtype:`)."""
    for statement in statements:
        yield statement
        if isinstance(statement, ast.If) and _tests_dtype_changed(statement.test, name):
            yield from statement.body


def _tests_dtype_changed(test: ast.expr, name: str) -> bool:
    """A single `!=` or `is not` with `self.<name>.dtype` on a side: true when the dtype is not what it should be."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotEq | ast.IsNot)):
        return False
    return any(
        isinstance(node, ast.Attribute)
        and node.attr == "dtype"
        and is_self_attribute(node.value)
        and node.value.attr == name
        for node in walk(test)
    )


def _stores_under_class(cls: ast.ClassDef) -> Iterator[TableStore]:
    """The buffers and parameters the class registers by a literal name (`register_buffer`, `nn.Parameter`)."""
    for node in walk(cls):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if node.func.attr in ("register_buffer", "register_parameter") and isinstance(node.args[0], ast.Constant):
                yield TableStore(node, str(node.args[0].value), node, True, True)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and is_self_attribute(node.targets[0]):
            value = node.value
            callee = value.func if isinstance(value, ast.Call) else None
            held = (
                callee.attr if isinstance(callee, ast.Attribute) else callee.id if isinstance(callee, ast.Name) else ""
            )
            if held in ("Parameter", "Buffer"):
                yield TableStore(node, node.targets[0].attr, value, held == "Buffer", False, held == "Parameter")


def _calls_parent_apply(statement: ast.stmt) -> bool:
    return any(
        isinstance(node, ast.Attribute) and node.attr == "_apply" and isinstance(node.value, ast.Call)
        for node in walk(statement)
    )


def _called(call: ast.Call) -> str | None:
    """`fn(...)` -> "fn", `t.half()` -> "half"."""
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _reads_nothing_rounded(statements: list[ast.stmt], rounded: set[str], applied: str | None) -> bool:
    """Whether the statements read `self.<x>` for each `x` in `rounded` for its metadata only, and call neither
    `applied` nor a low-precision cast."""
    nodes = [node for statement in statements for node in walk(statement)]
    metadata = {id(node.value) for node in nodes if isinstance(node, ast.Attribute) and node.attr in _METADATA}
    for node in nodes:
        if isinstance(node, ast.Call) and _called(node) in (applied, *LOW_PRECISION_CAST_METHODS):
            return False
        reads = is_self_attribute(node) and isinstance(node.ctx, ast.Load) and node.attr in rounded
        if reads and id(node) not in metadata:
            return False
    return True
