"""The fix payloads: what a finding's fix carries from the check to the fix (`Fix.payload`), as plain fields.

A rule's check records how to fix a finding; its `fix` reads that record later, in another process or another run:
the result cache writes each payload as its type's name and its fields, and rebuilds it by that name. Every payload
type is here, in a module that imports nothing, so that a warm check rebuilds its cached findings without importing a
rule.
"""

from __future__ import annotations

from collections import namedtuple


class ClassRewrite(namedtuple("ClassRewrite", ("codemod", "class_name"))):
    """The fix payload of the rope rules: the codemod that rewrites the class, run once per file after the rules'
    own fixes, and the class the finding is in (None for a store outside any class)."""

    __slots__ = ()
    codemod: str  # a name in `rope_lint.codemods.CODEMODS`
    class_name: str | None


class Int64Enumeration(namedtuple("Int64Enumeration", ("torch", "cast", "end_rounding"), defaults=("",))):
    """The fix payload that makes the call an int64 enumeration and casts it back (`edits.int64_enumeration`)."""

    __slots__ = ()
    torch: str  # the name to write `<torch>.int64` with
    cast: str  # the method call appended: "float()", "to(...)"; "" where `.float()` follows already
    end_rounding: str  # default "": the function the end is wrapped in ("math.ceil"), where it is not proven integral


class PromotedDtype(namedtuple("PromotedDtype", ("dtype",))):
    """The fix payload that keeps a floating enumeration and writes its `dtype=` (`edits.promoted_dtype`)."""

    __slots__ = ()
    dtype: str  # the code of the new dtype


class WriteFunction(namedtuple("WriteFunction", ("function",))):
    """The fix payload of a rule that replaces the matched expression with one call of `function`."""

    __slots__ = ()
    function: str  # as the file's imports spell it (`logdomain.reference`)


class WriteReduction(namedtuple("WriteReduction", ("function", "method_spelling"))):
    """The fix payload of a rule that rewrites a reduction (`sum`, `softmax`) as a call of `function`, which takes the
    reduction's arguments: the receiver of the method spelling (`x.sum(d)`) becomes the first."""

    __slots__ = ()
    function: str
    method_spelling: bool


# The payloads of RPL301's merges, one for each form; `function` is `torch.logaddexp` as the file's imports spell it.
# The forms that need nothing else are `WriteFunction`s by another name (a subclass costs less to build than a
# namedtuple).
class MergeOfExps(WriteFunction):
    """`log(exp(a) + exp(b))`."""

    __slots__ = ()


class MergeOfShift(namedtuple("MergeOfShift", ("function", "base_on_left"))):
    """`a + log(1 + exp(b - a))`, with `a` on the left of the sum or on its right."""

    __slots__ = ()
    function: str
    base_on_left: bool


class MergeInChain(WriteFunction):
    """`x.exp_().add_(y.exp()).log_()`."""

    __slots__ = ()


class MergeOfStatements(namedtuple("MergeOfStatements", ("function", "add_index"))):
    """`x.exp_()` ... `x.add_(y.exp())` ... `x.log_()`: the finding's range is the run of statements, and the `add_`
    (or `+=`) is the run's statement at `add_index`."""

    __slots__ = ()
    function: str
    add_index: int


# Every payload type, by the name the result cache writes.
BY_NAME = {
    payload.__name__: payload
    for payload in (
        ClassRewrite,
        Int64Enumeration,
        PromotedDtype,
        WriteFunction,
        WriteReduction,
        MergeOfExps,
        MergeOfShift,
        MergeInChain,
        MergeOfStatements,
    )
}
