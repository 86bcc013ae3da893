"""The rule catalog: codes are stable once released. Each rule lives in its own module; this is the one list of them."""

from __future__ import annotations

from collections.abc import Iterable

from rope_lint.diagnostics import ERROR_CODES
from rope_lint.rules.base import Rule
from rope_lint.rules.default_dtype_division import DefaultDtypeDivision
from rope_lint.rules.expm1 import Expm1
from rope_lint.rules.float_arange import FloatArange
from rope_lint.rules.float_literal_arange import FloatLiteralArange
from rope_lint.rules.log1p import Log1p
from rope_lint.rules.log_softmax import LogSoftmax
from rope_lint.rules.logsigmoid import LogSigmoid
from rope_lint.rules.logsumexp import LogSumExp
from rope_lint.rules.low_precision_rope_cache import LowPrecisionRopeCache
from rope_lint.rules.lse_merge import LseMerge
from rope_lint.rules.rope_autocast import RopeAutocast
from rope_lint.rules.rope_buffer_downcast import RopeBufferDowncast
from rope_lint.rules.rope_device_math import RopeDeviceMath
from rope_lint.rules.softplus import Softplus

ALL_RULES: tuple[type[Rule], ...] = (
    FloatArange,
    FloatLiteralArange,
    DefaultDtypeDivision,
    LowPrecisionRopeCache,
    RopeBufferDowncast,
    RopeDeviceMath,
    RopeAutocast,
    LseMerge,
    LogSumExp,
    LogSoftmax,
    Softplus,
    LogSigmoid,
    Log1p,
    Expm1,
)
RULES_BY_CODE: dict[str, type[Rule]] = {rule.code: rule for rule in ALL_RULES}


class UnknownCodeError(ValueError):
    pass


def matches(code: str, selectors: Iterable[str]) -> bool:
    """Whether a code is named by any selector: a full code, a prefix (`RPL1`), or `ALL`."""
    return any(selector == "ALL" or code.startswith(selector) for selector in selectors)


def validate_selectors(selectors: Iterable[str]) -> None:
    for selector in selectors:
        if selector != "ALL" and not any(code.startswith(selector) for code in _ALL_CODES):
            raise UnknownCodeError(f"unknown rule code or prefix: {selector!r}")


def select_rules(select: Iterable[str], ignore: Iterable[str]) -> list[Rule]:
    select, ignore = list(select), list(ignore)
    validate_selectors([*select, *ignore])
    return [rule() for rule in ALL_RULES if matches(rule.code, select) and not matches(rule.code, ignore)]


_ALL_CODES = (*RULES_BY_CODE, *ERROR_CODES)
