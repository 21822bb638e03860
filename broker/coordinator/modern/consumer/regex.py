"""Regular-expression subscriptions (section 4.9): RE2 syntax, whole-name matching, as Kafka's RE2/J ``matches()``.

The pattern is compiled by ``broker/re2_pattern.py`` (RE2, loaded on first use: a broker whose groups never subscribe
by pattern never loads it).
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.re2_pattern import InvalidRegex, compiled

__all__ = ["InvalidRegex", "resolve", "validate"]


def validate(pattern: str) -> None:
    compiled(pattern)


def resolve(pattern: str, names: Iterable[str]) -> frozenset[str]:
    """The topic names the pattern matches whole (``orders`` matches only ``orders``; internal topics too)."""
    try:
        regex = compiled(pattern)
    except InvalidRegex:
        return frozenset()
    return frozenset(name for name in names if regex.fullmatch(name) is not None)
