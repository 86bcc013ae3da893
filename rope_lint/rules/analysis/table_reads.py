"""Whether one module of a package reads a RoPE table off a module from outside it: the part of "can the rope codemod
move this class's tables?" (`rotary.movable_rotary_classes`) that one class cannot answer, since any code that holds
the module can read `rotary_emb.cos_sin_cache` and hand it to a kernel (`callers.PackageCallers` asks, module by
module). The codemod makes such a table a float32 attribute on the CPU and rewrites only its own class's reads, so a
read from outside would get that instead of the buffer on the module's device, in the module's dtype.

Only the statements around the table's name are parsed. A read counts unless it is:
- off `self` or `cls`: the class's own methods, whose reads the codemod rewrites (in another module's class, a
  subclass's, it may not: the codemod's known problems);
- a store or a `del`, which replaces the table, as the codemod's own updates do, or a write into it (`.data = `);
- the value of an assignment to tables (`model.inv_freq.data = original.inv_freq`), a copy from one to another,
  as checkpoint conversions make;
- the destination of a write in place (`init.copy_(module.inv_freq, value)`, `module.inv_freq.copy_(value)`: a
  function or method whose name ends in `_`), which initialisation code does before any forward;
- an argument of a method of the same module (`module._compute_angles(module.inv_freq)`), whose methods are the
  class's own;
- a read of its shape (`TABLE_DESCRIPTIONS` but its dtype, which the codemod changes);
- in a module whose own classes store the table, in a module function that takes the module first and a tensor or
  device to move to (`rotary.device_source`): the dynamic and long-context updates of those classes, whose reads
  the codemod rewrites with them.
"""

from __future__ import annotations

import ast

from rope_lint.rules.analysis import rotary
from rope_lint.rules.analysis.context import FileContext, walk

# What a read of a table's metadata keeps on every device and in every dtype.
_SAME_AFTER_THE_MOVE = rotary.TABLE_DESCRIPTIONS - {"dtype"}


def read_off_modules(ctx: FileContext, name: str) -> bool:
    """Whether the module reads the table `name` off a module from outside its class, where the rope codemod would not
    rewrite the read."""
    stores: bool | None = None  # whether a class of the module stores the table, asked once
    for statement in ctx.statements_with((name,)):
        for node in walk(statement):
            if not (isinstance(node, ast.Attribute) and node.attr == name and _reads_value(ctx, node)):
                continue
            if not _in_update(ctx, node):
                return True
            if stores is None:
                classes = (c for c in ctx.tree.body if isinstance(c, ast.ClassDef))
                stores = any(name in rotary.stored_tables(cls) for cls in classes)
            if not stores:
                return True
    return False


def _reads_value(ctx: FileContext, node: ast.Attribute) -> bool:
    if not isinstance(node.ctx, ast.Load):
        return False
    if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
        return False
    parent = ctx.parent(node)
    if isinstance(parent, ast.Assign) and parent.value is node:
        return not all(map(_is_table_write, parent.targets))  # `model.inv_freq.data = original.inv_freq`
    if isinstance(parent, ast.Attribute):
        if parent.attr in _SAME_AFTER_THE_MOVE or not isinstance(parent.ctx, ast.Load):
            return False  # `module.inv_freq.data = value` writes into the table
        called = ctx.parent(parent)
        # `module.inv_freq.copy_(value)`
        return not (_in_place(parent.attr) and isinstance(called, ast.Call) and called.func is parent)
    if isinstance(parent, ast.Call) and parent.func is not node:
        function = parent.func
        spelled = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
        if parent.args and parent.args[0] is node and _in_place(spelled):
            return False  # `init.copy_(module.inv_freq, value)`
        if isinstance(function, ast.Attribute) and ast.dump(function.value) == ast.dump(node.value):
            return False  # `module._compute_angles(module.inv_freq)`
    return True


def _is_table_write(target: ast.expr) -> bool:
    """`<module>.<table>`, or its `.data`: a target that a table's value is copied into."""
    if isinstance(target, ast.Attribute) and target.attr == "data":
        target = target.value
    return isinstance(target, ast.Attribute) and rotary.is_table_name(target.attr)


def _in_place(spelled: str) -> bool:
    """A function or method named like torch's writes in place: `copy_`, `zeros_`, not `__init__`."""
    return spelled.endswith("_") and not spelled.startswith("__")


def _in_update(ctx: FileContext, node: ast.Attribute) -> bool:
    """Whether the read is off the first parameter of a module function with a device to move to, as the rope codemod
    rewrites the reads of the dynamic and long-context updates of its class's module."""
    function = next(ctx.enclosing_functions(node), None)
    if function is None or ctx.enclosing_class(node) is not None or not isinstance(node.value, ast.Name):
        return False
    parameters = [*function.args.posonlyargs, *function.args.args]
    return bool(parameters) and parameters[0].arg == node.value.id and rotary.device_source(function) is not None
