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
3. In `__init__` and the methods it reaches (the cache builders), the tables are computed on the CPU, once:
   every tensor factory (`torch.arange`, `linspace`, `ones`, ...) gets `device="cpu"`, `.to(device)` moves of an
   enumeration go, and a statement that computes a table through a function from outside the class (a helper, a
   registry's entry) runs under `with torch.device("cpu")`, so that a model built on `meta` holds real tables
   through `to_empty()`. An enumeration keeps its dtype: turning it into int64 is RPL101's fix, made only where
   its bounds are proven integral.
4. Positions never take a table's dtype: `.type_as(self.inv_freq)` becomes `.float()` in construction, and
   `.to(device=<device>, dtype=torch.float32)` at run time (`type_as` moved them to the table's device too).
5. In the other methods, a table read that no `.to(device=...)` moves is moved to the device of a tensor the
   method takes (`self.cos_cached[:n].to(dtype=x.dtype)` -> `.to(device=x.device, dtype=x.dtype)`), since a
   plain attribute does not follow `module.to(device)`; `self.inv_freq.device` becomes that device, and a read
   of a table's dtype or shape stays. The device comes only from a parameter that is a tensor on every path, or
   from a `torch.device` parameter (`rotary.device_source`), never from a sequence length, a shape or the
   function an `_apply` override takes. A method without one moves nothing; a class with such a method that
   returns what it read (`rotary.movable_rotary_classes`) would hand CPU tables to a model on an accelerator,
   so the codemod leaves it, and its rotary bases and subclasses in the file, as they are.

Run it through rope-lint (`rope-lint fix --unsafe-fixes`, on files with RPL2xx findings) or LibCST:
`python -m libcst.tool codemod --no-format -x rope_lint.codemods.rope_tables.RopeTablesCommand PATH` (see the
README).
"""

from __future__ import annotations

import ast
import builtins
import textwrap
from collections.abc import Iterator
from pathlib import Path

import libcst as cst
import libcst.matchers as m
from libcst.codemod import VisitorBasedCodemodCommand

from rope_lint.rules.analysis import rotary
from rope_lint.rules.analysis.rotary import LOW_PRECISION_CAST_METHODS, is_table_name, reachable_from_init
from rope_lint.rules.edits import EQUAL, with_keyword
from rope_lint.transformers import generated
from rope_lint.transformers.copies import source_chain

_FP32_SUFFIX = "_fp32"


class RopeTablesCommand(VisitorBasedCodemodCommand):
    DESCRIPTION = "RoPE tables in float32 on the CPU, kept out of module.to(), cast late in forward."

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        rotary = rotary_class_names(tree)
        movable = movable_class_names(tree, rotary)
        copied, inherited = self._sources(movable)
        kept = {
            name: tables
            for name in movable
            if (tables := {t for code in [*copied[name], *inherited[name]] for t in _persistent_buffers(code)})
        }
        tree = tree.visit(_TableStores(kept, rotary - movable, movable))
        return tree.visit(_RotaryClassRewrite(movable, {name: _inherited_tables(inherited[name]) for name in movable}))

    def _sources(self, classes: set[str]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        """For each of `classes`: the code of its `# Copied from` sources, and of the parent models' classes that
        regenerating it from a modular source merges into it (`transformers.generated.inherited_classes`). Its
        rewrite goes their way: it keeps the tables they keep as persistent buffers, and reads the tables they store.

        The module may be a run of the file's statements without the comments above them (rope-lint edits only the
        statements with findings), so the copy comments and imports are read from the file itself.
        """
        copied: dict[str, list[str]] = {name: [] for name in classes}
        inherited: dict[str, list[str]] = {name: [] for name in classes}
        if not self.context.filename:
            return copied, inherited
        path = Path(self.context.filename)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return copied, inherited
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


def movable_class_names(module: cst.Module, names: set[str]) -> set[str]:
    """The classes of `names` (rotary classes) whose tables the codemod can move to where they are used
    (`rotary.movable_rotary_classes`, on the classes' `ast`)."""
    classes = [
        parsed
        for cls in module.body
        if isinstance(cls, cst.ClassDef) and cls.name.value in names
        for parsed in ast.parse(_code(cls)).body
        if isinstance(parsed, ast.ClassDef)
    ]
    return rotary.movable_rotary_classes(classes)


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


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
            target.target.attr.value.removesuffix(_FP32_SUFFIX)
            for target in m.findall(node, m.AssignTarget(m.Attribute(value=m.Name("self"))))
            if isinstance(target, cst.AssignTarget)
            and isinstance(target.target, cst.Attribute)
            and target.target.attr.value.endswith(_FP32_SUFFIX)
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
                    if self.pinned:
                        assert isinstance(statement.value, cst.Call)
                        kept = _on_default_device(statement.value, 0)
                        updated_node = updated_node.with_changes(body=[statement.with_changes(value=kept)])
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
        if not _registers_buffer(call):
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


def _registers_buffer(call: cst.Call) -> bool:
    """`self.register_buffer(name, value, ...)`."""
    return (
        isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "register_buffer"
        and m.matches(call.func.value, m.Name("self"))
        and len(call.args) >= 2
    )


def _placed(value: cst.BaseExpression) -> bool:
    """Whether `value` is placed on the default device already (`t.to(torch.get_default_device())`), or is None."""
    return m.matches(value, m.Name("None")) or (isinstance(value, cst.Call) and _is_default_device_move(value))


_DEFAULT_DEVICE = "torch.get_default_device()"


def _is_default_device_move(call: cst.Call) -> bool:
    """`t.to(torch.get_default_device())`: where step 1 places a kept buffer, not a move before the math."""
    return len(call.args) == 1 and _code(call.args[0].value) == _DEFAULT_DEVICE


def _on_default_device(call: cst.Call, position: int) -> cst.Call:
    """The buffer registration `call` with its positional argument `position` (the data) placed on the default
    device: the table is computed on the CPU, and a buffer left there would stay on the CPU in a model built under
    `with torch.device("meta")` or `torch.set_default_device(...)`, which never moves it."""
    args = list(call.args)
    data = args[position]
    value = data.value
    if not isinstance(value, cst.Name | cst.Attribute | cst.Call | cst.Subscript) and not value.lpar:
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])  # `(1.0 / f).to(...)`
    args[position] = data.with_changes(
        value=cst.Call(
            func=cst.Attribute(value=value, attr=cst.Name("to")),
            args=[cst.Arg(cst.parse_expression(_DEFAULT_DEVICE))],
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
    if not (
        isinstance(value, cst.Call) and m.matches(value.func, m.Name("Buffer") | m.Attribute(attr=m.Name("Buffer")))
    ):
        return None, False
    positional = [arg for arg in value.args if arg.keyword is None]
    if not positional:
        return None, False
    persistent = _keyword(value, "persistent")
    return positional[0].value, persistent is None or not _is_false(persistent.value)


# Tensor factories, which allocate on the default device unless told otherwise: construction pins them to the CPU.
_FACTORIES = frozenset({"arange", "linspace", "logspace", "ones", "zeros", "full", "empty", "tensor", "eye"})
# What a table read tells without its data, so that it needs no move.
_DESCRIPTIONS = frozenset({"dtype", "shape", "ndim", "size", "dim", "numel"})
# Modules whose functions compute on the devices of their arguments, or not on tensors at all.
_DEVICE_FOLLOWING_MODULES = frozenset({"torch", "math", "self"})


class _RotaryClassRewrite(cst.CSTTransformer):
    """Steps 3 to 5, inside rotary classes."""

    def __init__(self, rotary: set[str], inherited: dict[str, tuple[set[str], set[str]]]) -> None:
        super().__init__()
        self.rotary = rotary
        self.inherited = inherited  # per class: the tables its parent models' classes store, and those kept persistent
        self.class_stack: list[str] = []
        self.construction: set[str] = set()  # __init__ and the methods it reaches
        self.tables: set[str] = set()  # tables the construction stores: plain CPU attributes from now on
        self.persistent: set[str] = set()  # tables kept as buffers, read through their float32 copy
        self.devices: dict[str, str | None] = {}  # per method: where its table reads move to (`rotary.device_source`)
        self.method: str | None = None
        self.device: str | None = None  # the runtime method's device to move tables to, as an expression
        self.bound: set[str] = set()  # the construction method's parameters and the names it assigns
        self.feeding: set[str] = set()  # the names that the construction method's table stores read
        self.moved: set[cst.CSTNode] = set()  # table reads that need no move: moved by a `.to(...)` or by their return
        self.stored: set[cst.CSTNode] = set()  # assignment targets, which are not reads

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.class_stack.append(node.name.value)
        if node.name.value in self.rotary:
            self.construction = _construction_methods(node)
            tables, persistent = self.inherited.get(node.name.value, (set(), set()))
            self.tables = _construction_tables(node, self.construction) | tables
            self.persistent = persistent | {
                name.removesuffix(_FP32_SUFFIX) for name in self.tables if name.endswith(_FP32_SUFFIX)
            }
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

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        self.stored.add(node.target)
        return True

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        # `self.inv_freq.dtype`, `self.cos_cached.shape[0]`: the table's description, the same on every device.
        if node.attr.value in _DESCRIPTIONS or node.attr.value == "device":
            self.moved.add(node.value)
        return True

    def visit_Call(self, node: cst.Call) -> bool:
        if m.matches(node.func, m.Attribute(attr=m.Name("to"))):
            assert isinstance(node.func, cst.Attribute)
            root = _receiver_root(node.func.value)
            if root is not None:
                self.moved.add(root)
        return True

    def visit_Return(self, node: cst.Return) -> bool:
        elements = node.value.elements if isinstance(node.value, cst.Tuple) else [node.value] if node.value else []
        for element in elements:
            value = element.value if isinstance(element, cst.Element) else element
            root = _receiver_root(value)
            if _is_bare_table_read(value) and root is not None:
                self.moved.add(root)
        return True

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.BaseStatement:
        # Step 3: a table computed by a function from outside the class (a helper, `ROPE_INIT_FUNCTIONS[...]`)
        # computes on the CPU too, whatever the default device: a plain attribute that a model built on `meta`
        # holds there would stay there through `to_empty()`.
        if self.constructing and self._feeds_table(updated_node) and self._calls_outside(updated_node):
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
                for name in m.findall(target, m.Name() | m.Attribute(value=m.Name("self"))):
                    if isinstance(name, cst.Name) and name.value in self.feeding:
                        return True
                    if isinstance(name, cst.Attribute) and is_table_name(name.attr.value):
                        return True
        return False

    def _calls_outside(self, line: cst.SimpleStatementLine) -> bool:
        """Whether the line calls a function that may allocate on the default device: one of another module or
        the file's, or a function held in a variable; not torch's (pinned here), a tensor's method or a builtin."""
        for call in m.findall(line, m.Call()):
            assert isinstance(call, cst.Call)
            func = call.func
            if m.matches(func, m.Name("Buffer") | m.Attribute(attr=m.Name("Buffer"))):
                continue  # `nn.Buffer(t)` wraps a tensor, and places the kept buffer on the default device
            if isinstance(func, cst.Name):
                if not hasattr(builtins, func.value) or func.value in self.bound:
                    return True
            elif isinstance(func, cst.Subscript):
                return True
            elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
                owner = func.value.value
                if owner == "self" and func.attr.value not in self.construction:
                    return True  # a function held in an attribute: `self.rope_init_fn(config)`
                if owner not in _DEVICE_FOLLOWING_MODULES and owner not in self.bound:
                    return True
        return False

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
        # Step 4: positions take float32, never the dtype of a table; `type_as` moved them to the table's device too.
        is_type_as = m.matches(func, m.Attribute(attr=m.Name("type_as"))) and updated_node.args
        if is_type_as and _reads_table(updated_node.args[0].value):
            assert isinstance(func, cst.Attribute)
            if self.at_runtime and self.device:
                return cst.parse_expression(f"_.to(device={self.device}, dtype=torch.float32)").with_changes(
                    func=cst.Attribute(value=func.value, attr=cst.Name("to"))
                )
            return cst.Call(func=func.with_changes(attr=cst.Name("float")))
        if self.constructing:
            # Step 3: tensors are created on the CPU, and nothing moves before the math.
            if _is_factory(func):
                return with_keyword(updated_node, "device", '"cpu"')
            moves_enumeration = m.matches(func, m.Attribute(attr=m.Name("to"))) and _contains_factory(func.value)
            if moves_enumeration and not _is_default_device_move(updated_node):
                return _without_device_move(updated_node)
        # Step 5: at runtime, a `.to(...)` of a table read moves it to the device of a tensor the method takes.
        is_move = m.matches(func, m.Attribute(attr=m.Name("to"))) and _reads_table(func.value)
        if self.at_runtime and self.device and is_move:
            return _with_device(updated_node, self.device)
        return updated_node

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        if not (self.in_rotary and self.method not in (None, "__init__")):
            return updated_node
        if self.at_runtime and self.device and updated_node.attr.value == "device" and _is_table(original_node.value):
            return cst.parse_expression(self.device)  # the device the table lived on: the one it moves to
        if not m.matches(updated_node.value, m.Name("self")) or original_node in self.stored:
            return updated_node
        name = updated_node.attr.value
        if name in self.persistent:  # a persistent table is read through its float32 copy
            name += _FP32_SUFFIX
            updated_node = updated_node.with_changes(attr=cst.Name(name))
        if self.at_runtime and self.device and name in self.tables and original_node not in self.moved:
            return _moved(updated_node, self.device)
        return updated_node

    def leave_Return(self, original_node: cst.Return, updated_node: cst.Return) -> cst.Return:
        # Step 5: a table returned as it is moves to the input's device, slice and all.
        if self.at_runtime and self.device and updated_node.value is not None:
            return updated_node.with_changes(value=_move_bare_table_reads(updated_node.value, self.device))
        return updated_node


def _is_factory(func: cst.BaseExpression) -> bool:
    return m.matches(
        func, m.Attribute(value=m.Name("torch"), attr=m.Name(value=m.MatchIfTrue(_FACTORIES.__contains__)))
    )


def _contains_factory(node: cst.BaseExpression) -> bool:
    return any(isinstance(call, cst.Call) and _is_factory(call.func) for call in m.findall(node, m.Call()))


def _is_table(node: cst.BaseExpression) -> bool:
    """`self.<table>`."""
    return m.matches(node, m.Attribute(value=m.Name("self"), attr=m.Name(value=m.MatchIfTrue(is_table_name))))


def _bound_names(method: cst.FunctionDef) -> set[str]:
    """The method's parameters and the plain names it assigns: its locals."""
    names = {param.name.value for param in (*method.params.params, *method.params.kwonly_params)}
    for target in m.findall(method, m.AssignTarget() | m.AnnAssign() | m.For() | m.AsName()):
        node = target.name if isinstance(target, cst.AsName) else target.target  # type: ignore[union-attr]
        names.update(name.value for name in m.findall(node, m.Name()) if isinstance(name, cst.Name))
        if isinstance(node, cst.Name):
            names.add(node.value)
    return names


def _names_read_by_table_stores(method: cst.FunctionDef) -> set[str]:
    """The plain names in the values that the method stores as tables (after step 1: `self.<table> = value`, a
    kept `register_buffer(...)` or `nn.Buffer(...)`, `setattr(self, name, value)`)."""
    values: list[cst.CSTNode] = []
    for assign in m.findall(method, m.Assign(targets=[m.AssignTarget(m.Attribute(value=m.Name("self")))])):
        assert isinstance(assign, cst.Assign) and isinstance(assign.targets[0].target, cst.Attribute)
        if is_table_name(assign.targets[0].target.attr.value):
            values.append(assign.value)
    for call in m.findall(method, m.Call(func=m.Name("setattr") | m.Attribute(attr=m.Name("register_buffer")))):
        assert isinstance(call, cst.Call)
        values.extend(arg.value for arg in call.args[1:])
    return {name.value for value in values for name in m.findall(value, m.Name()) if isinstance(name, cst.Name)}


def _receiver_root(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """`self.cos_cached` of `self.cos_cached[:n].float()`: what a chain of subscripts and calls starts from. None
    when a subscript indexes by a tensor (`self.cos_cached[position_ids]`): a table on the CPU takes no index on an
    accelerator, so the table moves before it, not after."""
    while True:
        if isinstance(node, cst.Subscript):
            if _indexes_by_value(node):
                return None
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        else:
            return node


def _moved(node: cst.BaseExpression, device: str) -> cst.Call:
    return cst.Call(func=cst.Attribute(value=node, attr=cst.Name("to")), args=[cst.Arg(cst.parse_expression(device))])


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


def _inherited_tables(codes: list[str]) -> tuple[set[str], set[str]]:
    """The tables that the construction of the classes `codes` stores, and those they keep as persistent buffers (read
    through their float32 copy once rewritten): what a class that inherits from them reads."""
    tables: set[str] = set()
    persistent: set[str] = set()
    for code in codes:
        try:
            module = cst.parse_module(textwrap.dedent(code))
        except cst.ParserSyntaxError:
            continue
        for cls in module.body:
            if isinstance(cls, cst.ClassDef):
                tables |= _construction_tables(cls, _construction_methods(cls))
        persistent |= _persistent_buffers(code)
    return tables | {name + _FP32_SUFFIX for name in persistent}, persistent


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


def _with_device(call: cst.Call, device: str) -> cst.Call:
    """A `.to(...)` that names no device gets `device=<device>` first."""
    code = cst.Module([]).code_for_node(call)
    if "device" in code.split(".to(", 1)[-1]:
        return call
    positional = [arg for arg in call.args if arg.keyword is None]
    if positional:  # `.to(x.dtype)` -> `.to(device=x.device, dtype=x.dtype)`
        call = call.with_changes(
            args=[arg.with_changes(keyword=cst.Name("dtype"), equal=EQUAL) if arg.keyword is None else arg
                  for arg in call.args]
        )  # fmt: skip
    moved = with_keyword(call, "device", device)
    # device first, as people write it: move the new argument to the front.
    args = list(moved.args)
    device = args.pop()
    first, rest = device.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), args
    rest[-1] = rest[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return moved.with_changes(args=[first, *rest])


def _move_bare_table_reads(value: cst.BaseExpression, device: str) -> cst.BaseExpression:
    """`return self.cos_cached[:n], ...` -> `return self.cos_cached[:n].to(x.device), ...`."""

    def moved(element: cst.BaseExpression) -> cst.BaseExpression:
        return _moved(element, device) if _is_bare_table_read(element) else element

    if isinstance(value, cst.Tuple):
        return value.with_changes(elements=[e.with_changes(value=moved(e.value)) for e in value.elements])
    return moved(value)


def _indexes_by_value(subscript: cst.Subscript) -> bool:
    """`t[position_ids]`, `t[:, ids]`: an index other than slices, integers, `None` and `...`."""
    return any(
        isinstance(element.slice, cst.Index)
        and not isinstance(element.slice.value, cst.Integer | cst.Ellipsis)
        and not m.matches(element.slice.value, m.Name("None"))
        for element in subscript.slice
    )


def _is_bare_table_read(node: cst.BaseExpression) -> bool:
    """`self.cos_cached` or `self.cos_cached[:n]`: a table, not moved or cast."""
    while isinstance(node, cst.Subscript):
        if _indexes_by_value(node):
            return False
        node = node.value
    return isinstance(node, cst.Attribute) and m.matches(node.value, m.Name("self")) and is_table_name(node.attr.value)
