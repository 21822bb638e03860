"""The bounded pre-pass (protocol/bounds.py), property by property, for every API and version the broker serves.

Requests are generated from kio's own schema classes (hypothesis' ``from_type``), encoded with kio's writers, then
cut short, inflated and mutated. Seeds are fixed (``derandomize``) and examples bounded, so this runs the same in a
few seconds every time. The process-killing case (a claimed count kio would allocate for) is checked in a child
process whose address space is capped: an allocation the pre-pass let through would abort it.
"""

from __future__ import annotations

import contextlib
import io
import os
import struct
import subprocess
import sys
from dataclasses import fields
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field, is_optional
from kio.static.primitive import i16, i32

from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from protocol.bounds import check_request, checker, plan_of
from protocol.codec import decode_request
from protocol.errors import MalformedRequest, ProtocolError
from protocol.heartbeat import decode_heartbeat
from tests.conftest import ROOT

EVERY_VERSION = [(api, version) for api, (low, high) in SUPPORTED_VERSIONS.items() for version in range(low, high + 1)]
IDS = [f"{ApiKey(api).name}-v{version}" for api, version in EVERY_VERSION]
BOUNDED = settings(
    derandomize=True,
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def encode(body: Any, client_id: str | None = "bounds") -> bytes:
    """A request frame as the broker's FrameReader hands it over: header and body, no size prefix."""
    header_cls = type(body).__header_schema__
    header = header_cls(
        request_api_key=i16(body.__api_key__),
        request_api_version=i16(body.__version__),
        correlation_id=i32(42),
        client_id=client_id,
    )
    buffer = io.BytesIO()
    entity_writer(header_cls)(buffer, header)
    entity_writer(type(body))(buffer, body)
    return buffer.getvalue()


def values_of(cls: type) -> st.SearchStrategy[Any]:
    """Instances of a kio entity class, every field drawn from its type; arrays of up to 3, short strings."""
    drawn: dict[str, st.SearchStrategy[Any]] = {}
    for f in fields(cls):
        kind = classify_field(f)
        if isinstance(kind, EntityField):
            value = values_of(kind.type_)
        elif isinstance(kind, EntityTupleField):
            value = st.lists(values_of(kind.type_), max_size=3).map(tuple)
        elif isinstance(kind, PrimitiveTupleField):
            value = st.lists(primitive(kind.type_), max_size=3).map(tuple)
        else:
            value = primitive(kind.type_)
        drawn[f.name] = st.none() | value if is_optional(f) else value
    return st.builds(cls, **drawn)


def primitive(kind: type) -> st.SearchStrategy[Any]:
    if issubclass(kind, str):
        return st.text(max_size=8)
    if issubclass(kind, bytes):
        return st.binary(max_size=12)
    return st.from_type(kind)


def request_frames(api: int, version: int) -> st.SearchStrategy[bytes]:
    return values_of(load_request_schema(api, version)).map(encode)


def check(frame: bytes) -> bytes:
    schema = load_request_schema(*struct.unpack_from(">hh", frame))
    return check_request(frame, checker(plan_of(schema.__header_schema__), plan_of(schema)))


def no_forbidden_null(entity: Any) -> None:
    """Every field a version does not make nullable holds a value (defect 4: a null array reached the handlers)."""
    for f in fields(entity):
        value = getattr(entity, f.name)
        if value is None:
            assert is_optional(f) or "tag" in f.metadata, f"{type(entity).__name__}.{f.name} is null"
            continue
        kind = classify_field(f)
        if isinstance(kind, EntityField):
            no_forbidden_null(value)
        elif isinstance(kind, EntityTupleField):
            for item in value:
                no_forbidden_null(item)


# -- valid requests pass, unchanged --------------------------------------------------------------------------------


@pytest.mark.parametrize(("api", "version"), EVERY_VERSION, ids=IDS)
def test_a_valid_request_passes_unchanged_and_decodes(api: int, version: int) -> None:
    @BOUNDED
    @given(request_frames(api, version))
    def valid(frame: bytes) -> None:
        assert check(frame) is frame
        decoded = decode_request(frame)
        assert (decoded.api_key, decoded.api_version, decoded.correlation_id) == (api, version, 42)
        no_forbidden_null(decoded.body)

    valid()


# -- cut short: refused, whatever the cut --------------------------------------------------------------------------


@pytest.mark.parametrize(("api", "version"), EVERY_VERSION, ids=IDS)
def test_every_truncation_is_refused(api: int, version: int) -> None:
    @BOUNDED
    @given(request_frames(api, version))
    def truncated(frame: bytes) -> None:
        for cut in range(8, len(frame)):
            with pytest.raises(MalformedRequest):
                decode_request(frame[:cut])

    truncated()


# -- inflated lengths: refused before kio allocates ------------------------------------------------------------------

# What a lying length looks like in each encoding: int16 and int32 lengths, compact (uvarint) lengths up to 2^32-1.
INFLATED = [
    struct.pack(">h", 0x7FFF),
    struct.pack(">i", 0x7FFFFFFF),
    struct.pack(">i", 0x10000),
    bytes.fromhex("ffffffff0f"),
    bytes.fromhex("ffff03"),
    bytes.fromhex("8080808008"),
]


def inflations(frame: bytes) -> list[bytes]:
    """The frame with each inflated length written over each position past the header's fixed part."""
    return [
        frame[:position] + lie + frame[position + len(lie) :]
        for position in range(10, len(frame))
        for lie in INFLATED
        if position + len(lie) <= len(frame)
    ]


def decodes_or_refuses(frame: bytes) -> None:
    """A mutated frame: refused with a protocol error, or decoded into a body with no forbidden null. A frame the
    pre-pass accepts must never be one kio reads past the end of (that would mean the two disagree on where a field
    starts, and kio could meet a length the pre-pass never checked)."""
    api, version = struct.unpack_from(">hh", frame)
    low, high = SUPPORTED_VERSIONS.get(api, (0, -1))
    if not low <= version <= high:  # the header itself was hit: refused, or a too-new ApiVersions answered
        with contextlib.suppress(ProtocolError):
            decode_request(frame)
        return
    try:
        check(frame)
    except MalformedRequest:
        return
    try:
        decoded = decode_request(frame)
    except ProtocolError as error:
        assert "BufferUnderflow" not in str(error) and "negative" not in str(error).lower(), error
        return
    if decoded.body is not None:
        no_forbidden_null(decoded.body)


@pytest.mark.parametrize(("api", "version"), EVERY_VERSION, ids=IDS)
def test_an_inflated_length_anywhere_is_refused_or_harmless(api: int, version: int) -> None:
    @settings(BOUNDED, max_examples=3)
    @given(request_frames(api, version))
    def inflated(frame: bytes) -> None:
        for mutated in inflations(frame):
            decodes_or_refuses(mutated)

    inflated()


@pytest.mark.parametrize(("api", "version"), EVERY_VERSION, ids=IDS)
def test_random_byte_mutations_are_refused_or_harmless(api: int, version: int) -> None:
    @settings(BOUNDED, max_examples=25)
    @given(request_frames(api, version), st.data())
    def mutated(frame: bytes, data: st.DataObject) -> None:
        edits = data.draw(st.lists(st.tuples(st.integers(0, len(frame) - 1), st.integers(0, 255)), max_size=4))
        changed = bytearray(frame)
        for position, value in edits:
            changed[position] = value
        decodes_or_refuses(bytes(changed))

    mutated()


# -- the reproducers of issue 14 -------------------------------------------------------------------------------------


def test_defect_1_a_claimed_count_of_four_billion_groups_is_refused() -> None:
    frame = bytes.fromhex("00000012000f00050000000100017800ffffffff0f00")[4:]
    with pytest.raises(MalformedRequest, match="Tried to allocate a collection of size 4294967294 for field groups"):
        decode_request(frame)


def test_defect_4_a_null_array_the_version_does_not_allow_is_refused() -> None:
    frame = bytes.fromhex("0000000f000f000000000001000178ffffffff")[4:]
    with pytest.raises(MalformedRequest, match="non-nullable field groups was serialized as null"):
        decode_request(frame)


def test_a_null_array_the_version_allows_is_read_as_null() -> None:
    """Metadata v1+ says null for every topic (Kafka's MetadataRequest.json: nullableVersions 1+)."""
    frame = struct.pack(">hhih", ApiKey.METADATA, 1, 9, 1) + b"x" + struct.pack(">i", -1)
    assert decode_request(frame).body.topics is None


def test_an_array_is_held_to_its_elements_least_size() -> None:
    """OffsetFetch v1's partition indexes are int32: 3 claimed with 8 bytes left is a lie (Kafka's own check,
    count > bytes remaining, would let kio allocate for it)."""
    body = struct.pack(">h", 1) + b"g" + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 3)
    frame = struct.pack(">hhih", ApiKey.OFFSET_FETCH, 1, 9, 1) + b"x" + body + b"\x00" * 8
    with pytest.raises(MalformedRequest, match="collection of size 3 for field partition_indexes"):
        decode_request(frame)
    assert decode_request(frame + b"\x00" * 4).body.topics[0].partition_indexes == (0, 0, 0)


def test_a_compact_string_longer_than_kafka_allows_is_refused() -> None:
    length = bytes.fromhex("818002")  # 32,769 - 1 = 32,768 bytes
    frame = struct.pack(">hhih", ApiKey.DESCRIBE_GROUPS, 5, 9, 1) + b"x\x00" + b"\x02" + length + b"g" * 32768
    with pytest.raises(MalformedRequest, match="string field groups had invalid length 32768"):
        decode_request(frame + b"\x00\x00")


def test_any_negative_length_is_null_as_kafka_reads_it() -> None:
    """Kafka's readers take any negative length as null (``if (length < 0)``): refused where null is not allowed,
    read as null where it is (kio only knows -1: the pre-pass writes it so)."""
    refused = struct.pack(">hhih", ApiKey.DESCRIBE_GROUPS, 0, 9, 1) + b"x" + struct.pack(">i", -2)
    with pytest.raises(MalformedRequest, match="non-nullable field groups was serialized as null"):
        decode_request(refused)
    all_topics = struct.pack(">hhih", ApiKey.METADATA, 1, 9, -7) + struct.pack(">i", -(2**31))
    decoded = decode_request(all_topics)
    assert (decoded.client_id, decoded.body.topics) == ("", None)


def test_an_endless_varint_is_refused() -> None:
    frame = struct.pack(">hhih", ApiKey.DESCRIBE_GROUPS, 5, 9, 1) + b"x\x00" + b"\xff" * 12
    with pytest.raises(MalformedRequest, match="varint longer than 5 bytes"):
        decode_request(frame)


# -- tagged fields (KIP-482) -------------------------------------------------------------------------------------


def fetch_v12(tags: bytes) -> bytes:
    """Fetch v12 with an empty topic list and the given top-level tag buffer."""
    fixed = struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1)
    return struct.pack(">hhih", ApiKey.FETCH, 12, 9, 1) + b"x\x00" + fixed + b"\x01\x01\x01" + tags


def fetch_v15(tags: bytes) -> bytes:
    """Fetch v15 (no replica id any more; replica_state is tag 1) with an empty topic list and these tags."""
    fixed = struct.pack(">iiibii", 500, 1, 1 << 20, 0, 0, -1)
    return struct.pack(">hhih", ApiKey.FETCH, 15, 9, 1) + b"x\x00" + fixed + b"\x01\x01\x01" + tags


def test_unknown_tags_are_cut_out_and_known_ones_kept() -> None:
    cluster = b"\x00\x04" + b"\x04abc"  # tag 0 (cluster_id), 4 bytes: compact string "abc"
    unknown = b"\x07\x02zz"  # tag 7, unknown to Fetch v12
    frame = fetch_v12(b"\x02" + cluster + unknown)
    assert check(frame) == fetch_v12(b"\x01" + cluster)
    assert decode_request(frame).body.cluster_id == "abc"


def test_unknown_tags_inside_a_known_tagged_struct_are_cut_out_too() -> None:
    """Fetch v15's replica_state (tag 1) is a struct with a tag buffer of its own: an unknown tag in there is cut
    out, and the struct's declared size shrinks with it."""
    replica_state = struct.pack(">iq", 3, 9)
    unknown = b"\x01" + b"\x07\x01z"
    frame = fetch_v15(b"\x01" + b"\x01" + bytes([len(replica_state) + len(unknown)]) + replica_state + unknown)
    assert check(frame) == fetch_v15(b"\x01\x01" + bytes([len(replica_state) + 1]) + replica_state + b"\x00")
    state = decode_request(frame).body.replica_state
    assert (state.replica_id, state.replica_epoch) == (3, 9)


def test_a_known_tag_that_does_not_fill_its_size_is_refused() -> None:
    frame = fetch_v12(b"\x01" + b"\x00\x06" + b"\x04abc" + b"zz")
    with pytest.raises(MalformedRequest, match="tagged field 0 does not fill its 6 bytes"):
        decode_request(frame)


def test_a_tag_longer_than_the_frame_is_refused() -> None:
    with pytest.raises(MalformedRequest, match="tagged field 7 of 100 bytes ends past the end of the frame"):
        decode_request(fetch_v12(b"\x01\x07\x64zz"))


def test_a_tag_count_larger_than_the_frame_is_refused() -> None:
    with pytest.raises(MalformedRequest, match="tagged fields claimed"):
        decode_request(fetch_v12(b"\xff\xff\xff\xff\x0f"))


# -- the Heartbeat fast path is bounded by hand ----------------------------------------------------------------------


@pytest.mark.parametrize("version", range(SUPPORTED_VERSIONS[ApiKey.HEARTBEAT][1] + 1))
def test_the_heartbeat_fast_path_never_raises_and_agrees_with_the_generic_path(version: int) -> None:
    high = SUPPORTED_VERSIONS[ApiKey.HEARTBEAT][1]

    @settings(BOUNDED, max_examples=150)
    @given(request_frames(ApiKey.HEARTBEAT, version), st.data())
    def mutated(frame: bytes, data: st.DataObject) -> None:
        edits = data.draw(st.lists(st.tuples(st.integers(0, len(frame) - 1), st.integers(0, 255)), max_size=3))
        cut = data.draw(st.integers(0, len(frame)))
        changed = bytearray(frame[:cut] if data.draw(st.booleans()) else frame)
        for position, value in edits:
            if position < len(changed):
                changed[position] = value
        fast = decode_heartbeat(bytes(changed), high)  # must not raise, whatever the bytes
        if fast is None:
            return
        try:
            generic = decode_request(bytes(changed))
        except MalformedRequest as error:
            # The one leniency of the fast path, Kafka's: a client id that is not UTF-8 is read with replacement
            # characters (kio refuses it, and so the generic path closes the connection).
            assert "InvalidUnicode" in str(error), error
            return
        body = generic.body
        _, correlation_id, client_id, group_id, generation_id, member_id, instance_id = fast
        assert (correlation_id, client_id.decode(), group_id, generation_id, member_id) == (
            generic.correlation_id,
            generic.client_id,
            body.group_id,
            body.generation_id,
            body.member_id,
        )
        assert instance_id == getattr(body, "group_instance_id", None)

    mutated()


# -- no allocation for a lie: in a child process whose address space is capped -----------------------------------

_CHILD = """
import re, resource
from tests.protocol.test_bounds import child_campaign
# Room for 1 GiB more than the child holds once everything is imported: far less than any lie asks for.
size = int(re.search(r"VmSize:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024
resource.setrlimit(resource.RLIMIT_AS, (size + (1 << 30), size + (1 << 30)))
child_campaign()
print("survived")
"""


def child_campaign() -> None:
    """Every API and version: the reproducer's shape (an inflated count) at every position of a valid frame."""
    for api, version in EVERY_VERSION:

        @settings(BOUNDED, max_examples=2)
        @given(request_frames(api, version))
        def inflated(frame: bytes) -> None:
            for mutated in inflations(frame):
                decodes_or_refuses(mutated)

        inflated()
    decodes_or_refuses(bytes.fromhex("00000012000f00050000000100017800ffffffff0f00")[4:])


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is what makes a huge allocation fail here")
def test_no_inflated_length_makes_kio_allocate_for_it() -> None:
    """kio's native reader aborts the process (SIGABRT, not an exception) when an allocation fails: with 1 GiB of
    address space above what the child holds, a count kio reserved room for would end it."""
    result = subprocess.run(
        [sys.executable, "-c", _CHILD],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0 and "survived" in result.stdout, result.stderr[-3000:]
