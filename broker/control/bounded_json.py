"""JSON from a client, parsed within bounds: nothing in a body can make the parser raise what a handler does not expect.

``json.loads`` alone has two ways to fail that are not ``JSONDecodeError``: an integer of more than 4,300 digits
(``ValueError`` from Python's int max str digits guard, CVE-2020-10735) and deep nesting (``RecursionError`` from
the C scanner). Both became a 500 with a traceback. Here the nesting depth is measured first with a scan that does
not recurse, and every number is checked for length before it is converted, so each is a ``BadJson`` (a 400).
"""

from __future__ import annotations

import json
import re
from array import array
from itertools import accumulate
from typing import Any

# A fault rule is one flat object; 32 levels leaves room for anything a later verb may take.
MAX_DEPTH = 32
# Kafka's widest integers are 64-bit (19 digits and a sign); a float written out in full is longer, never 100.
MAX_NUMBER_CHARS = 100

# A JSON string, quotes included; the unrolled form matches in linear time (no backtracking on long strings).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = b"[]{}"
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in _BRACKETS)
# An opening bracket counts +1, a closing one -1 (0xFF as a signed byte).
_STEPS = bytes.maketrans(_BRACKETS, b"\x01\xff\x01\xff")


class BadJson(ValueError):
    """The body is not JSON we take; the message says why, for the client."""


def nesting_depth(raw: bytes) -> int:
    """How deep arrays and objects nest in ``raw`` (UTF-8), outside strings; never recurses, runs in C.

    In UTF-8 every byte below 0x80 is the ASCII character it looks like, so brackets and quotes can be found in
    the bytes. An unterminated string is not removed, so invalid JSON may measure deeper than it is: it is
    refused either way.
    """
    steps = _STRING.sub(b"", raw).translate(_STEPS, _NOT_BRACKETS)
    return max(accumulate(array("b", steps)), default=0)


def _number(convert: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        if len(text) > MAX_NUMBER_CHARS:
            raise BadJson(f"the body has a number of {len(text)} characters (at most {MAX_NUMBER_CHARS} are taken)")
        return convert(text)

    return parse


_parse_int = _number(int)
_parse_float = _number(float)


def loads(raw: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """``raw`` as JSON (RFC 8259: UTF-8), or ``BadJson``; an empty body is ``None``."""
    if not raw:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        raise BadJson(f"the body is not valid JSON: it is not UTF-8 ({bad})") from None
    depth = nesting_depth(raw)
    if depth > max_depth:
        raise BadJson(f"the body nests {depth} levels deep (at most {max_depth} are taken)")
    try:
        return json.loads(text, parse_int=_parse_int, parse_float=_parse_float)
    except BadJson:
        raise
    except (ValueError, RecursionError) as bad:  # JSONDecodeError is a ValueError
        raise BadJson(f"the body is not valid JSON: {bad}") from None
