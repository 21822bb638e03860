"""RE2 patterns, as Kafka compiles them with RE2/J: one loader for every place a client sends a regular expression.

KIP-848 subscriptions (``coordinator/modern/regex.py``) and ListTransactions v2's transactional-id pattern
(``transactions/describe.py``) both use RE2 syntax, which differs from Python's ``re`` (no look-around, no
back-references, different escapes), so the binding of Google's RE2 (``google-re2``) is used. It is imported on
first use: a broker never asked for a pattern never loads it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

__all__ = ["InvalidRegex", "compiled"]


class InvalidRegex(ValueError):
    """The pattern does not compile; the message is RE2's description."""


@lru_cache(maxsize=256)
def compiled(pattern: str) -> Any:
    """The compiled pattern (match whole names with its ``fullmatch``); raises ``InvalidRegex``."""
    import re2  # type: ignore[import-untyped]

    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as error:
        detail = error.args[0] if error.args else "invalid pattern"
        raise InvalidRegex(detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)) from None
