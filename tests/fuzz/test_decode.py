"""The frame decoder over mutated requests of every API and version (issue 14).

Property: ``decode_request`` returns a request or raises ProtocolError (the connection closes with that reason),
never anything else, never a huge allocation (the worker runs under RLIMIT_AS: kio's native reader aborting on a
claimed count would kill it, and the test reports the frame), and where the Heartbeat fast path
(protocol/heartbeat.py) accepts a frame, kio reads the same request from it.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.fuzz.guard import Guard
from benchmarks.fuzz.mutate import Mutation, apply
from benchmarks.fuzz.requests import valid_frame
from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from tests.fuzz.conftest import API_VERSIONS, MUTATIONS, SEEDS, failure

HEARTBEATS = st.sampled_from([(int(ApiKey.HEARTBEAT), v) for v in range(SUPPORTED_VERSIONS[ApiKey.HEARTBEAT][1] + 1)])


def check(guard: Guard, payload: bytes) -> None:
    result = guard.decode(payload)
    assert result["error"] is None, failure(result, [payload])


@settings(settings.get_profile("fuzz"), max_examples=2000)
@given(api_version=API_VERSIONS, seed=SEEDS, mutations=MUTATIONS)
def test_mutated_requests_decode_or_close(
    guard: Guard, api_version: tuple[int, int], seed: int, mutations: list[Mutation]
) -> None:
    frame = valid_frame(random.Random(seed), *api_version)
    check(guard, apply(frame, mutations))


@settings(settings.get_profile("fuzz"), max_examples=300)
@given(api_version=HEARTBEATS, seed=SEEDS, mutations=MUTATIONS)
def test_mutated_heartbeats_read_the_same_on_both_paths(
    guard: Guard, api_version: tuple[int, int], seed: int, mutations: list[Mutation]
) -> None:
    frame = valid_frame(random.Random(seed), *api_version)
    check(guard, apply(frame, mutations))


@settings(settings.get_profile("fuzz"), max_examples=300)
@given(api_version=API_VERSIONS, body=st.binary(max_size=200))
def test_any_body_behind_a_valid_header_decodes_or_closes(
    guard: Guard, api_version: tuple[int, int], body: bytes
) -> None:
    api_key, version = api_version
    header = api_key.to_bytes(2, "big") + version.to_bytes(2, "big") + b"\x00\x00\x00\x01\x00\x04fuzz"
    check(guard, header + body)
