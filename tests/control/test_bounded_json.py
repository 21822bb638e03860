"""``broker.control.bounded_json``: the depth scan agrees with the real nesting of any JSON, and ``loads`` agrees with
``json.loads`` on everything within the limits and raises only ``BadJson`` beyond them (hypothesis, fixed seed)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from broker.control import bounded_json
from broker.control.bounded_json import MAX_DEPTH, MAX_NUMBER_CHARS, BadJson

# Strings full of what the scan must not count: brackets, quotes and backslashes.
TRICKY_TEXT = st.text(alphabet=st.sampled_from('[]{}"\\ ax\u00e9\u2028\U0001f600'), max_size=12)
SCALARS = st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats(allow_nan=False) | TRICKY_TEXT
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TRICKY_TEXT, inner, max_size=4),
    max_leaves=40,
)


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


@seed(14)
@settings(max_examples=300, deadline=None)
@given(VALUES, st.booleans())
def test_the_scan_measures_the_real_depth(value: Any, ascii_only: bool) -> None:
    raw = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert bounded_json.nesting_depth(raw) == depth(value)


@seed(14)
@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_within_the_limits_loads_is_json_loads(value: Any) -> None:
    raw = json.dumps(value, ensure_ascii=False).encode()
    if depth(value) > MAX_DEPTH:
        with pytest.raises(BadJson):
            bounded_json.loads(raw)
        return
    assert bounded_json.loads(raw) == json.loads(raw)


@seed(14)
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | st.text(alphabet='[]{}",:0123456789.eE-+ ntrufals\\', max_size=200).map(str.encode))
def test_any_bytes_give_a_value_or_bad_json(raw: bytes) -> None:
    try:
        bounded_json.loads(raw)
    except BadJson as bad:
        assert str(bad)


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"9" * 4400, ["number of 4400 characters", str(MAX_NUMBER_CHARS)]),
        (b"-" + b"9" * 4400, ["number of 4401 characters"]),
        (b"1." + b"0" * 200, ["number of 202 characters"]),
        (b"[" * 100_000, ["nests 100000 levels", str(MAX_DEPTH)]),
        (b'{"a":' * 40 + b"1" + b"}" * 40, ["nests 40 levels"]),
        (b"\xff", ["not valid JSON", "UTF-8"]),
        (b"{", ["not valid JSON"]),
    ],
)
def test_what_is_refused_says_why(raw: bytes, words: list[str]) -> None:
    with pytest.raises(BadJson) as refused:
        bounded_json.loads(raw)
    for word in words:
        assert word in str(refused.value)


def test_what_is_taken() -> None:
    assert bounded_json.loads(b"") is None
    assert bounded_json.loads(b"9" * MAX_NUMBER_CHARS) == int("9" * MAX_NUMBER_CHARS)
    assert bounded_json.loads(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) is not None
    assert bounded_json.loads(b'"' + b"[" * 100_000 + b'"') == "[" * 100_000  # brackets in a string are text
    assert math.isinf(bounded_json.loads(b"1e999"))
