"""The request handlers over sessions of valid and mutated requests (issue 14).

Each example is a session: a fresh broker state (BrokerServer's coordinator, topics and fetches) on a manual
clock, and a few requests, each valid or mutated, with the clock moved after each. The worker decodes, dispatches
and encodes as broker/server/pipeline.py does. Property: every request is answered (the answer encodes, and kio
reads it back whole with no trailing bytes), or parked and answered once the clock has run every timer, or the
connection would close with a reason; no handler raises, no timer logs an error, no step holds the loop for
seconds or grows the heap by hundreds of megabytes.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.fuzz.guard import Guard
from benchmarks.fuzz.mutate import RECORDS, Mutation, apply
from benchmarks.fuzz.requests import aimed_at, build_request, encode, valid_frame
from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from tests.fuzz.conftest import API_VERSIONS, MUTATIONS, SEEDS, failure

STEP = st.tuples(
    API_VERSIONS,
    SEEDS,
    st.one_of(st.just([]), MUTATIONS),  # a valid request, or a mutated one
    st.sampled_from([0, 0, 100, 5_000, 40_000]),  # then the clock moves (past a session timeout, now and then)
)


@settings(settings.get_profile("fuzz"), max_examples=500)
@given(steps=st.lists(STEP, min_size=1, max_size=6))
def test_sessions_of_valid_and_mutated_requests_are_answered_or_closed(
    guard: Guard, steps: list[tuple[tuple[int, int], int, list[Mutation], int]]
) -> None:
    frames = []
    for correlation_id, (api_version, seed, mutations, _) in enumerate(steps):
        frame = valid_frame(random.Random(seed), *api_version, correlation_id=correlation_id)
        frames.append(apply(frame, mutations) if mutations else frame.payload)
    result = guard.session([(frame, advance) for frame, (*_, advance) in zip(frames, steps, strict=True)])
    assert result["error"] is None, failure(result, frames)


PRODUCES = st.sampled_from([(int(ApiKey.PRODUCE), v) for v in range(3, SUPPORTED_VERSIONS[ApiKey.PRODUCE][1] + 1)])
READS = st.sampled_from(
    [(int(api), v) for api in (ApiKey.LIST_OFFSETS, ApiKey.FETCH) for v in range(SUPPORTED_VERSIONS[api][0],
                                                                                SUPPORTED_VERSIONS[api][1] + 1)]
)  # fmt: skip
# Inside the record batch: a compression flag over plain bytes, a count or length that lies (CRC made valid).
# (benchmarks/fuzz/mutate.py, _records: the change in bits 0-2, its argument in 3-10, a stale CRC in 11-13.)
BATCH_CHANGES = st.builds(
    lambda change, argument, crc: change | argument << 3 | crc << 11,
    st.integers(0, 4),
    st.integers(0, 255),
    st.integers(0, 7),
)
BATCH_MUTATIONS = st.lists(
    st.tuples(st.just(RECORDS), st.integers(0, 2**32 - 1), BATCH_CHANGES), min_size=1, max_size=2
)


@settings(settings.get_profile("fuzz"), max_examples=300)
@given(
    produce=PRODUCES,
    seed=SEEDS,
    mutations=BATCH_MUTATIONS,
    reads=st.lists(st.tuples(READS, SEEDS, st.sampled_from([None, 0, 1_700_000_000_000])), max_size=3),
)
def test_whatever_a_produce_stored_reads_back(
    guard: Guard,
    produce: tuple[int, int],
    seed: int,
    mutations: list[Mutation],
    reads: list[tuple[tuple[int, int], int, int | None]],
) -> None:
    """A Produce whose batch lies inside (issue 14, item 6: a gzip flag on plain records, CRC valid), then
    ListOffsets and Fetch aimed at the partition it wrote: the broker refuses the batch (CORRUPT_MESSAGE) or
    stores what it can read back; no read may fail on what was stored."""
    r = random.Random(seed)
    body = build_request(r, *produce)
    topic, partition = "topic", r.randint(0, 2)
    frames = [apply(encode(aimed_at(body, topic, partition), 0), mutations)]
    for correlation_id, (api_version, read_seed, timestamp) in enumerate(reads, start=1):
        read = aimed_at(build_request(random.Random(read_seed), *api_version), topic, partition, timestamp)
        frames.append(encode(read, correlation_id).payload)
    result = guard.session([(frame, 0) for frame in frames])
    assert result["error"] is None, failure(result, frames)
