"""LibCST edits that the arange fixes share. Imported only by `fix`, never by `check`."""

from __future__ import annotations

import libcst as cst

from rope_lint.diagnostics import Fix


def int64_enumeration(call: cst.Call, fix: Fix) -> cst.BaseExpression:
    """`torch.arange(0.0, n, 2.0, dtype=X)` -> `torch.arange(0, n, 2, dtype=torch.int64).float()`.

    The `.float()` is left out where the call was cast with `.float()` already.
    """
    int64_call = with_dtype(integral_literals(call), f"{fix.get('torch')}.int64")
    return cast_to_float(int64_call) if fix.get("cast") == "yes" else int64_call


def integral_literals(call: cst.Call) -> cst.Call:
    """`2.0` -> `2` and `-1.0` -> `-1` among the call's arguments, so an int64 enumeration gets int bounds."""

    def integral(value: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(value, cst.Float) and float(value.value).is_integer():
            return cst.Integer(str(int(float(value.value))))
        if isinstance(value, cst.UnaryOperation):
            return value.with_changes(expression=integral(value.expression))
        return value

    return call.with_changes(
        args=[arg.with_changes(value=integral(arg.value)) if arg.keyword is None or arg.keyword.value != "dtype"
              else arg for arg in call.args]
    )  # fmt: skip


def with_dtype(call: cst.Call, dtype: str) -> cst.Call:
    """Set `dtype=`, replacing the value of an existing one in place so that formatting and order stay."""
    value = cst.parse_expression(dtype)
    args = list(call.args)
    for index, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == "dtype":
            args[index] = arg.with_changes(value=value)
            return call.with_changes(args=args)
    if args and args[-1].comma is cst.MaybeSentinel.DEFAULT:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    elif args and isinstance(args[-1].comma, cst.Comma):
        # A trailing comma (the call is split over lines): keep that layout for the new argument.
        last = args[-1]
        args.append(
            cst.Arg(value=value, keyword=cst.Name("dtype"), equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
            ), comma=last.comma)
        )  # fmt: skip
        return call.with_changes(args=args)
    args.append(
        cst.Arg(
            value=value,
            keyword=cst.Name("dtype"),
            equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
            ),
        )
    )
    return call.with_changes(args=args)


def cast_to_float(node: cst.BaseExpression) -> cst.Call:
    """`node.float()`."""
    return cst.Call(func=cst.Attribute(value=node, attr=cst.Name("float")))
