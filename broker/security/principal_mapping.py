"""Kafka's ``ssl.principal.mapping.rules`` (``SslPrincipalMapper``): how the subject of an SSL client's
certificate becomes the name in its principal (docs/spec/security.md 8.2).

Rules are comma-separated and tried in order; the first that gives a name wins, none is an error (the connection
fails). ``DEFAULT`` gives the distinguished name unchanged; ``RULE:regex/replacement/[L|U]`` applies when the
regex matches the *whole* DN and rewrites it (``$1``... refer to its groups, as Java's ``replaceAll`` does), then
lower- or upper-cases the result. Stdlib only: ``TlsConfig`` (broker/server/settings.py) parses the rules when the
settings are built, so a bad rule refuses the start.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# SslPrincipalMapper's grammar: DEFAULT, RULE:pattern/replacement/[LU] (a backslash escapes / and \ in either
# part), or anything else, which is an invalid rule. Java's regex syntax reads the same in Python's re here.
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(ValueError):
    """SslPrincipalMapper.NoMatchingRule: no rule gives a name for this DN."""


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:  # Java's Matcher.matches: the whole DN
            return None
        result = self.pattern.sub(_java_replacement(self.replacement, self.pattern.groups), dn)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


def _java_replacement(replacement: str, groups: int) -> Callable[[re.Match[str]], str]:
    """Java's replacement syntax (``$n`` a group, ``\\x`` a literal x) as a function of the match. A reference to
    a group the pattern lacks is cut down a digit at a time, then taken literally, as SslPrincipalMapper's
    ``escapeLiteralBackReferences`` does."""
    parts: list[str | int] = []
    index = 0
    while index < len(replacement):
        char = replacement[index]
        if char == "\\" and index + 1 < len(replacement):
            parts.append(replacement[index + 1])
            index += 2
            continue
        reference = _BACK_REFERENCE.match(replacement, index) if char == "$" else None
        if reference is not None:
            digits = reference[1]
            if digits.startswith("0"):  # $0: the whole match
                parts.append(0)
                index += 2
                continue
            number = int(digits)
            while number > groups and number >= 10:
                number //= 10
                digits = digits[:-1]
            if number <= groups:
                parts.append(number)
                index += 1 + len(digits)
                continue
        parts.append(char)
        index += 1

    def render(match: re.Match[str]) -> str:
        return "".join(part if isinstance(part, str) else match.group(part) or "" for part in parts)

    return render


class PrincipalMapper:
    """The parsed rules; ``name(dn)`` is the principal's name or NoMatchingRule."""

    def __init__(self, rules: str) -> None:
        self.text = rules
        self.rules = tuple(_parse(rule) for rule in _split(rules) if rule)

    def name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {dn}, rules {self.text}")


def _split(rules: str) -> list[str]:
    text = rules.strip()
    found: list[str] = []
    position = 0
    while position <= len(text):
        match = _SPLITTER.search(text, position)
        if match is None:
            break
        found.append(match[1])
        # An empty match (the end of the text) ends the search, as Java's find() would after it.
        if match.end() == match.start():
            break
        position = match.end()
    return found


def _parse(rule: str) -> Rule:
    match = _PARSER.match(rule)
    if match is None:
        raise ValueError(f"Invalid rule: {rule}")
    if match.end() != len(rule):
        raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[match.end():]}`")
    if match[1] is not None:
        return Rule(None)
    if match[2] is None:  # the "anything else" alternative
        raise ValueError(f"Invalid rule: {rule}")
    try:
        pattern = re.compile(match[2])
    except re.error as error:
        raise ValueError(f"Invalid rule: {rule}: {error}") from None
    return Rule(pattern, match[3], match[4])
