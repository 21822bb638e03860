"""Regular-expression subscriptions (section 4.9): RE2 syntax, whole-name matching, as Kafka's RE2/J ``matches()``.

Kafka compiles subscriptions with RE2/J, whose syntax differs from Python's ``re`` (no look-around, no
back-references, different escapes), so the binding of Google's RE2 (``google-re2``) is used. It is imported on
first use: a broker whose groups never subscribe by pattern never loads it.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

__all__ = ["InvalidRegex", "resolve", "validate"]


class InvalidRegex(ValueError):
    """The pattern does not compile; the message is RE2's description."""


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> Any:
    import re2  # type: ignore[import-untyped]

    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as error:
        detail = error.args[0] if error.args else "invalid pattern"
        raise InvalidRegex(detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)) from None


def validate(pattern: str) -> None:
    _compiled(pattern)


def resolve(pattern: str, names: Iterable[str]) -> frozenset[str]:
    """The topic names the pattern matches whole (``orders`` matches only ``orders``; internal topics too)."""
    try:
        compiled = _compiled(pattern)
    except InvalidRegex:
        return frozenset()
    return frozenset(name for name in names if compiled.fullmatch(name) is not None)
