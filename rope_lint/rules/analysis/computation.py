"""Whether a class computes rotary or sinusoidal tables, whatever its names: the cos/sin (or complex exponential) of
a product of frequencies with an enumeration.

A class is told by what it computes, not by what it calls things: frequencies held as a buffer, a plain tensor or
an `nn.Parameter` under any name (`inv_freq`, `freqs`, `theta`, `bands`), multiplied with positions
(`torch.arange`, a positions argument) by `torch.outer`, `einsum`, `*` or `@`, and then passed to cos, sin,
`torch.polar` or `torch.exp(1j * ...)`. The math may sit in the class's methods or in the functions they call,
which each reader resolves in its own way (the rules within the file, the probe through the imported module).

The values are followed through each function by a small forward data flow, with these facts about each name:
- `ENUMERATION`: derives from `torch.arange`/`linspace` (an enumeration for certain);
- `ARGUMENT`: derives from an argument, which may carry positions (the first argument of `forward` is the
  activation, which carries none);
- `FREQUENCY`: derives from a power or an exponential (`base ** e`, `exp`, `pow`), which is how frequencies are
  made;
- `SPECTRUM`: derives from a power or an exponential of an enumeration (`base ** (arange(0, d, 2) / d)`,
  `exp(-log(p) * arange(n) / n)`, `logspace`): a geometric sequence of frequencies, not any value that a power
  touched;
- `HELD`: read from the module (`self.x`), which holds frequencies under any name;
- `ANGLE`: derives from a product of positions with frequencies;
- `TABLE`: derives from the cos/sin or complex exponential of an angle.
A class computes tables when one of its methods returns a `TABLE` or keeps one on the module: a model's weight
initialiser that writes a sinusoidal table into another module's weight does not.

The same flow tells which of a class's stores hold tables (`RotaryComputation.class_stores`): what each store keeps,
and which held values a method multiplies with positions as frequencies (a read of `self.x` carries the fact
`held_fact("x")`).
"""

from __future__ import annotations

import ast
from collections import namedtuple
from collections.abc import Callable, Iterable

from rope_lint.rules.analysis.context import FunctionNode, child_nodes, child_statements, is_self_attribute, walk

ENUMERATION = "enumeration"
ARGUMENT = "argument"
FREQUENCY = "frequency"
SPECTRUM = "spectrum"
HELD = "held"
ANGLE = "angle"
TABLE = "table"
Facts = frozenset
# The fact of a value read from `self.<name>`, and of an angle whose frequencies are `self.<name>`: a held value
# whose angle reaches a cos/sin is known as frequencies by its name.
_HELD_NAME = "held:"
_FREQUENCY_NAME = "frequency:"

# How deep calls are followed: a class, its methods, their helpers and the helpers' helpers.
DEPTH = 3
_ENUMERATION_CALLS = frozenset({"arange", "linspace"})
_FREQUENCY_CALLS = frozenset({"exp", "exp2", "pow", "float_power", "logspace", "linspace"})
_PRODUCT_CALLS = frozenset({"outer", "ger", "einsum", "matmul", "mm", "bmm", "mul", "multiply"})
_TRIGONOMETRIC_CALLS = frozenset({"cos", "sin", "polar"})
_COMPLEX_EXPONENTIAL_CALLS = frozenset({"exp"})
# What a tensor's metadata is: it carries none of its values' facts (`arange(n, dtype=self.inv_freq.dtype)`).
_SHAPE_READS = frozenset({"dtype", "device", "shape", "ndim", "size", "dim", "numel", "len"})
_TENSOR_HOLDERS = frozenset({"Parameter", "Buffer", "Tensor", "FloatTensor", "ParameterList", "ParameterDict"})
_BUFFER_STORES = frozenset({"register_buffer", "register_parameter"})
# The methods that convert a tensor and keep its values.
_CONVERSIONS = frozenset({"float", "double", "to", "unsqueeze", "view", "reshape", "expand", "type_as"})
# What a value computed from frequencies carries, and an enumeration's bounds pass on to none of its values.
_VALUE_FACTS = frozenset({FREQUENCY, SPECTRUM, ANGLE, TABLE})
# The methods that write their argument into the tensor they are called on.
_FILLS = frozenset({"copy_", "set_"})
# A store under a computed name (`register_buffer(f"args_{i}", ...)`): any read of an unknown attribute may be it.
_ANY_ATTRIBUTE = "*"

# How a reader finds the function a call runs: given the callee's expression (`helper`, `module.helper`) and the
# scope the call is made in (what the reader says a name means there: the probe's module globals), the function's
# definition and its own scope, or None when it is not model code the reader can see.
Resolved = tuple[FunctionNode, object] | None
Resolver = Callable[[ast.expr, object], Resolved]


def _no_resolver(callee: ast.expr, scope: object) -> Resolved:
    return None


def same_file_resolver(tree: ast.Module) -> Resolver:
    """The resolver of a reader of one file: a call of a top-level function of the same file by its name."""
    functions = {node.name: node for node in tree.body if isinstance(node, FunctionNode)}

    def resolve(callee: ast.expr, scope: object) -> Resolved:
        function = functions.get(callee.id) if isinstance(callee, ast.Name) else None
        return None if function is None else (function, scope)

    return resolve


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def held_fact(name: str) -> str:
    """The fact carried by a value read from `self.<name>`."""
    return _HELD_NAME + name


def holds_frequencies(facts: Facts) -> bool:
    """Whether a value is frequencies or angles, and not their cos/sin: a power or an exponential of an
    enumeration (`SPECTRUM`), or a product of positions with one."""
    return SPECTRUM in facts and TABLE not in facts


def holds_table(facts: Facts) -> bool:
    """Whether a value is the cos/sin or complex exponential of an angle."""
    return TABLE in facts


def _angle_frequencies(operands: list[Facts]) -> list[int] | None:
    """Positions times frequencies: an argument or an enumeration by a computed frequency, or an enumeration by a
    frequency the module holds. The indices of the operands that act as frequencies, or None when the product is no
    angle."""
    found: list[int] = []
    for index, positions in enumerate(operands):
        for other, frequencies in enumerate(operands):
            if other == index:
                continue
            enumerated = ENUMERATION in positions and (FREQUENCY in frequencies or HELD in frequencies)
            if enumerated or (ARGUMENT in positions and FREQUENCY in frequencies):
                found.append(other)
    return found or None


def _outer_frequencies(product: ast.BinOp) -> Facts:
    """`x[:, None] * self.w[None, :]`, `(2 * pi * t[:, None]) @ self.w[None, :]`: an outer product, by
    broadcasting, of a held vector with a value that gains an axis of its own. Its cos/sin are Fourier features,
    whose frequencies are the held vector whatever the other value is; the product is no angle for the probe,
    which needs positions, but names the vector as frequencies."""
    for held, other in ((product.left, product.right), (product.right, product.left)):
        name = _held_name(held)
        if name and _new_axis(held) and any(_new_axis(node) for node in walk(other)):
            return Facts({_FREQUENCY_NAME + name})
    return Facts()


def _new_axis(node: ast.AST) -> bool:
    """`t[:, None]`, `t[None]`: an index that adds an axis."""
    if not isinstance(node, ast.Subscript):
        return False
    index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return any(isinstance(element, ast.Constant) and element.value is None for element in index)


def _held_name(node: ast.expr) -> str | None:
    """The attribute that an operand reads as it is, indexed or converted: `self.bands`, `self.bands[None, :]`,
    `self.bands.float()`, `self.bands.to(x.device)`."""
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _CONVERSIONS:
            node = node.func.value
        else:
            break
    return node.attr if is_self_attribute(node) else None


class RotaryComputation:
    """Tells whether classes compute rotary or sinusoidal tables; one per reader, which supplies its resolver.

    A function's facts are computed once and kept, so a helper called by many classes is read once.
    """

    def __init__(self, resolve: Resolver = _no_resolver, depth: int = DEPTH) -> None:
        self._resolve = resolve
        self._depth = depth
        self._functions: dict[int, tuple[bool, Facts]] = {}
        # Of the class being read: the facts of what each store keeps (by the store's node) and the held values
        # multiplied with positions as frequencies.
        self.stored: dict[int, Facts] = {}
        self.frequencies: set[str] = set()
        # Each read of a held value in the pass over the class's methods, with what it found.
        self.held_reads: list[tuple[str, Facts]] = []

    def computes_tables(self, cls: ast.ClassDef, scope: object = None) -> bool:
        """Whether a method of `cls` returns or keeps on the module the cos/sin or complex exponential of a product
        of positions with frequencies, computed by itself or by the functions it calls."""
        return self._run(cls, scope)[0]

    def class_stores(self, cls: ast.ClassDef, scope: object = None) -> ClassStores:
        """What the methods of `cls` keep on the module (see `ClassStores`)."""
        self.stored, self.frequencies = {}, set()
        computes, held = self._run(cls, scope)
        return ClassStores(held, self.stored, frozenset(self.frequencies), computes)

    def _run(self, cls: ast.ClassDef, scope: object) -> tuple[bool, dict[str, Facts]]:
        methods = {node.name: node for node in cls.body if isinstance(node, FunctionNode)}
        held: dict[str, Facts] = {}
        # Twice, so that a table stored by a method is known to the methods read before it; once where every read
        # found what the class holds in the end: the facts only grow, so a second pass would find the same.
        for _ in range(2):
            found, self.held_reads = False, []
            for method in methods.values():
                flow = _Flow(self, scope, held, methods, self._depth, first_is_activation=method.name == "forward")
                found |= flow.run(method)[0]
            if all(_held_value(held, name) == value for name, value in self.held_reads):
                break
        return found, held

    def function_facts(self, function: FunctionNode, scope: object, depth: int) -> tuple[bool, Facts]:
        """(whether the function returns a table, the facts of what it returns) for a function outside a class."""
        key = id(function)
        if key not in self._functions:
            self._functions[key] = (False, Facts())  # a recursive call sees no table
            self._functions[key] = _Flow(self, scope, {}, {}, depth, first_is_activation=False).run(function)
        return self._functions[key]

    def resolve(self, callee: ast.expr, scope: object) -> Resolved:
        return self._resolve(callee, scope)


def _held_value(held: dict[str, Facts], name: str) -> Facts:
    """The facts of what a read of `self.<name>` finds: what the class keeps there, or under a computed name."""
    return held.get(name, held.get(_ANY_ATTRIBUTE, Facts()))


class ClassStores(namedtuple("ClassStores", ("held", "stored", "frequencies", "computes"))):
    """What a class's methods keep on the module, from `RotaryComputation.class_stores`."""

    __slots__ = ()
    held: dict[str, Facts]  # by attribute name ("*" for computed names): the facts of everything stored there
    stored: dict[int, Facts]  # by `id` of the store (the assignment, or the `register_buffer`/`setattr` call)
    frequencies: frozenset[str]  # the attributes read as the frequencies of an angle (`outer(t, self.bands)`)
    computes: bool  # whether the class computes tables (`RotaryComputation.computes_tables`)


class _Flow:
    """The forward data flow through one function: facts of each local name, of what it returns, and of what it
    stores on `self` (shared with the other methods of its class through `held`)."""

    def __init__(
        self,
        computation: RotaryComputation,
        scope: object,
        held: dict[str, Facts],
        methods: dict[str, FunctionNode],
        depth: int,
        first_is_activation: bool,
    ) -> None:
        self.computation = computation
        self.scope = scope
        self.held = held
        self.methods = methods
        self.depth = depth
        self.first_is_activation = first_is_activation
        # The flow of the method whose call this one follows (see _callee); never itself, so that a flow is no
        # reference cycle and goes, with what it holds, as soon as it is done.
        self.caller: _Flow | None = None
        self.names: dict[str, Facts] = {}
        self.returned: Facts = Facts()
        self.computes = False

    def run(self, function: FunctionNode, call: ast.Call | None = None) -> tuple[bool, Facts]:
        """Follow the function's body; `call`, a call of a method of the class, gives its parameters the facts of
        what it passes (a held frequency, say), besides being arguments."""
        arguments = function.args
        positional = [*arguments.posonlyargs, *arguments.args]
        if positional and positional[0].arg in ("self", "cls"):
            positional = positional[1:]
        passed: dict[str, Facts] = {}
        if call is not None:
            caller = self.caller or self
            pairs = zip(positional, call.args, strict=False)
            passed = {parameter.arg: caller.facts(value) for parameter, value in pairs}
            passed |= {keyword.arg: caller.facts(keyword.value) for keyword in call.keywords if keyword.arg}
        for index, argument in enumerate([*positional, *arguments.kwonlyargs]):
            activation = index == 0 and self.first_is_activation
            self.names[argument.arg] = Facts() if activation else Facts({ARGUMENT}) | passed.get(argument.arg, Facts())
        self._statements(function.body)
        return self.computes, self.returned

    def _statements(self, statements: Iterable[ast.stmt]) -> None:
        for statement in statements:
            self._statement(statement)

    def _statement(self, node: ast.stmt) -> None:
        if isinstance(node, FunctionNode | ast.ClassDef):
            return  # nested definitions run elsewhere, if at all
        if isinstance(node, ast.Assign):
            facts = self.facts(node.value)
            for target in node.targets:
                self._bind(target, facts)
                if is_self_attribute(target):
                    self._stored(node, facts)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and node.value is not None:
            facts = self.facts(node.value)
            if isinstance(node, ast.AugAssign):
                facts |= self.facts(node.target)
            self._bind(node.target, facts)
        elif isinstance(node, ast.For | ast.AsyncFor):
            self._bind(node.target, self.facts(node.iter))
        elif isinstance(node, ast.Return) and node.value is not None:
            self.returned |= self.facts(node.value)
            self.computes |= TABLE in self.returned
        elif isinstance(node, ast.Expr):
            self.facts(node.value)
        for field in ("test", "items", "subject"):  # conditions and `with` items may compute too
            for value in _as_list(getattr(node, field, None)):
                if isinstance(value, ast.expr):
                    self.facts(value)
                elif isinstance(value, ast.withitem):
                    self._bind(value.optional_vars, self.facts(value.context_expr))
        self._statements(child_statements(node))

    def _bind(self, target: ast.expr | None, facts: Facts) -> None:
        if isinstance(target, ast.Name):
            # Facts accumulate over assignments: a name set on two branches may hold either value.
            self.names[target.id] = self.names.get(target.id, Facts()) | facts
        elif isinstance(target, ast.Tuple | ast.List | ast.Starred):
            for element in target.elts if not isinstance(target, ast.Starred) else [target.value]:
                self._bind(element, facts)
        elif is_self_attribute(target):
            self._hold(target.attr, facts)
        elif isinstance(target, ast.Subscript):  # `table[..., 0::2] = sin(...)` writes into the table
            self._bind(target.value, facts | self.facts(target.value))

    def _hold(self, name: str, facts: Facts) -> None:
        self.held[name] = self.held.get(name, Facts()) | facts
        self.computes |= TABLE in facts

    def _stored(self, store: ast.AST, facts: Facts) -> None:
        stored = self.computation.stored
        stored[id(store)] = stored.get(id(store), Facts()) | facts

    def _angle(self, operands: list[Facts], nodes: list[ast.expr]) -> Facts:
        """The facts a product of the operands (`nodes`, their expressions) adds: `ANGLE`, and the names of the
        held values that act as its frequencies as they are read; none when the product is no angle."""
        frequencies = _angle_frequencies(operands)
        if frequencies is None:
            return Facts()
        held = [_held_name(nodes[index]) for index in frequencies if index < len(nodes)]
        return Facts({ANGLE, *(_FREQUENCY_NAME + name for name in held if name)})

    def facts(self, node: ast.expr) -> Facts:
        """The facts of an expression's value, noting a table computed on the way."""
        if isinstance(node, ast.Name):
            return self.names.get(node.id, Facts())
        if isinstance(node, ast.Attribute) and node.attr in _SHAPE_READS:
            return Facts()
        if is_self_attribute(node):
            held = _held_value(self.held, node.attr)
            self.computation.held_reads.append((node.attr, held))
            return Facts({HELD, held_fact(node.attr)}) | held
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.BinOp):
            left, right = self.facts(node.left), self.facts(node.right)
            facts = left | right
            if isinstance(node.op, ast.Pow):
                facts |= {FREQUENCY, SPECTRUM} if ENUMERATION in right else {FREQUENCY}
                # `base ** self.exponents`: held exponents make the frequencies, and a cast rounds them as it rounds
                # frequencies held as they are.
                exponents = _held_name(node.right)
                facts |= {_FREQUENCY_NAME + exponents} if exponents else Facts()
            if isinstance(node.op, ast.Mult | ast.MatMult):
                facts |= self._angle([left, right], [node.left, node.right]) or _outer_frequencies(node)
            return facts
        if isinstance(node, ast.Lambda):
            return Facts()
        facts = Facts()
        for child in child_nodes(node):
            if isinstance(child, ast.expr):
                facts |= self.facts(child)
            elif isinstance(child, ast.comprehension):
                self._bind(child.target, self.facts(child.iter))
                facts |= Facts().union(*(self.facts(condition) for condition in child.ifs))
            elif isinstance(child, ast.keyword):
                facts |= self.facts(child.value)
        return facts

    def _call(self, call: ast.Call) -> Facts:
        name = _called_name(call)
        receiver = self.facts(call.func.value) if isinstance(call.func, ast.Attribute) else Facts()
        arguments = [self.facts(argument) for argument in [*call.args, *(kw.value for kw in call.keywords)]]
        if name in _SHAPE_READS:
            return Facts()
        facts = receiver.union(*arguments)
        owner = call.func.value if isinstance(call.func, ast.Attribute) else None
        if isinstance(owner, ast.Name) and owner.id in self.names and arguments:
            # `tables.append(t)`, `table.copy_(t)`: a local's method may keep what it is given (a module such as
            # `torch` is no local).
            self._bind(owner, Facts().union(*arguments))
        elif is_self_attribute(owner) and name in _FILLS and arguments:
            self._hold(owner.attr, Facts().union(*arguments))  # `self.table.copy_(t)` fills a held table
        if name in _ENUMERATION_CALLS:
            # Its bounds are sizes, whatever computed them: `arange(size ** 2)` enumerates positions.
            facts = Facts(fact for fact in facts if fact not in _VALUE_FACTS and not fact.startswith(_FREQUENCY_NAME))
            facts |= {ENUMERATION}
        if name in _FREQUENCY_CALLS:
            facts |= {FREQUENCY}
            if name == "logspace" or (name != "linspace" and any(ENUMERATION in f for f in [receiver, *arguments])):
                facts |= {SPECTRUM}
        if name in _PRODUCT_CALLS:
            values = [*call.args, *(keyword.value for keyword in call.keywords)]
            if receiver and isinstance(call.func, ast.Attribute):
                facts |= self._angle([receiver, *arguments], [call.func.value, *values])
            else:
                facts |= self._angle(arguments, values)
        if name in _TRIGONOMETRIC_CALLS or (name in _COMPLEX_EXPONENTIAL_CALLS and _complex(call)):
            facts |= {TABLE} if ANGLE in facts else Facts()
            self.computation.frequencies.update(
                fact[len(_FREQUENCY_NAME) :] for fact in facts if fact.startswith(_FREQUENCY_NAME)
            )
        if name in _BUFFER_STORES and is_self_attribute(call.func) and len(call.args) > 1:
            stored = call.args[0]
            key = stored.value if isinstance(stored, ast.Constant) and isinstance(stored.value, str) else _ANY_ATTRIBUTE
            self._hold(key, arguments[1])
            self._stored(call, arguments[1])
        elif name == "setattr" and len(call.args) == 3 and isinstance(call.args[0], ast.Name):
            self._hold(_ANY_ATTRIBUTE, arguments[2])
            self._stored(call, arguments[2])
        return facts | self._callee(call, name)

    def _callee(self, call: ast.Call, name: str | None) -> Facts:
        """What a call of a method of the class or of a function the reader resolves returns; a method that keeps
        a table on the module counts for the class."""
        if self.depth <= 0:
            return Facts()
        if is_self_attribute(call.func) and name in self.methods:
            method = self.methods[name]
            flow = _Flow(self.computation, self.scope, self.held, {}, self.depth - 1, first_is_activation=False)
            flow.caller = self
            self.computes |= flow.run(method, call)[0]
            return flow.returned - {ARGUMENT}
        resolved = self.computation.resolve(call.func, self.scope)
        if resolved is None:
            return Facts()
        return self.computation.function_facts(*resolved, self.depth - 1)[1] - {ARGUMENT}


def _complex(call: ast.Call) -> bool:
    """`exp(1j * angle)`: an imaginary literal in the exponent."""
    return any(isinstance(node, ast.Constant) and isinstance(node.value, complex) for node in walk(call))


def _as_list(value: object) -> list:
    return value if isinstance(value, list) else [] if value is None else [value]


def builds_layers(cls: ast.ClassDef) -> bool:
    """Whether the class's `__init__` builds submodules (`self.proj = nn.Linear(...)`,
    `self.encoder = Encoder._from_config(...)`): a model or a layer that uses tables, not a module that provides
    them. A class is called by its capitalised name; `nn.Parameter` and `nn.Buffer` hold tensors, not layers."""
    init = next((node for node in cls.body if isinstance(node, FunctionNode) and node.name == "__init__"), None)
    stores = [
        node.value
        for node in (walk(init) if init is not None else ())
        if isinstance(node, ast.Assign) and any(is_self_attribute(target) for target in node.targets)
    ]
    return any(_builds_layer(call) for value in stores for call in walk(value) if isinstance(call, ast.Call))


def _builds_layer(call: ast.Call) -> bool:
    names = []
    callee = call.func
    while isinstance(callee, ast.Attribute):
        names.append(callee.attr)
        callee = callee.value
    if isinstance(callee, ast.Name):
        names.append(callee.id)
    # The callee's own name or the class it is a method of (`Encoder._from_config`) is capitalised.
    return any(name[:1].isupper() and name not in _TENSOR_HOLDERS for name in names[:2])
