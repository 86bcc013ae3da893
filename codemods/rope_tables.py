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
   (`rope_lint/transformers/copies.py`). So does a class of a transformers modular source (or of the file generated
   from it) with the parent model's class it subclasses there: regeneration merges the parent's members into it, so
   it keeps the parent's persistent buffers, and its methods read the tables the parent's `__init__` stores
   (`rope_lint/transformers/generated.py`). This needs the file's path, which rope-lint and `libcst.tool` both give.
   A buffer kept this way is registered on the default device, where the original put it: left on the CPU, it
   would stay there in a model built under `with torch.device("meta")` or `torch.set_default_device(...)`.
2. The cast on the way into a table goes: `emb.cos().to(dtype)` -> `emb.cos()` (float32).
3. In `__init__` and the methods it reaches (the cache builders, and the overrides of what a base class of the file
   reaches from its `__init__`: `rotary.construction_methods`), the tables are computed on the CPU, once:
   every tensor factory (`torch.arange`, `linspace`, `ones`, ...) gets `device="cpu"`, `.to(device)` moves of an
   enumeration go, and a statement that computes a table through a function from outside the class (a helper, a
   registry's entry) runs under `with torch.device("cpu")`, so that a model built on `meta` holds real tables
   through `to_empty()`; one that feeds no table (the registration of a buffer that step 1 keeps, whose float32 copy
   is computed apart) computes where the original did, since its factories, pinned, would meet that function's
   tensors on the default device. A parameter, or a buffer that step 1 keeps, made there from such values goes to the
   default device, where the original made it (`nn.Parameter(t.to(torch.empty(0).device))`, which runs on any torch,
   unlike `torch.get_default_device()`, added in 2.3: `rotary.DEFAULT_DEVICE`): nothing would
   move it off the CPU in a model built under `torch.set_default_device(...)`. An enumeration keeps its dtype:
   turning it into int64 is RPL101's fix, made only where its bounds are proven integral.
4. Positions never take a table's dtype: `.type_as(self.inv_freq)` becomes `.float()` in construction, and
   `.to(device=<device>, dtype=torch.float32)` at run time (`type_as` moved them to the table's device too).
5. In the other methods, a table read is its copy on the device of a tensor the method takes, since a plain attribute
   does not follow `module.to(device)`: `self.cos_cached[:n].to(dtype=x.dtype)` -> `_rope_table_on_device(self,
   "cos_cached", x.device)[:n].to(dtype=x.dtype)`. That function (`TABLE_ON_DEVICE`, added once to the file) moves
   the float32 table to the device on the first call there and keeps the copy in a plain attribute, a per-device
   cache that `module.to(dtype)` never rounds, until the table is replaced: a steady-state forward copies nothing
   between devices, synchronises nothing, and compiles whole. It reads the cache as an attribute, on which
   TorchDynamo guards, so that a compiled forward traced before the first copy is traced again once the copy is
   made, and does not copy in every call. A move of the copy to its own device goes, and so does
   one of a tensor that forward makes on the default device only to move it there (`torch.arange(n).to(x.device)` ->
   `torch.arange(n, device=x.device)`); `self.inv_freq.device` becomes that device, and a read of a table's dtype or
   shape stays. The device comes only from a parameter that is a tensor on every path, or a device parameter
   (`rotary.device_source`), never from a sequence length, a shape, the function an `_apply` override takes, or a
   tensor that the method moves to the table's device itself (`position_ids.to(self.inv_freq.device)`: it may live
   elsewhere). A method without one moves nothing; a class with such a method that returns what it read, or keeps it
   on `self` for forward to return (`rotary.movable_rotary_classes`), would hand CPU tables to a model on an
   accelerator, so the codemod leaves it, and its rotary bases and subclasses in the file, as they are. So it does a
   class whose construction reads a buffer that step 1 keeps (the buffer is on the default device, its tables on the
   CPU), one that caches tables at run time (`self._cos_cached = ...` after construction: their dtype is the
   module's, and so is what it returns), one whose construction makes tensors the codemod cannot pin (a factory not
   spelled `torch.<factory>`) or moves a table to a device of its own, and one whose construction is given a device
   (`device=device`, `self.device`) and that keeps a buffer or parameter registered, which would go to the default
   device instead (`rotary.tables_can_move`); one built in part by a base in another module, which the codemod does
   not see: its construction calls a method of that base, whose tensors stay on the default device, or the base keeps
   what its builders return (`rotary.builds_for_a_base_out_of_view`; a transformers modular source's parent model is
   in view, since regeneration merges it in); and one whose tables other code of the package reads off the module
   (`self.rotary_emb.cos_sin_cache` handed to a kernel), which would get the CPU attribute
   (`rope_lint/rules/analysis/table_reads.py`, asked of the package: `CodemodFile.package`).
   Functions outside the class that a decorator on forward runs first (dynamic and long-context updates, which
   take the module and a device) read the tables the same way, so that an update in place (`.copy_()`) writes into
   the copy that forward reads, at the address CUDA graphs replay; an update that replaces a table
   (`register_buffer`, now `setattr`) replaces the master, whose next read makes its copy again.

A file written for TorchScript (`torch.jit.Final`, `@torch.jit.ignore`, `torch.jit.is_scripting()`) is left as it is
(`context.written_for_torchscript`): `torch.jit.script` cannot compile `_rope_table_on_device`.

Run it through rope-lint (`rope-lint fix --unsafe-fixes`, on files with RPL2xx findings) or LibCST:
`python -m libcst.tool codemod --no-format -x rope_lint.codemods.commands.RopeTablesCommand PATH` (see
docs/fix.md).
"""

from __future__ import annotations

import ast
import builtins
import functools
import textwrap
from collections.abc import Iterator
from pathlib import Path

import libcst as cst
from rope_lint.codemods.codemod_file import CodemodFile
from rope_lint.codemods.nodes import Satisfies, findall, like, matches

from rope_lint.prefilter import candidates
from rope_lint.rules.analysis import rotary
from rope_lint.rules.analysis.context import written_for_torchscript
from rope_lint.rules.analysis.rotary import (
    DEFAULT_DEVICE,
    DEFAULT_DEVICE_SPELLINGS,
    FP32_COPY_SUFFIX,
    LAYOUT_METHODS,
    LOW_PRECISION_CAST_METHODS,
    TABLE_DESCRIPTIONS,
    TABLE_ON_DEVICE,
    TENSOR_FACTORIES,
    is_table_name,
    reachable_from_init,
)
from rope_lint.rules.edits import Transformer, as_assigned_value, as_operand, with_keyword
from rope_lint.transformers import generated
from rope_lint.transformers.copies import source_chain

# `self.<name> = ...`, and `Buffer` or `<module>.Buffer`.
_STORE_ON_SELF = like.Assign(targets=[like.AssignTarget(like.Attribute(value=like.Name("self")))])
_BUFFER = like.Name("Buffer") | like.Attribute(attr=like.Name("Buffer"))


def rewrite(tree: cst.Module, file: CodemodFile) -> cst.Module:
    """The rope codemod's rewrite of `tree`, the module of `file` or a run of its statements: none in a file written for
    TorchScript, which could not script the rewrite (`context.written_for_torchscript`)."""
    if written_for_torchscript(file.text if file.text is not None else tree.code):
        return tree
    rotary_names = rotary_class_names(tree)
    classes = _parsed_classes(tree, rotary_names)
    # The rotary classes whose tables the codemod can move to where they are used: none whose tables other code of the
    # package reads off a module.
    stored = set().union(*map(rotary.stored_tables, classes.values()))
    read = {name for name in stored if file.path and file.package.table_read_elsewhere(file.path, name)}
    movable = rotary.movable_rotary_classes(list(classes.values()), read)
    copied, inherited = _sources(movable, file)
    in_view = classes
    bases = {base.id for cls in classes.values() for base in cls.bases if isinstance(base, ast.Name)}
    if bases - classes.keys():
        # The module may be a run of the file's statements: the other bases are read from the whole text.
        whole = file.tree
        in_view = {**(rotary.top_level_classes(whole) if whole else {}), **classes}
    # A class whose base out of view keeps what its builders return, unless regeneration merges that base in.
    unseen = {
        name for name in movable if not inherited[name] and rotary.builds_for_a_base_out_of_view(in_view[name], in_view)
    }
    if unseen:
        movable = rotary.movable_rotary_classes(list(classes.values()), read, left=unseen)
    kept = {
        name: tables
        for name in movable
        if (tables := {t for code in [*copied[name], *inherited[name]] for t in _persistent_buffers(code)})
    }
    # The methods that run at construction, as RPL203 reads them: a base's `__init__` runs a subclass's overrides.
    construction = {name: rotary.construction_methods(in_view[name], in_view) for name in movable}
    tree = tree.visit(_TableStores(kept, rotary_names - movable, movable))
    inherited_tables = {name: _inherited_tables(tuple(inherited[name])) for name in movable}
    tree = tree.visit(_RotaryClassRewrite(movable, inherited_tables, construction))
    return tree.visit(_TablesOfModuleFunctions())


def _sources(classes: set[str], file: CodemodFile) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """For each of `classes`: the code of its `# Copied from` sources, and of the parent models' classes that
    regenerating it from a modular source merges into it (`transformers.generated.inherited_classes`). Its rewrite
    goes their way: it keeps the tables they keep as persistent buffers, and reads the tables they store.

    The module may be a run of the file's statements without the comments above them (rope-lint edits only the
    statements with findings), so the copy comments and imports are read from the file itself.
    """
    copied: dict[str, list[str]] = {name: [] for name in classes}
    inherited: dict[str, list[str]] = {name: [] for name in classes}
    text = file.text
    if text is None or not file.path:  # the sources are found through the file's path
        return copied, inherited
    path = Path(file.path)
    for name in classes:
        copied[name] = source_chain(path, text, name) if "Copied from" in text else []
        inherited[name] = generated.inherited_classes(path, text, name)
    return copied, inherited


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


def _parsed_classes(module: cst.Module, names: set[str]) -> dict[str, ast.ClassDef]:
    """The `ast` of the module's classes of `names`, by name."""
    return {
        parsed.name: parsed
        for cls in module.body
        if isinstance(cls, cst.ClassDef) and cls.name.value in names
        for parsed in ast.parse(_code(cls)).body
        if isinstance(parsed, ast.ClassDef)
    }


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _names_in(cls: cst.ClassDef) -> Iterator[str]:
    """The names that `self.` attributes and one-line strings of the class spell (a string as written, quotes
    and all): where it names its tables. A multi-line string is prose, a docstring."""
    for node in findall(cls, like.SimpleString() | like.Attribute(value=like.Name("self"), attr=like.Name())):
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


def _self_attribute(name: str, owner: str = "self") -> cst.Attribute:
    return cst.Attribute(value=cst.Name(owner), attr=cst.Name(name))


def _is_persistent_registration(call: cst.Call) -> bool:
    """`register_buffer(name, v)` without `persistent=False`."""
    persistent = _keyword(call, "persistent") or (call.args[2] if len(call.args) > 2 else None)
    return persistent is None or not _is_false(persistent.value)


@functools.lru_cache(maxsize=4)
def _parsed_class(code: str) -> cst.Module | None:
    """The code of a class (as written, or as rewritten), parsed alone; None where it does not parse. Kept: a parent
    model's class is read for each model that copies or inherits it, three times for each."""
    try:
        return cst.parse_module(textwrap.dedent(code))
    except cst.ParserSyntaxError:
        return None


@functools.lru_cache(maxsize=64)
def _persistent_buffers(code: str) -> frozenset[str]:
    """The tables that `code` (a class, as written or as rewritten) keeps as persistent buffers under literal names.
    Kept, as `_parsed_class` is: 416 lookups of 66 classes in transformers 5.24.0's fix."""
    module = _parsed_class(code)
    if module is None:
        return frozenset()
    names = set()
    registrations = like.Call(func=like.Attribute(value=like.Name("self"), attr=like.Name("register_buffer")))
    for call in findall(module, registrations):
        assert isinstance(call, cst.Call)
        name = _string_value(call.args[0].value) if len(call.args) >= 2 else None
        if name and isinstance(call.args[0].value, cst.SimpleString) and _is_persistent_registration(call):
            names.add(name)
    for assign in findall(module, _STORE_ON_SELF):
        assert isinstance(assign, cst.Assign) and isinstance(assign.targets[0].target, cst.Attribute)
        if _buffer(assign.value)[1]:
            names.add(assign.targets[0].target.attr.value)
    return frozenset(name for name in names if is_table_name(name) and not name.endswith(FP32_COPY_SUFFIX))


class _TableStores(Transformer):
    """Steps 1 and 2, in the whole module: a table is stored as a float32 plain attribute."""

    def __init__(self, kept_by_sources: dict[str, set[str]], left_alone: set[str], movable: set[str]) -> None:
        super().__init__()
        self.kept_by_sources = kept_by_sources  # per class: tables its copy sources keep as persistent buffers
        self.left_alone = left_alone  # rotary classes whose tables cannot move: not rewritten at all
        self.movable = movable  # rotary classes, whose tables the rewrite computes on the CPU
        # Per class being visited, innermost last: the tables to keep as buffers beside a float32 copy even when
        # not persistent, and the tables that have their float32 copy already.
        self.classes: list[tuple[set[str], set[str]]] = []
        self.class_names: list[str] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.class_names.append(node.name.value)
        copied = {
            target.target.attr.value.removesuffix(FP32_COPY_SUFFIX)
            for target in findall(node, like.AssignTarget(like.Attribute(value=like.Name("self"))))
            if isinstance(target, cst.AssignTarget)
            and isinstance(target.target, cst.Attribute)
            and target.target.attr.value.endswith(FP32_COPY_SUFFIX)
        }
        self.classes.append((self.kept_by_sources.get(node.name.value, set()), copied))
        return node.name.value not in self.left_alone

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        self.classes.pop()
        self.class_names.pop()
        return updated_node

    @property
    def pinned(self) -> bool:
        """Whether the class being visited computes its tables on the CPU (after the rewrite's step 3)."""
        return bool(self.class_names) and self.class_names[-1] in self.movable

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
                if self.pinned:
                    kept = _on_default_device(statement.value, 1)
                    updated_node = updated_node.with_changes(body=[statement.with_changes(value=kept)])
                return cst.FlattenSentinel([updated_node, _line_after(updated_node, replacement[0])])
            if replacement is not None:
                return updated_node.with_changes(body=[replacement])
            if self.pinned and _registers_buffer(statement.value) and not _placed(statement.value.args[1].value):
                # A buffer that is not a table (`angles`, a per-axis base) but is computed on the CPU with them: the
                # original put it on the default device, and so must the fix.
                kept = _on_default_device(statement.value, 1)
                return updated_node.with_changes(body=[statement.with_changes(value=kept)])
        if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
            target = statement.targets[0].target
            if matches(target, like.Attribute(value=like.Name("self"))) and is_table_name(target.attr.value):
                name = target.attr.value
                data, persistent = _buffer(statement.value)
                if data is not None and name in self.copied:
                    return updated_node  # the class reads the float32 copy already
                if data is not None and (persistent or name in self.kept) and not name.endswith(FP32_COPY_SUFFIX):
                    # `self.x = nn.Buffer(v)`: the state_dict key stays, and a float32 copy goes beside it.
                    copy = cst.Assign([cst.AssignTarget(_self_attribute(name + FP32_COPY_SUFFIX))], _assigned(data))
                    if self.pinned:
                        assert isinstance(statement.value, cst.Call)
                        kept = _on_default_device(statement.value, 0)
                        updated_node = updated_node.with_changes(body=[statement.with_changes(value=kept)])
                    return cst.FlattenSentinel([updated_node, _line_after(updated_node, copy)])
                value = _unwrap_buffer(statement.value) or statement.value
                return updated_node.with_changes(body=[statement.with_changes(value=_assigned(value))])
        return updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        # setattr(self, f"{prefix}inv_freq", nn.Buffer(v, persistent=False)) -> setattr(self, ..., v)
        if matches(updated_node.func, like.Name("setattr")) and len(updated_node.args) == 3:
            name = _string_value(updated_node.args[1].value)
            unwrapped = _unwrap_buffer(updated_node.args[2].value)
            if name and is_table_name(name) and unwrapped is not None:
                args = list(updated_node.args)
                args[2] = args[2].with_changes(value=unwrapped)
                return updated_node.with_changes(args=args)
        return updated_node

    def _register_buffer(self, call: cst.Call) -> cst.BaseSmallStatement | list[cst.BaseSmallStatement] | None:
        if not _registers_buffer(call):
            return None
        assert isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)
        owner = call.func.value.value  # `self`, or the module a function outside the class takes
        name = _string_value(call.args[0].value)
        if not name or not is_table_name(name) or name.endswith(FP32_COPY_SUFFIX) or name in self.copied:
            return None
        value = call.args[1].value
        literal = isinstance(call.args[0].value, cst.SimpleString)
        if _is_persistent_registration(call) or (literal and name in self.kept):
            if not literal or owner != "self":
                return None  # no class would read a copy put on the module that a function takes
            # Checkpoints carry this key (or the copy's source keeps it): keep the buffer, and compute from a float32
            # copy beside it.
            copy = _self_attribute(name + FP32_COPY_SUFFIX, owner)
            return [cst.Assign([cst.AssignTarget(copy)], _assigned(value))]
        if literal:
            return cst.Assign([cst.AssignTarget(_self_attribute(name, owner))], _assigned(value))
        return cst.Expr(
            cst.Call(
                func=cst.Name("setattr"),
                args=[
                    cst.Arg(cst.Name(owner), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                    call.args[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                    cst.Arg(value),
                ],
            )
        )


def _holds_tensor(call: cst.Call) -> bool:
    """`nn.Parameter(data, ...)` or `nn.Buffer(data, ...)`, under any module prefix, with its data as the first
    positional argument."""
    holders = like.Name("Parameter") | like.Name("Buffer")
    named = matches(call.func, holders | like.Attribute(attr=holders))
    return named and bool(call.args) and call.args[0].keyword is None and call.args[0].star == ""


def _registers_buffer(call: cst.Call) -> bool:
    """`self.register_buffer(name, value, ...)`, or `module.register_buffer(...)` of a function outside the class."""
    return (
        isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "register_buffer"
        and isinstance(call.func.value, cst.Name)
        and len(call.args) >= 2
    )


def _placed(value: cst.BaseExpression) -> bool:
    """Whether `value` is placed on the default device already (`t.to(torch.empty(0).device)`), or is None."""
    return matches(value, like.Name("None")) or (isinstance(value, cst.Call) and _is_default_device_move(value))


def _is_default_device_move(call: cst.Call) -> bool:
    """`t.to(torch.empty(0).device)`: where step 1 places a kept buffer, not a move before the math."""
    return len(call.args) == 1 and _code(call.args[0].value) in DEFAULT_DEVICE_SPELLINGS


def _places(line: cst.SimpleStatementLine) -> bool:
    """Whether the line makes what the codemod places on the default device: a parameter or a kept buffer."""
    return any(_holds_tensor(call) or _is_default_device_move(call) for call in findall(line, like.Call()))


def _on_default_device(call: cst.Call, position: int) -> cst.Call:
    """The buffer registration `call` with its positional argument `position` (the data) placed on the default
    device: the table is computed on the CPU, and a buffer left there would stay on the CPU in a model built under
    `with torch.device("meta")` or `torch.set_default_device(...)`, which never moves it."""
    args = list(call.args)
    data = args[position]
    args[position] = data.with_changes(
        value=cst.Call(
            func=cst.Attribute(value=as_operand(data.value), attr=cst.Name("to")),  # `(1.0 / f).to(...)`
            args=[cst.Arg(cst.parse_expression(DEFAULT_DEVICE))],
        )
    )
    return call.with_changes(args=args)


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
    if not (isinstance(value, cst.Call) and matches(value.func, _BUFFER)):
        return None, False
    positional = [arg for arg in value.args if arg.keyword is None]
    if not positional:
        return None, False
    persistent = _keyword(value, "persistent")
    return positional[0].value, persistent is None or not _is_false(persistent.value)


# Modules whose functions compute on the devices of their arguments, or not on tensors at all.
_DEVICE_FOLLOWING_MODULES = frozenset({"torch", "math", "self"})
# The methods of `nn.Module` that keep a tensor on the module: they allocate nothing.
_REGISTRATIONS = frozenset({"register_buffer", "register_parameter"})


# Step 5's run-time reads go through this function, defined once in each file that reads through it
# (`with_table_on_device`); its lines fit 88 characters, ruff's default, since it is inserted unformatted. It works
# on a table kept as a buffer too (a class the codemod left alone, or a file fixed before another): a buffer on the
# input's device is its own copy there.
_TABLE_ON_DEVICE_DEFINITION = f'''def {TABLE_ON_DEVICE}(module, name, device):
    """The float32 RoPE table `module.<name>` as a copy on `device`.

    The table stays on the CPU, where `module.to(dtype)` cannot round it. Its copy is
    made on the first call on a device and kept until the table is replaced, so that a
    forward copies nothing between devices and CUDA graphs replay one address. The
    copies are read as an attribute, on which torch.compile guards: a graph traced
    before the first copy is traced again, not left copying in every call.
    """
    copies = getattr(module, "_rope_tables_on_device", None)
    if copies is None:
        copies = module._rope_tables_on_device = {{}}
    table = getattr(module, name)
    if (name, device) not in copies or copies[name, device][0] is not table:
        copies[name, device] = (table, table.to(device))
    return copies[name, device][1]
'''


def with_table_on_device(text: str) -> tuple[str, int, int]:
    """`text` with the definition of `TABLE_ON_DEVICE` above the first top-level statement that calls it (above
    its decorators and the comments right above it, such as `# Copied from`), unless the file defines it or does
    not call it; with the 0-based line it starts at and the number of lines added (0 when none). Only the top-level
    statements that spell its name are parsed (`candidates.parse`): the others can neither define nor call it."""
    body = candidates.parse(text, candidates.Occurrences.of_text(text), (TABLE_ON_DEVICE,), None, "<fixed>").body
    if any(isinstance(node, ast.FunctionDef) and node.name == TABLE_ON_DEVICE for node in body):
        return text, 0, 0
    user = next((node for node in body if _calls_table_on_device(node)), None)
    if user is None:
        return text, 0, 0
    lines = text.splitlines(keepends=True)
    at = candidates.first_line(user) - 1
    while at > 0 and lines[at - 1].lstrip().startswith("#"):
        at -= 1
    newline = "\r\n" if lines[0].endswith("\r\n") else "\n"
    apart = "\n\n" if at > 0 and lines[at - 1].strip() else ""  # two blank lines from the code above, as from below
    added = (apart + _TABLE_ON_DEVICE_DEFINITION + "\n\n").replace("\n", newline)
    return "".join([*lines[:at], added, *lines[at:]]), at, added.count(newline)


def _calls_table_on_device(node: ast.AST) -> bool:
    return any(
        isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == TABLE_ON_DEVICE
        for call in ast.walk(node)
    )


def _table_on_device(owner: cst.BaseExpression, name: cst.BaseExpression, device: str) -> cst.Call:
    """`_rope_table_on_device(owner, name, device)`: the table's copy on `device`."""
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return cst.Call(
        func=cst.Name(TABLE_ON_DEVICE),
        args=[cst.Arg(owner, comma=comma), cst.Arg(name, comma=comma), cst.Arg(cst.parse_expression(device))],
    )


def _made_where_moved(call: cst.Call, device: str) -> cst.Call:
    """`torch.arange(n).to(device=<device>, ...)` -> `torch.arange(n, device=<device>).to(...)`: a tensor made on the
    default device only to be moved to the input's, in every forward, is made there."""
    func = call.func
    if not (
        isinstance(func, cst.Attribute)
        and func.attr.value == "to"
        and isinstance(func.value, cst.Call)
        and _is_factory(func.value.func)
        and _keyword(func.value, "device") is None
        and any(_code(arg.value) == device for arg in call.args if arg.keyword is None or arg.keyword.value == "device")
    ):
        return call
    made = with_keyword(func.value, "device", device)
    moved = _without_device_move(call)
    if isinstance(moved, cst.Call):
        return moved.with_changes(func=func.with_changes(value=made))
    return made


def _without_repeated_move(call: cst.Call) -> cst.BaseExpression:
    """`_rope_table_on_device(m, name, d).to(d, ...)` -> `_rope_table_on_device(m, name, d).to(...)`: the copy is on
    `d` already. A move to another device stays."""
    if not matches(call.func, like.Attribute(value=like.Call(func=like.Name(TABLE_ON_DEVICE)), attr=like.Name("to"))):
        return call
    assert isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Call)
    there = _code(call.func.value.args[2].value)
    moves = [arg for arg in call.args if arg.keyword is None or arg.keyword.value == "device"]
    return _without_device_move(call) if any(_code(arg.value) == there for arg in moves) else call


def _reads_table_by_name(call: cst.Call, owner: str = "self") -> bool:
    """`getattr(<owner>, "<table>")`, the name a literal or an f-string ending in the table's name."""
    if not (matches(call.func, like.Name("getattr")) and len(call.args) == 2):
        return False
    name = _string_value(call.args[1].value)
    return matches(call.args[0].value, like.Name(owner)) and name is not None and is_table_name(name)


class _TableReads(Transformer):
    """The base of the transformers that rewrite reads of tables (step 5): which `owner.<table>` expressions read no
    table's data.

    - **Stored:** a target of an assignment, each element of a tuple or list that it unpacks into among them (`self.cos,
      self.sin = ...`), of an annotated assignment, or of a `del`. A call cannot stand there, and a store replaces the
      table, whose copy on a device is then made afresh. An augmented assignment (`self.inv_freq *= s`) is not one:
      it changes the table in place, under a copy that would not follow, so the rewrite of its read fails the fix,
      which leaves the file as it was.
    - **Described:** a table whose `.dtype`, `.shape` or `.device` alone is read, the same on every device.
    """

    def __init__(self) -> None:
        super().__init__()
        self.stored: set[cst.CSTNode] = set()
        self.described: set[cst.CSTNode] = set()

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        self._store(node.target)
        return True

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        self._store(node.target)
        return True

    def visit_Del(self, node: cst.Del) -> bool:
        self._store(node.target)
        return True

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if node.attr.value in TABLE_DESCRIPTIONS or node.attr.value == "device":
            self.described.add(node.value)
        return True

    def _not_read(self, node: cst.CSTNode) -> bool:
        return node in self.stored or node in self.described

    def _store(self, target: cst.BaseExpression) -> None:
        self.stored.add(target)
        if isinstance(target, cst.Tuple | cst.List):
            for element in target.elements:  # a starred element's value too: `self.cos, *rest = ...`
                self._store(element.value)


class _TablesOfModuleFunctions(_TableReads):
    """Step 5 in the functions of the module that read a module's tables from outside its class, such as the
    dynamic and longrope updates that a decorator on forward runs (`update(module, position_ids, device)`): a
    table read off the first parameter is its copy on the function's device (`rotary.device_source`), so that an
    update that writes into it in place (`.copy_()`) writes into the copy that forward reads, at the address that
    CUDA graphs replay."""

    def __init__(self) -> None:
        super().__init__()
        self.functions: list[tuple[str, str | None]] = []  # per function being visited: its first parameter, device

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False  # a class's methods are the rotary rewrite's

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        parameters = node.params.params
        parsed = ast.parse(textwrap.dedent(_code(node))).body[0]
        assert isinstance(parsed, ast.FunctionDef)
        self.functions.append((parameters[0].name.value if parameters else "", rotary.device_source(parsed)))
        return True

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        self.functions.pop()
        return updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if self.functions and self.functions[-1][1] and _reads_table_by_name(updated_node, self.functions[-1][0]):
            owner, device = self.functions[-1]
            return _table_on_device(cst.Name(owner), updated_node.args[1].value, device)  # type: ignore[arg-type]
        return _without_repeated_move(updated_node)

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        if not (self.functions and self.functions[-1][1]) or self._not_read(original_node):
            return updated_node
        owner, device = self.functions[-1]
        if matches(updated_node.value, like.Name(owner)) and is_table_name(updated_node.attr.value):
            return _table_on_device(updated_node.value, cst.SimpleString(f'"{updated_node.attr.value}"'), device)
        return updated_node


class _RotaryClassRewrite(_TableReads):
    """Steps 3 to 5, inside rotary classes."""

    def __init__(
        self,
        rotary: set[str],
        inherited: dict[str, tuple[frozenset[str], frozenset[str]]],
        construction: dict[str, set[str]],
    ) -> None:
        super().__init__()
        self.rotary = rotary
        self.inherited = inherited  # per class: the tables its parent models' classes store, and those kept persistent
        self.constructions = construction  # per class: the methods that run at construction
        self.class_stack: list[str] = []
        self.construction: set[str] = set()  # of the class being visited
        self.tables: set[str] = set()  # tables the construction stores: plain CPU attributes from now on
        self.persistent: set[str] = set()  # tables kept as buffers, read through their float32 copy
        self.devices: dict[str, str | None] = {}  # per method: where its table reads move to (`rotary.device_source`)
        self.method: str | None = None
        self.device: str | None = None  # the runtime method's device to move tables to, as an expression
        self.bound: set[str] = set()  # the construction method's parameters and the names it assigns
        self.feeding: set[str] = set()  # the names that the construction method's table stores read
        self.on_cpu = 0  # the depth of `with torch.device("cpu"):` blocks being visited
        self.line_on_cpu = False  # whether the statement being visited goes under `with torch.device("cpu")`
        self.unpinned = False  # whether the statement being visited computes where the original did

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.class_stack.append(node.name.value)
        if node.name.value not in self.rotary:
            # Rebuilding every node of the module's other classes costs more than the rewrite: they are left
            # unvisited, and so are their nested classes (the rotary classes are the module's own).
            return False
        self.construction = self.constructions[node.name.value]
        tables, persistent = self.inherited.get(node.name.value, (frozenset(), frozenset()))
        self.tables = _construction_tables(node, self.construction) | tables
        copied = {name.removesuffix(FP32_COPY_SUFFIX) for name in self.tables if name.endswith(FP32_COPY_SUFFIX)}
        self.persistent = copied | persistent
        parsed = next(cls for cls in ast.parse(textwrap.dedent(_code(node))).body if isinstance(cls, ast.ClassDef))
        self.devices = {method.name: rotary.device_source(method) for method in rotary.methods(parsed)}
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

    @property
    def constructing(self) -> bool:
        return self.in_rotary and self.method in self.construction

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        if self.in_rotary and self.method is None:
            self.method = node.name.value
            self.device = self.devices.get(self.method) if self.at_runtime else None
            if self.constructing:
                self.bound = _bound_names(node)
                self.feeding = _names_read_by_table_stores(node)
        return True

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        if self.in_rotary and self.method == original_node.name.value:
            self.method = None
        return updated_node

    def visit_With(self, node: cst.With) -> bool:
        self.on_cpu += _on_cpu(node)
        return True

    def leave_With(self, original_node: cst.With, updated_node: cst.With) -> cst.With:
        self.on_cpu -= _on_cpu(original_node)
        return updated_node

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        # Step 3 for a statement of construction that calls a function from outside the class (a helper,
        # `ROPE_INIT_FUNCTIONS[...]`), decided once for the line: where it feeds a table, it runs under
        # `with torch.device("cpu")`, so that a plain attribute that a model built on `meta` holds there does not stay
        # there through `to_empty()` (a second run finds it under the block already); where it feeds none, or places
        # a parameter or a kept buffer on the default device (which the block would make the CPU), it computes where
        # the original did: its factories, pinned to the CPU, would meet that function's tensors on the default device.
        outside = self.constructing and self.on_cpu == 0 and self._calls_outside(node)
        self.line_on_cpu = outside and self._feeds_table(node) and not _places(node)
        self.unpinned = outside and not self.line_on_cpu
        return True

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.BaseStatement:
        on_cpu, self.line_on_cpu, self.unpinned = self.line_on_cpu, False, False
        if on_cpu:
            line = updated_node.with_changes(leading_lines=())
            return cst.With(
                items=[cst.WithItem(cst.parse_expression('torch.device("cpu")'))],
                body=cst.IndentedBlock([line]),
                leading_lines=updated_node.leading_lines,
            )
        return updated_node

    def _feeds_table(self, line: cst.SimpleStatementLine) -> bool:
        for statement in line.body:
            targets = (
                [target.target for target in statement.targets]
                if isinstance(statement, cst.Assign)
                else [statement.target]
                if isinstance(statement, cst.AnnAssign) and statement.value is not None
                else []
            )
            for target in targets:
                for name in findall(target, like.Name() | like.Attribute(value=like.Name("self"))):
                    if isinstance(name, cst.Name) and name.value in self.feeding:
                        return True
                    if isinstance(name, cst.Attribute) and is_table_name(name.attr.value):
                        return True
        return False

    def _calls_outside(self, line: cst.SimpleStatementLine) -> bool:
        """Whether the line calls a function that may allocate on the default device: one of another module or
        the file's, or a function held in a variable; not torch's (pinned here), a tensor's method or a builtin."""
        for call in findall(line, like.Call()):
            assert isinstance(call, cst.Call)
            func = call.func
            if _holds_tensor(call):
                continue  # `nn.Parameter(t)` and `nn.Buffer(t)` wrap a tensor, and allocate nothing
            if isinstance(func, cst.Name):
                if not hasattr(builtins, func.value) or func.value in self.bound:
                    return True
            elif isinstance(func, cst.Subscript):
                return True
            elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
                owner = func.value.value
                if owner == "self" and func.attr.value not in (*self.construction, *_REGISTRATIONS):
                    return True  # a function held in an attribute: `self.rope_init_fn(config)`
                if owner not in _DEVICE_FOLLOWING_MODULES and owner not in self.bound:
                    return True
        return False

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not self.in_rotary or self.method is None:
            return updated_node
        func = updated_node.func
        # `getattr(self, "inv_freq")` reads as `self.inv_freq` does: a persistent table through its float32 copy, and
        # at run time the copy on the input's device.
        if self.method != "__init__" and _reads_table_by_name(updated_node):
            name = updated_node.args[1].value
            if _string_value(name) in self.persistent:
                name = cst.SimpleString(f'"{_string_value(name)}{FP32_COPY_SUFFIX}"')
            if self.at_runtime and self.device:
                return _table_on_device(cst.Name("self"), name, self.device)
            return updated_node.with_changes(args=[updated_node.args[0], updated_node.args[1].with_changes(value=name)])
        # Step 4: positions take float32, never the dtype of a table; `type_as` moved them to the table's device too.
        is_type_as = matches(func, like.Attribute(attr=like.Name("type_as"))) and updated_node.args
        if is_type_as and _reads_table(original_node.args[0].value):  # as written: a read may be a copy's now
            assert isinstance(func, cst.Attribute)
            if self.at_runtime and self.device:
                moved = cst.parse_expression(f"_.to(device={self.device}, dtype=torch.float32)")
                assert isinstance(moved, cst.Call)
                return _made_where_moved(
                    moved.with_changes(func=cst.Attribute(value=func.value, attr=cst.Name("to"))), self.device
                )
            return cst.Call(func=func.with_changes(attr=cst.Name("float")))
        if self.constructing:
            # Step 3: tensors are created on the CPU, and nothing moves before the math.
            # A tensor made only for its device (`DEFAULT_DEVICE`) tells where the default device is: not pinned.
            if _is_factory(func) and original_node not in self.described and not self.unpinned:
                return with_keyword(updated_node, "device", '"cpu"')
            if _holds_tensor(updated_node) and not _placed(updated_node.args[0].value):
                # A parameter, or a buffer that step 1 kept (no table it makes a plain attribute): the original made it
                # on the default device, where a model built under `torch.set_default_device(...)` keeps it, and
                # never moves it.
                return _on_default_device(updated_node, 0)
            moves_enumeration = matches(func, like.Attribute(attr=like.Name("to"))) and _contains_factory(func.value)
            if moves_enumeration and not _is_default_device_move(updated_node) and not self.unpinned:
                return _without_device_move(updated_node)
        if self.at_runtime and self.device:
            updated_node = _made_where_moved(updated_node, self.device)
        return _without_repeated_move(updated_node)

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        if not (self.in_rotary and self.method not in (None, "__init__")):
            return updated_node
        if self.at_runtime and self.device and updated_node.attr.value == "device" and _is_table(original_node.value):
            return cst.parse_expression(self.device)  # the device the table lived on: the one it moves to
        if not matches(updated_node.value, like.Name("self")) or original_node in self.stored:
            return updated_node
        name = updated_node.attr.value
        if name in self.persistent:  # a persistent table is read through its float32 copy
            name += FP32_COPY_SUFFIX
            updated_node = updated_node.with_changes(attr=cst.Name(name))
        if self.at_runtime and self.device and name in self.tables and original_node not in self.described:
            # Step 5: the table's copy on the input's device, made once (`TABLE_ON_DEVICE`).
            return _table_on_device(updated_node.value, cst.SimpleString(f'"{name}"'), self.device)
        return updated_node


def _on_cpu(block: cst.With) -> bool:
    """`with torch.device("cpu"):`."""
    return any(_code(item.item) in ('torch.device("cpu")', "torch.device('cpu')") for item in block.items)


def _is_factory(func: cst.BaseExpression) -> bool:
    return matches(
        func, like.Attribute(value=like.Name("torch"), attr=like.Name(value=Satisfies(TENSOR_FACTORIES.__contains__)))
    )


def _contains_factory(node: cst.BaseExpression) -> bool:
    return any(isinstance(call, cst.Call) and _is_factory(call.func) for call in findall(node, like.Call()))


def _is_table(node: cst.BaseExpression) -> bool:
    """`self.<table>`."""
    return matches(node, like.Attribute(value=like.Name("self"), attr=like.Name(value=Satisfies(is_table_name))))


def _bound_names(method: cst.FunctionDef) -> set[str]:
    """The method's parameters and the plain names it assigns: its locals."""
    names = {param.name.value for param in (*method.params.params, *method.params.kwonly_params)}
    for target in findall(method, like.AssignTarget() | like.AnnAssign() | like.For() | like.AsName()):
        node = target.name if isinstance(target, cst.AsName) else target.target  # type: ignore[union-attr]
        names.update(name.value for name in findall(node, like.Name()) if isinstance(name, cst.Name))
        if isinstance(node, cst.Name):
            names.add(node.value)
    return names


def _names_read_by_table_stores(method: cst.FunctionDef) -> set[str]:
    """The plain names in the values that the method stores as tables (after step 1: `self.<table> = value`, a
    kept `register_buffer(...)` or `nn.Buffer(...)`, `setattr(self, name, value)`)."""
    values: list[cst.CSTNode] = []
    for assign in findall(method, _STORE_ON_SELF):
        assert isinstance(assign, cst.Assign) and isinstance(assign.targets[0].target, cst.Attribute)
        if is_table_name(assign.targets[0].target.attr.value):
            values.append(assign.value)
    stores = like.Call(func=like.Name("setattr") | like.Attribute(attr=like.Name("register_buffer")))
    for call in findall(method, stores):
        assert isinstance(call, cst.Call)
        values.extend(arg.value for arg in call.args[1:])
    return {name.value for value in values for name in findall(value, like.Name()) if isinstance(name, cst.Name)}


def _construction_tables(cls: cst.ClassDef, construction: set[str]) -> set[str]:
    """Tables that construction stores as tensors (not `None`): after step 1, plain attributes on the CPU."""
    tables = set()
    for method in cls.body.body:
        if isinstance(method, cst.FunctionDef) and method.name.value in construction:
            for assign in findall(method, _STORE_ON_SELF):
                assert isinstance(assign, cst.Assign)
                target = assign.targets[0].target
                assert isinstance(target, cst.Attribute)
                if is_table_name(target.attr.value) and not matches(assign.value, like.Name("None")):
                    tables.add(target.attr.value)
    return tables


@functools.lru_cache(maxsize=64)
def _inherited_tables(codes: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str]]:
    """The tables that the construction of the classes `codes` stores, and those they keep as persistent buffers (read
    through their float32 copy once rewritten): what a class that inherits from them reads. Kept: 281 lookups of 55
    in transformers 5.24.0's fix."""
    tables: set[str] = set()
    persistent: set[str] = set()
    for code in codes:
        module = _parsed_class(code)
        if module is None:
            continue
        for cls in module.body:
            if isinstance(cls, cst.ClassDef):
                tables |= _construction_tables(cls, _construction_methods(cls))
        persistent |= _persistent_buffers(code)
    return frozenset(tables | {name + FP32_COPY_SUFFIX for name in persistent}), frozenset(persistent)


def _construction_methods(cls: cst.ClassDef) -> set[str]:
    references = {
        method.name.value: {
            attribute.attr.value
            for attribute in findall(method, like.Attribute(value=like.Name("self"), attr=like.Name()))
            if isinstance(attribute, cst.Attribute)
        }
        for method in cls.body.body
        if isinstance(method, cst.FunctionDef)
    }
    return reachable_from_init(references)


def _reads_table(node: cst.BaseExpression) -> bool:
    return bool(findall(node, like.Attribute(value=like.Name("self"), attr=like.Name(value=Satisfies(is_table_name)))))


def _assigned(value: cst.BaseExpression) -> cst.BaseExpression:
    """A table's value as its float32 attribute's assignment holds it, taken out of `register_buffer(...)` or
    `nn.Buffer(...)`: without its final cast, in parentheses where it needs them there (`as_assigned_value`)."""
    return as_assigned_value(_without_final_cast(value))


def _without_final_cast(value: cst.BaseExpression) -> cst.BaseExpression:
    """`e.to(dtype)`, `e.half()`, `e.type_as(x)` -> `e`; under a call that only lays it out, that call stays:
    `e.to(dtype).contiguous()` -> `e.contiguous()`. A move (`.to(device)`) stays."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
        return value
    if value.func.attr.value in LAYOUT_METHODS and not value.args:
        inner = _without_final_cast(value.func.value)
        return value.with_changes(func=value.func.with_changes(value=inner))
    method = value.func.attr.value
    if method in LOW_PRECISION_CAST_METHODS:
        return value.func.value
    if method == "to":
        dtype = _keyword(value, "dtype")
        positional = [arg for arg in value.args if arg.keyword is None]
        if dtype is None and len(positional) == 1 and "dtype" in _code(positional[0].value):
            return value.func.value
        if dtype is not None and not positional and len(value.args) == 1:
            return value.func.value
    return value


def _without_device_move(call: cst.Call) -> cst.BaseExpression:
    """`e.to(device)` -> `e`; `e.to(device=d, dtype=t)` -> `e.to(dtype=t)`."""
    assert isinstance(call.func, cst.Attribute)
    kept = [
        arg
        for arg in call.args
        if not (arg.keyword is not None and arg.keyword.value == "device")
        and not (arg.keyword is None and "device" in _code(arg.value))
    ]
    if not kept:
        return call.func.value
    if len(kept) == len(call.args):
        return call
    kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=kept)
