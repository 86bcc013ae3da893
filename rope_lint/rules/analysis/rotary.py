"""What the RPL2xx rules, the rope codemods and the probe share: which classes are rotary embeddings, and where
they store their tables.

Whether a class is rotary is decided here alone (`is_rotary_class`), from facts that each reader gathers in its
own way: the rules from `ast`, the codemods from LibCST, the probe from the imported class. A class is rotary when
its name says so, when it stores a table, or when a base is rotary. Its tables are `inv_freq` (and
`original_inv_freq`, `long_inv_freq`, ...) and cos/sin caches.
"""

from __future__ import annotations

import ast
import re
from collections import namedtuple
from collections.abc import Callable, Iterable, Iterator

from rope_lint.rules.analysis.context import FileContext, FunctionNode, is_self_attribute

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
TABLE_TRIGGERS = tuple(needle.encode() for needle in TABLE_NEEDLES)
# The function through which the rope codemod's rewrite reads a table at run time: `_rope_table_on_device(self,
# "inv_freq", x.device)` reads `self.inv_freq` (its copy on the input's device).
TABLE_ON_DEVICE = "_rope_table_on_device"


class TableStore(namedtuple("TableStore", ("node", "name", "value", "as_buffer", "persistent"))):
    """One place a table is stored: `register_buffer(...)`, `x = nn.Buffer(...)`, `setattr(...)` or `self.x = ...`."""

    __slots__ = ()
    node: ast.expr | ast.stmt  # the call, or the assignment
    name: str  # the attribute name, or the literal tail of an f-string name
    value: ast.expr
    as_buffer: bool
    persistent: bool


def is_table_name(name: str) -> bool:
    return any(needle in name for needle in TABLE_NEEDLES)


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


def may_be_rotary(class_text: bytes) -> bool:
    """Whether a class, from its `class` keyword on, can be a rotary class: its name or bases say so, or it
    mentions a table. Decided on the file's bytes, before parsing: the rotary rules need every method of such a
    class."""
    header = class_text[: class_text.find(b"\n")]
    named = any(word in header for word in ROTARY_NAME_TRIGGERS)
    return named or any(needle in class_text for needle in TABLE_TRIGGERS)


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


def construction_methods(cls: ast.ClassDef) -> set[str]:
    """The methods that build the tables: `__init__`, what it reaches through `self.`, and cache builders."""
    references = {
        method.name: {node.attr for node in ast.walk(method) if is_self_attribute(node)} for method in methods(cls)
    }
    return reachable_from_init(references)


def reachable_from_init(references: dict[str, set[str]]) -> set[str]:
    """Given each method's `self.<name>` references: `__init__` and every method it names (a call, or `fn =
    self.compute`), transitively, and the cache builders, which a subclass overrides and its parent's `__init__`
    calls. Shared by the RPL203 check and the rope codemod, so that both mean the same methods."""
    reached, pending = set(), ["__init__"]
    while pending:
        name = pending.pop()
        if name in reached or name not in references:
            continue
        reached.add(name)
        pending.extend(references[name])
    return reached | {name for name in references if "cache" in name or "rope_parameters" in name}


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
    for arg in candidates:
        annotation = arg.annotation
        name = (
            annotation.attr
            if isinstance(annotation, ast.Attribute)
            else annotation.id
            if isinstance(annotation, ast.Name)
            else None
        )
        if name == "device" and isinstance(annotation, ast.Attribute):
            return arg.arg
        if name in _TENSOR_ANNOTATIONS or (annotation is None and arg.arg in read):
            return f"{arg.arg}.device"
    return next((arg.arg for arg in candidates if arg.arg == "device" and arg.annotation is None), None)


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
            for child in ast.iter_child_nodes(node):
                pending.append((child, guarded if child is node.test else guarded | condition))
        else:
            pending.extend((child, guarded) for child in ast.iter_child_nodes(node))
    return names


def _names_in(nodes: list[ast.expr]) -> frozenset[str]:
    return frozenset(name.id for node in nodes for name in ast.walk(node) if isinstance(name, ast.Name))


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


def tables_can_move(cls: ast.ClassDef) -> bool:
    """Whether the rope codemod can keep the class's tables as plain CPU attributes: every method that runs after
    construction, reads a table and returns a value has a `device_source` to move the table to. Otherwise the class
    would return tables on the CPU to a model on an accelerator, and the codemod leaves it as it is."""
    construction = construction_methods(cls)
    for method in methods(cls):
        if method.name in construction or device_source(method) is not None:
            continue
        reads_table = any(is_self_attribute(node) and is_table_name(node.attr) for node in ast.walk(method))
        if reads_table and any(_returns_value(node) for node in _own_nodes(method)):
            return False
    return True


def _returns_value(node: ast.AST) -> bool:
    """`return <value>`, other than `return None` or `return self` (a hook such as `_apply` returns the module)."""
    if not isinstance(node, ast.Return) or node.value is None:
        return False
    value = node.value
    return not (isinstance(value, ast.Constant) and value.value is None) and not (
        isinstance(value, ast.Name) and value.id == "self"
    )


def _own_nodes(method: FunctionNode) -> Iterator[ast.AST]:
    """The nodes of `method`, without those of the functions and classes nested in it."""
    pending: list[ast.AST] = list(method.body)
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, FunctionNode | ast.Lambda | ast.ClassDef):
            pending.extend(ast.iter_child_nodes(node))


def rewritable(ctx: FileContext, cls: ast.ClassDef | None) -> bool:
    """Whether the rope codemod rewrites the tables of `cls` (a class of the file, or None outside every class): the
    RPL2xx rules offer its fix only then."""
    return cls is None or cls.name in ctx.derived(_movable_classes) or cls not in rotary_classes(ctx)


def _movable_classes(ctx: FileContext) -> set[str]:
    return movable_rotary_classes(rotary_classes(ctx))


def movable_rotary_classes(classes: list[ast.ClassDef]) -> set[str]:
    """The names of `classes` (a file's rotary classes) whose tables the rope codemod can move. A class and its
    rotary bases and subclasses in the file share their tables' methods, so they are rewritten together or not at
    all."""
    by_name = {cls.name: cls for cls in classes}
    group = {name: name for name in by_name}

    def root(name: str) -> str:
        while group[name] != name:
            name = group[name]
        return name

    for cls in classes:
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in by_name:
                group[root(cls.name)] = root(base.id)
    stuck = {root(cls.name) for cls in classes if not tables_can_move(cls)}
    return {name for name in by_name if root(name) not in stuck}


def table_stores(ctx: FileContext) -> list[TableStore]:
    """Every store of a table in the file."""
    return ctx.derived(_table_stores)


def _table_stores(ctx: FileContext) -> list[TableStore]:
    return [store for statement in ctx.statements_with(TABLE_NEEDLES) for store in _table_stores_under(ctx, statement)]


def _table_stores_under(ctx: FileContext, scope: ast.AST) -> Iterator[TableStore]:
    for node in ctx.walk_near(scope, TABLE_NEEDLES):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register_buffer":
            name = _literal_name(node.args[0]) if node.args else None
            value = node.args[1] if len(node.args) > 1 else _keyword(node, "tensor")
            if name and value is not None and is_table_name(name):
                yield TableStore(node, name, value, True, _persistent(node, position=2))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            if len(node.args) == 3 and (name := _literal_name(node.args[1])) and is_table_name(name):
                yield _store(ctx, node, name, node.args[2])
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if is_self_attribute(target) and is_table_name(target.attr):
                yield _store(ctx, node, target.attr, node.value)


def is_low_precision_cast(ctx: FileContext, node: ast.expr) -> bool:
    """`t.to(dtype)`, `t.to(x.dtype)`, `t.half()`, `t.type_as(x)`: a cast to a dtype that is not float32.

    A literal float32 target is not; a runtime dtype is, as it is bf16 or fp16 in mixed precision.
    """
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    method = node.func.attr
    if method in LOW_PRECISION_CAST_METHODS:
        return True
    if method == "to":
        dtype = _keyword(node, "dtype") or next((arg for arg in node.args if _looks_like_dtype(ctx, arg)), None)
        return dtype is not None and ctx.qualified_name(dtype) not in ("torch.float", "torch.float32")
    return False


def _looks_like_dtype(ctx: FileContext, node: ast.expr) -> bool:
    name = ctx.qualified_name(node) or ""
    if name.startswith("torch.") and name.split(".")[-1].startswith(("float", "bfloat", "half", "double")):
        return True
    text = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return "dtype" in text


def _store(ctx: FileContext, node: ast.AST, name: str, value: ast.expr) -> TableStore:
    """A `setattr` or an assignment: a buffer when the value is `nn.Buffer(...)`, a plain attribute otherwise."""
    if isinstance(value, ast.Call) and ctx.qualified_name(value.func) in ("torch.nn.Buffer", "torch.nn.modules.Buffer"):
        inner = value.args[0] if value.args else _keyword(value, "data")
        if inner is not None:
            return TableStore(node, name, inner, True, _persistent(value, position=None))
    return TableStore(node, name, value, False, False)


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
