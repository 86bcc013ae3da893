"""The rope codemod: RoPE tables computed once, in float32, on the CPU, kept out of `module.to()`, cast late.

It rewrites every rotary class of a module (`rotary.is_rotary_class`, from the codemods' evidence: a class named
like `*Rotary*`/`*Rope*`, one that names an `inv_freq`, and their subclasses in the file), the RPL2xx fix. Each
step is one small, deterministic edit, so that every `# Copied from` copy of a class gets the same rewrite:

1. Table buffers become plain attributes: `self.register_buffer("inv_freq", v, persistent=False)` ->
   `self.inv_freq = v`; `self.x = nn.Buffer(v, persistent=False)` -> `self.x = v`; an f-string name
   (`f"{prefix}inv_freq"`, in dynamic updates) -> `setattr(self, name, v)`, which updates a buffer and a
   plain attribute alike. `module.to(torch.bfloat16)` leaves plain attributes alone. A persistent buffer
   stays registered, because checkpoints carry its state_dict key, and the class computes from a float32
   copy, `self.<name>_fp32`. A buffer with such a copy beside it is left as it is (a second run adds none).
   A `# Copied from` copy goes its source's way: where the source keeps a table as a persistent buffer and
   the copy registers it otherwise (under `# Ignore copy`, say `persistent=False`), the copy's buffer stays
   too and gets the float32 copy, so that both classes read `self.<name>_fp32` and stay copies
   (`rope_lint/transformers/copies.py`). This needs the file's path, which rope-lint and `libcst.tool` both give.
2. The cast on the way into a table goes: `emb.cos().to(dtype)` -> `emb.cos()` (float32).
3. In `__init__` and the methods it reaches (the cache builders), every `torch.arange` is an explicit CPU
   enumeration (`device="cpu"`, int64 when it had no dtype), and `.to(device)` moves of an enumeration go:
   the tables are computed on the CPU, once.
4. Positions never take a table's dtype: `.type_as(self.inv_freq)` becomes `.float()`, and
   `torch.arange(n, dtype=self.inv_freq.dtype)` becomes `torch.arange(n, dtype=torch.int64).float()`.
5. In `forward`, a table read that no `.to(device=...)` moves is moved to the input's device
   (`self.cos_cached[:n].to(dtype=x.dtype)` -> `.to(device=x.device, dtype=x.dtype)`), since a plain
   attribute does not follow `module.to(device)`.

Run it through rope-lint (`rope-lint fix --unsafe-fixes`, on files with RPL2xx findings) or LibCST:
`python -m libcst.tool codemod --no-format -x rope_lint.codemods.rope_tables.RopeTablesCommand PATH` (see the
README).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import libcst as cst
import libcst.matchers as m
from libcst.codemod import VisitorBasedCodemodCommand

from rope_lint.rules.analysis import rotary
from rope_lint.rules.analysis.rotary import LOW_PRECISION_CAST_METHODS, is_table_name, reachable_from_init
from rope_lint.rules.edits import EQUAL, with_keyword
from rope_lint.transformers.copies import source_chain

_FP32_SUFFIX = "_fp32"


class RopeTablesCommand(VisitorBasedCodemodCommand):
    DESCRIPTION = "RoPE tables in float32 on the CPU, kept out of module.to(), cast late in forward."

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        rotary = rotary_class_names(tree)
        tree = tree.visit(_TableStores(self._kept_by_sources(rotary)))
        return tree.visit(_RotaryClassRewrite(rotary))

    def _kept_by_sources(self, classes: set[str]) -> dict[str, set[str]]:
        """For each of `classes` that is a `# Copied from` copy: the tables its sources keep as persistent buffers.

        The module may be a run of the file's statements without the comments above them (rope-lint edits only the
        statements with findings), so the copy comments are read from the file itself.
        """
        if not self.context.filename:
            return {}
        path = Path(self.context.filename)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return {}
        if "Copied from" not in text:
            return {}
        kept = {}
        for name in classes:
            tables = {table for code in source_chain(path, text, name) for table in _persistent_buffers(code)}
            if tables:
                kept[name] = tables
        return kept


def rotary_class_names(module: cst.Module) -> set[str]:
    """The rotary classes of the module, told by `rotary.is_rotary_class` from the codemods' evidence."""
    return rotary.rotary_class_names(
        (
            rotary.ClassFacts(
                cls.name.value,
                tuple(base.value.value for base in cls.bases if isinstance(base.value, cst.Name)),
                _names_in(cls),
            )
            for cls in module.body
            if isinstance(cls, cst.ClassDef)
        ),
        rotary.CODEMOD_EVIDENCE,
    )


def _names_in(cls: cst.ClassDef) -> Iterator[str]:
    """The names that `self.` attributes and one-line strings of the class spell (a string as written, quotes
    and all): where it names its tables. A multi-line string is prose, a docstring."""
    for node in m.findall(cls, m.SimpleString() | m.Attribute(value=m.Name("self"), attr=m.Name())):
        if isinstance(node, cst.Attribute):
            yield node.attr.value
        elif isinstance(node, cst.SimpleString) and "\n" not in node.value:
            yield node.value


def _string_value(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value if isinstance(node.evaluated_value, str) else None
    if isinstance(node, cst.FormattedString) and node.parts and isinstance(node.parts[-1], cst.FormattedStringText):
        return node.parts[-1].value
    return None


def _keyword(call: cst.Call, name: str) -> cst.Arg | None:
    return next((arg for arg in call.args if arg.keyword is not None and arg.keyword.value == name), None)


def _is_false(node: cst.BaseExpression | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


def _self_attribute(name: str) -> cst.Attribute:
    return cst.Attribute(value=cst.Name("self"), attr=cst.Name(name))


def _is_persistent_registration(call: cst.Call) -> bool:
    """`register_buffer(name, v)` without `persistent=False`."""
    persistent = _keyword(call, "persistent") or (call.args[2] if len(call.args) > 2 else None)
    return persistent is None or not _is_false(persistent.value)


def _persistent_buffers(code: str) -> set[str]:
    """The tables that `code` (a class, as written or as rewritten) keeps as persistent buffers under literal names."""
    try:
        module = cst.parse_module(textwrap.dedent(code))
    except cst.ParserSyntaxError:
        return set()
    names = set()
    for call in m.findall(module, m.Call(func=m.Attribute(value=m.Name("self"), attr=m.Name("register_buffer")))):
        assert isinstance(call, cst.Call)
        name = _string_value(call.args[0].value) if len(call.args) >= 2 else None
        if name and isinstance(call.args[0].value, cst.SimpleString) and _is_persistent_registration(call):
            names.add(name)
    for assign in m.findall(module, m.Assign(targets=[m.AssignTarget(m.Attribute(value=m.Name("self")))])):
        assert isinstance(assign, cst.Assign) and isinstance(assign.targets[0].target, cst.Attribute)
        if _buffer(assign.value)[1]:
            names.add(assign.targets[0].target.attr.value)
    return {name for name in names if is_table_name(name) and not name.endswith(_FP32_SUFFIX)}


class _TableStores(cst.CSTTransformer):
    """Steps 1 and 2, in the whole module: a table is stored as a float32 plain attribute."""

    def __init__(self, kept_by_sources: dict[str, set[str]]) -> None:
        super().__init__()
        self.kept_by_sources = kept_by_sources  # per class: tables its copy sources keep as persistent buffers
        # Per class being visited, innermost last: the tables to keep as buffers beside a float32 copy even when
        # not persistent, and the tables that have their float32 copy already.
        self.classes: list[tuple[set[str], set[str]]] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        copied = {
            target.target.attr.value.removesuffix(_FP32_SUFFIX)
            for target in m.findall(node, m.AssignTarget(m.Attribute(value=m.Name("self"))))
            if isinstance(target, cst.AssignTarget)
            and isinstance(target.target, cst.Attribute)
            and target.target.attr.value.endswith(_FP32_SUFFIX)
        }
        self.classes.append((self.kept_by_sources.get(node.name.value, set()), copied))
        return True

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        self.classes.pop()
        return updated_node

    @property
    def kept(self) -> set[str]:
        return self.classes[-1][0] if self.classes else set()

    @property
    def copied(self) -> set[str]:
        return self.classes[-1][1] if self.classes else set()

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        if len(updated_node.body) != 1:
            return updated_node
        statement = updated_node.body[0]
        if isinstance(statement, cst.Expr) and isinstance(statement.value, cst.Call):
            replacement = self._register_buffer(statement.value)
            if isinstance(replacement, list):  # a kept buffer, and its float32 copy after it
                return cst.FlattenSentinel([updated_node, _line_after(updated_node, replacement[0])])
            if replacement is not None:
                return updated_node.with_changes(body=[replacement])
        if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
            target = statement.targets[0].target
            if m.matches(target, m.Attribute(value=m.Name("self"))) and is_table_name(target.attr.value):
                name = target.attr.value
                data, persistent = _buffer(statement.value)
                if data is not None and name in self.copied:
                    return updated_node  # the class reads the float32 copy already
                if data is not None and (persistent or name in self.kept) and not name.endswith(_FP32_SUFFIX):
                    # `self.x = nn.Buffer(v)`: the state_dict key stays, and a float32 copy goes beside it.
                    copy = cst.Assign(
                        [cst.AssignTarget(_self_attribute(name + _FP32_SUFFIX))], _without_final_cast(data)
                    )
                    return cst.FlattenSentinel([updated_node, _line_after(updated_node, copy)])
                value = _unwrap_buffer(statement.value) or statement.value
                return updated_node.with_changes(body=[statement.with_changes(value=_without_final_cast(value))])
        return updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        # setattr(self, f"{prefix}inv_freq", nn.Buffer(v, persistent=False)) -> setattr(self, ..., v)
        if m.matches(updated_node.func, m.Name("setattr")) and len(updated_node.args) == 3:
            name = _string_value(updated_node.args[1].value)
            unwrapped = _unwrap_buffer(updated_node.args[2].value)
            if name and is_table_name(name) and unwrapped is not None:
                args = list(updated_node.args)
                args[2] = args[2].with_changes(value=unwrapped)
                return updated_node.with_changes(args=args)
        return updated_node

    def _register_buffer(self, call: cst.Call) -> cst.BaseSmallStatement | list[cst.BaseSmallStatement] | None:
        if not (
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "register_buffer"
            and m.matches(call.func.value, m.Name("self"))
            and len(call.args) >= 2
        ):
            return None
        name = _string_value(call.args[0].value)
        if not name or not is_table_name(name) or name.endswith(_FP32_SUFFIX) or name in self.copied:
            return None
        value = call.args[1].value
        literal = isinstance(call.args[0].value, cst.SimpleString)
        if _is_persistent_registration(call) or (literal and name in self.kept):
            if not literal:
                return None
            # Checkpoints carry this key (or the copy's source keeps it): keep the buffer, and compute from a float32
            # copy beside it.
            return [cst.Assign([cst.AssignTarget(_self_attribute(name + _FP32_SUFFIX))], _without_final_cast(value))]
        if literal:
            return cst.Assign([cst.AssignTarget(_self_attribute(name))], _without_final_cast(value))
        return cst.Expr(
            cst.Call(
                func=cst.Name("setattr"),
                args=[
                    cst.Arg(cst.Name("self"), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                    call.args[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                    cst.Arg(value),
                ],
            )
        )


def _line_after(line: cst.SimpleStatementLine, statement: cst.BaseSmallStatement) -> cst.SimpleStatementLine:
    """A line holding `statement`, to go right after `line`: the comments above `line` (an `# Ignore copy`) stay
    with it alone."""
    return line.with_changes(body=[statement], leading_lines=())


def _unwrap_buffer(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """`nn.Buffer(v, persistent=False)` -> v; None for anything else, a persistent buffer included."""
    data, persistent = _buffer(value)
    return data if data is not None and not persistent else None


def _buffer(value: cst.BaseExpression) -> tuple[cst.BaseExpression | None, bool]:
    """The data of an `nn.Buffer(...)` call and whether it is persistent; (None, False) for anything else."""
    if not (
        isinstance(value, cst.Call) and m.matches(value.func, m.Name("Buffer") | m.Attribute(attr=m.Name("Buffer")))
    ):
        return None, False
    positional = [arg for arg in value.args if arg.keyword is None]
    if not positional:
        return None, False
    persistent = _keyword(value, "persistent")
    return positional[0].value, persistent is None or not _is_false(persistent.value)


class _RotaryClassRewrite(cst.CSTTransformer):
    """Steps 3 to 5, inside rotary classes."""

    def __init__(self, rotary: set[str]) -> None:
        super().__init__()
        self.rotary = rotary
        self.class_stack: list[str] = []
        self.construction: set[str] = set()  # __init__ and the methods it reaches
        self.tables: set[str] = set()  # tables the construction stores: plain CPU attributes from now on
        self.persistent: set[str] = set()  # tables kept as buffers, read through their float32 copy
        self.method: str | None = None
        self.input: str | None = None  # a runtime method's first argument, whose device tables move to
        self.moved: set[cst.CSTNode] = set()  # table reads already moved by a `.to(...)` or by their return
        self.stored: set[cst.CSTNode] = set()  # assignment targets, which are not reads

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.class_stack.append(node.name.value)
        if node.name.value in self.rotary:
            self.construction = _construction_methods(node)
            self.tables = _construction_tables(node, self.construction)
            self.persistent = {name.removesuffix(_FP32_SUFFIX) for name in self.tables if name.endswith(_FP32_SUFFIX)}
        return True

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        self.class_stack.pop()
        return updated_node

    @property
    def in_rotary(self) -> bool:
        return bool(self.class_stack) and self.class_stack[-1] in self.rotary

    @property
    def at_runtime(self) -> bool:
        return self.in_rotary and self.method is not None and self.method not in self.construction

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        if self.in_rotary and self.method is None:
            self.method = node.name.value
            params = [p.name.value for p in node.params.params if p.name.value != "self"]
            self.input = params[0] if params and self.method not in self.construction else None
        return True

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        if self.in_rotary and self.method == original_node.name.value:
            self.method = None
        return updated_node

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        self.stored.add(node.target)
        return True

    def visit_Call(self, node: cst.Call) -> bool:
        if m.matches(node.func, m.Attribute(attr=m.Name("to"))):
            assert isinstance(node.func, cst.Attribute)
            self.moved.add(_receiver_root(node.func.value))
        return True

    def visit_Return(self, node: cst.Return) -> bool:
        elements = node.value.elements if isinstance(node.value, cst.Tuple) else [node.value] if node.value else []
        for element in elements:
            value = element.value if isinstance(element, cst.Element) else element
            if _is_bare_table_read(value):
                self.moved.add(_receiver_root(value))
        return True

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not self.in_rotary or self.method is None:
            return updated_node
        func = updated_node.func
        # `getattr(self, "inv_freq")` of a persistent table reads its float32 copy, as `self.inv_freq` does.
        if m.matches(
            updated_node, m.Call(func=m.Name("getattr"), args=[m.Arg(m.Name("self")), m.Arg(m.SimpleString())])
        ):
            name = _string_value(updated_node.args[1].value)
            if name in self.persistent and self.method != "__init__":
                args = [
                    updated_node.args[0],
                    updated_node.args[1].with_changes(value=cst.SimpleString(f'"{name}_fp32"')),
                ]
                return updated_node.with_changes(args=args)
        # Step 4: positions take float32, never the dtype of a table.
        is_type_as = m.matches(func, m.Attribute(attr=m.Name("type_as"))) and updated_node.args
        if is_type_as and _reads_table(updated_node.args[0].value):
            return cst.Call(func=func.with_changes(attr=cst.Name("float")))
        is_arange = m.matches(func, m.Attribute(value=m.Name("torch"), attr=m.Name("arange")))
        dtype = _keyword(updated_node, "dtype")
        if is_arange and dtype is not None and _reads_table(dtype.value):
            # `dtype=self.inv_freq.dtype`: int64 positions cast to float32 (RPL101's fix, for the codemod alone).
            enumeration = with_keyword(updated_node, "dtype", "torch.int64")
            if self.method in self.construction:
                enumeration = _cpu_enumeration(enumeration)
            return cst.Call(func=cst.Attribute(value=enumeration, attr=cst.Name("float")))
        if self.method in self.construction:
            # Step 3: enumerations on the CPU, and no moves before the math.
            if is_arange:
                return _cpu_enumeration(updated_node)
            if m.matches(func, m.Attribute(attr=m.Name("to"))) and _contains_arange(func.value):
                return _without_device_move(updated_node)
        # Step 5: at runtime, a `.to(...)` of a table read moves it to the input's device.
        is_move = m.matches(func, m.Attribute(attr=m.Name("to"))) and _reads_table(func.value)
        if self.at_runtime and self.input and is_move:
            return _with_device(updated_node, self.input)
        return updated_node

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        if not (self.in_rotary and self.method not in (None, "__init__")):
            return updated_node
        if not m.matches(updated_node.value, m.Name("self")) or original_node in self.stored:
            return updated_node
        name = updated_node.attr.value
        if name in self.persistent:  # a persistent table is read through its float32 copy
            name += _FP32_SUFFIX
            updated_node = updated_node.with_changes(attr=cst.Name(name))
        if self.at_runtime and self.input and name in self.tables and original_node not in self.moved:
            return _moved(updated_node, self.input)
        return updated_node

    def leave_Return(self, original_node: cst.Return, updated_node: cst.Return) -> cst.Return:
        # Step 5: a table returned as it is moves to the input's device, slice and all.
        if self.at_runtime and self.input and updated_node.value is not None:
            return updated_node.with_changes(value=_move_bare_table_reads(updated_node.value, self.input))
        return updated_node


def _receiver_root(node: cst.BaseExpression) -> cst.BaseExpression:
    """`self.cos_cached` of `self.cos_cached[:n].float()`: what a chain of subscripts and calls starts from."""
    while True:
        if isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        else:
            return node


def _moved(node: cst.BaseExpression, device_of: str) -> cst.Call:
    return cst.Call(
        func=cst.Attribute(value=node, attr=cst.Name("to")),
        args=[cst.Arg(cst.parse_expression(f"{device_of}.device"))],
    )


def _construction_tables(cls: cst.ClassDef, construction: set[str]) -> set[str]:
    """Tables that construction stores as tensors (not `None`): after step 1, plain attributes on the CPU."""
    tables = set()
    for method in cls.body.body:
        if isinstance(method, cst.FunctionDef) and method.name.value in construction:
            for assign in m.findall(method, m.Assign(targets=[m.AssignTarget(m.Attribute(value=m.Name("self")))])):
                assert isinstance(assign, cst.Assign)
                target = assign.targets[0].target
                assert isinstance(target, cst.Attribute)
                if is_table_name(target.attr.value) and not m.matches(assign.value, m.Name("None")):
                    tables.add(target.attr.value)
    return tables


def _construction_methods(cls: cst.ClassDef) -> set[str]:
    references = {
        method.name.value: {
            attribute.attr.value
            for attribute in m.findall(method, m.Attribute(value=m.Name("self"), attr=m.Name()))
            if isinstance(attribute, cst.Attribute)
        }
        for method in cls.body.body
        if isinstance(method, cst.FunctionDef)
    }
    return reachable_from_init(references)


def _reads_table(node: cst.BaseExpression) -> bool:
    return bool(m.findall(node, m.Attribute(value=m.Name("self"), attr=m.Name(value=m.MatchIfTrue(is_table_name)))))


def _contains_arange(node: cst.BaseExpression) -> bool:
    return bool(m.findall(node, m.Call(func=m.Attribute(value=m.Name("torch"), attr=m.Name("arange")))))


def _without_final_cast(value: cst.BaseExpression) -> cst.BaseExpression:
    """`e.to(dtype)`, `e.half()`, `e.type_as(x)` -> `e`. A move (`.to(device)`) stays."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
        return value
    method = value.func.attr.value
    if method in LOW_PRECISION_CAST_METHODS:
        return value.func.value
    if method == "to":
        dtype = _keyword(value, "dtype")
        positional = [arg for arg in value.args if arg.keyword is None]
        if dtype is None and len(positional) == 1 and "dtype" in cst.Module([]).code_for_node(positional[0].value):
            return value.func.value
        if dtype is not None and not positional and len(value.args) == 1:
            return value.func.value
    return value


def _cpu_enumeration(call: cst.Call) -> cst.BaseExpression:
    """`torch.arange(...)` on the CPU (`device="cpu"`) in int64: with no dtype it gets `dtype=torch.int64`, and a
    float32 one becomes int64 cast with `.float()` (RPL101's fix, for the codemod run alone)."""
    dtype = _keyword(call, "dtype")
    if dtype is None and not m.findall(call, m.Float()):
        return with_keyword(with_keyword(call, "dtype", "torch.int64"), "device", '"cpu"')
    if dtype is not None and m.matches(dtype.value, m.Attribute(m.Name("torch"), m.Name("float") | m.Name("float32"))):
        enumeration = with_keyword(with_keyword(call, "dtype", "torch.int64"), "device", '"cpu"')
        return cst.Call(func=cst.Attribute(value=enumeration, attr=cst.Name("float")))
    return with_keyword(call, "device", '"cpu"')


def _without_device_move(call: cst.Call) -> cst.BaseExpression:
    """`e.to(device)` -> `e`; `e.to(device=d, dtype=t)` -> `e.to(dtype=t)`."""
    assert isinstance(call.func, cst.Attribute)
    kept = [
        arg
        for arg in call.args
        if not (arg.keyword is not None and arg.keyword.value == "device")
        and not (arg.keyword is None and "device" in cst.Module([]).code_for_node(arg.value))
    ]
    if not kept:
        return call.func.value
    if len(kept) == len(call.args):
        return call
    kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=kept)


def _with_device(call: cst.Call, forward_input: str) -> cst.Call:
    """A `.to(...)` that names no device gets `device=<input>.device` first."""
    code = cst.Module([]).code_for_node(call)
    if "device" in code.split(".to(", 1)[-1]:
        return call
    positional = [arg for arg in call.args if arg.keyword is None]
    if positional:  # `.to(x.dtype)` -> `.to(device=x.device, dtype=x.dtype)`
        call = call.with_changes(
            args=[arg.with_changes(keyword=cst.Name("dtype"), equal=EQUAL) if arg.keyword is None else arg
                  for arg in call.args]
        )  # fmt: skip
    moved = with_keyword(call, "device", f"{forward_input}.device")
    # device first, as people write it: move the new argument to the front.
    args = list(moved.args)
    device = args.pop()
    first, rest = device.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), args
    rest[-1] = rest[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return moved.with_changes(args=[first, *rest])


def _move_bare_table_reads(value: cst.BaseExpression, forward_input: str) -> cst.BaseExpression:
    """`return self.cos_cached[:n], ...` -> `return self.cos_cached[:n].to(x.device), ...`."""

    def moved(element: cst.BaseExpression) -> cst.BaseExpression:
        return _moved(element, forward_input) if _is_bare_table_read(element) else element

    if isinstance(value, cst.Tuple):
        return value.with_changes(elements=[e.with_changes(value=moved(e.value)) for e in value.elements])
    return moved(value)


def _is_bare_table_read(node: cst.BaseExpression) -> bool:
    """`self.cos_cached` or `self.cos_cached[:n]`: a table, not moved or cast."""
    while isinstance(node, cst.Subscript):
        node = node.value
    return isinstance(node, cst.Attribute) and m.matches(node.value, m.Name("self")) and is_table_name(node.attr.value)
