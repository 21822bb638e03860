"""What a broken or hostile client does to a valid frame.

A mutation is three integers ``(op, where, what)``: hypothesis draws them (and shrinks them: fewer mutations,
smaller numbers, earlier operators), the campaign draws them from ``random.Random``, and ``apply`` turns them into
bytes the same way for both. Operators aim where Kafka's readers must refuse (``MessageDataGenerator``'s checks):
length prefixes inflated past the bytes remaining, -1 where the field is not nullable, array counts of 2^31-1 and
varint counts of 2^32-1, overlong varints, tagged fields (KIP-482) known and unknown with sizes that lie, and, inside
record batches, a compression flag on a plain payload or a count that lies, with the CRC made valid again so the
batch gets past the CRC check (issue 14, item 6).
"""

from __future__ import annotations

import itertools
import random
import struct

from crc32c import crc32c

from benchmarks.fuzz.requests import Frame

Mutation = tuple[int, int, int]

FLIP, INSERT, DELETE, TRUNCATE, LENGTH, VARINT, TAGGED, DUPLICATE, NULL, HEADER, RECORDS, APPEND = range(12)
OPERATORS = 12
NAMES = (
    "flip", "insert", "delete", "truncate", "length", "varint", "tagged", "duplicate", "null", "header",
    "records", "append",
)  # fmt: skip

_HEADER_SIZE = 8  # api key, api version, correlation id: mutated only by HEADER
_INT16_VALUES = (-1, 0x7FFF, -0x8000, 0, 1, 0x7FFE, -2)
_INT32_VALUES = (-1, 0x7FFFFFFF, -0x80000000, 0xFFFF, 0, 1, 0x0FFFFFFF, -2)
_VARINTS = (b"\x00", b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x07", b"\x80\x80\x80\x80\x80\x01", b"\xff", b"\x7f")
_TAGS = (0, 1, 2, 3, 7, 100, 0x7FFFFFFF)
# Record batch header offsets (Kafka's DefaultRecordBatch).
_BATCH_LENGTH, _MAGIC, _CRC, _ATTRIBUTES, _RECORDS_COUNT, _BATCH_HEADER = 8, 16, 17, 21, 57, 61


def random_mutations(r: random.Random, most: int = 3) -> list[Mutation]:
    return [(r.randrange(OPERATORS), r.getrandbits(32), r.getrandbits(32)) for _ in range(r.randint(1, most))]


def apply(frame: Frame, mutations: list[Mutation]) -> bytes:
    """The frame's payload with each mutation applied in turn (token offsets are those of the valid frame: after
    an insertion or a deletion they point a little off, which is one more way to be wrong)."""
    data = bytearray(frame.payload)
    for op, where, what in mutations:
        _OPERATIONS[op % OPERATORS](data, frame.tokens, where, what)
    return bytes(data)


def _position(data: bytearray, where: int) -> int:
    """A position in the body (past the fixed part of the header), or 0 for a frame that has none."""
    if len(data) <= _HEADER_SIZE:
        return 0
    return _HEADER_SIZE + where % (len(data) - _HEADER_SIZE)


def _flip(data: bytearray, tokens: tuple[tuple[int, int], ...], where: int, what: int) -> None:
    if len(data) > _HEADER_SIZE:
        data[_position(data, where)] ^= 1 << (what % 8)


def _insert(data: bytearray, tokens: tuple[tuple[int, int], ...], where: int, what: int) -> None:
    data[_position(data, where) : _position(data, where)] = what.to_bytes(4, "big")[: 1 + what % 4]


def _delete(data: bytearray, tokens: tuple[tuple[int, int], ...], where: int, what: int) -> None:
    if len(data) > _HEADER_SIZE:
        start = _position(data, where)
        del data[start : start + 1 + what % 8]


def _truncate(data: bytearray, tokens: tuple[tuple[int, int], ...], where: int, what: int) -> None:
    del data[where % (len(data) + 1) :]


def _pick(tokens: tuple[tuple[int, int], ...], where: int, widths: tuple[int, ...]) -> tuple[int, int] | None:
    candidates = [token for token in tokens if token[1] in widths and token[0] >= _HEADER_SIZE]
    return candidates[where % len(candidates)] if candidates else None


def _set_int(data: bytearray, offset: int, width: int, value: int) -> None:
    if offset + width <= len(data):
        data[offset : offset + width] = (value % (1 << (8 * width))).to_bytes(width, "big")


def _length(data: bytearray, tokens: tuple[tuple[int, int], ...], where: int, what: int) -> None:
    """An int16 or int32 (a string's, bytes' or array's length, or a plain number) set to a lie."""
    token = _pick(tokens, where, (2, 4))
    if token is None:
        return
    offset, width = token
    values = _INT16_VALUES if width == 2 else _INT32_VALUES
    original = int.from_bytes(data[offset : offset + width], "big", signed=True)
    choice = what % (len(values) + 2)
    value = values[choice] if choice < len(values) else original + (1 if choice == len(values) else -1)
    _set_int(data, offset, width, value)


def _varint(data: bytearray, tokens: tuple[tuple[int, int], ...], where: int, what: int) -> None:
    """A one-byte write (a compact length, a tag count, an int8, a bool) replaced by a varint that lies."""
    token = _pick(tokens, where, (1,))
    if token is None:
        return
    offset = token[0]
    data[offset : offset + 1] = _VARINTS[what % len(_VARINTS)]


def _null(data: bytearray, tokens: tuple[tuple[int, int], ...], where: int, what: int) -> None:
    """-1 (null) where a length goes: int16, int32, or the compact 0."""
    token = _pick(tokens, where, (1, 2, 4))
    if token is not None:
        offset, width = token
        _set_int(data, offset, width, 0 if width == 1 else -1)


def _tagged(data: bytearray, tokens: tuple[tuple[int, int], ...], where: int, what: int) -> None:
    """An empty tag buffer (kio writes its count, then the empty buffer: a zero byte and a zero-length write)
    replaced by 1-3 tagged fields, known or unknown tags, sizes right or wrong."""
    spots = [
        offset
        for (offset, width), (_, next_width) in itertools.pairwise(tokens)
        if width == 1 and next_width == 0 and offset < len(data) and data[offset] == 0
    ]
    rng = random.Random(what)
    fields = bytearray([rng.randint(1, 3)])
    for _ in range(fields[0]):
        value = rng.randbytes(rng.choice((0, 1, 2, 4, 9)))
        size = len(value) if rng.random() < 0.7 else rng.choice((len(value) + 1, 0x7F, 0))
        fields += _uvarint(rng.choice(_TAGS)) + _uvarint(size) + value
    if spots:
        offset = spots[where % len(spots)]
        data[offset : offset + 1] = fields
    else:
        data += fields


def _duplicate(data: bytearray, tokens: tuple[tuple[int, int], ...], where: int, what: int) -> None:
    """A run of writes repeated (one more array element than the count says, or a field twice)."""
    body = [token for token in tokens if token[0] >= _HEADER_SIZE]
    if not body:
        return
    first = where % len(body)
    last = min(len(body) - 1, first + what % 6)
    start, end = body[first][0], body[last][0] + body[last][1]
    if end <= len(data):
        data[end:end] = data[start:end]


def _header(data: bytearray, tokens: tuple[tuple[int, int], ...], where: int, what: int) -> None:
    """The request header: api version out of range, api key unknown, client id length that lies."""
    choice = what % 4
    if choice == 0 and len(data) >= 4:
        struct.pack_into(">h", data, 2, (-1, 0x7FFF, 17, 5)[where % 4])
    elif choice == 1 and len(data) >= 2:
        struct.pack_into(">h", data, 0, (-1, 999, 0x7FFF, 36, 17)[where % 5])
    elif choice == 2 and len(data) >= 10:
        struct.pack_into(">h", data, 8, (-1, -2, 0x7FFF, 0, 100)[where % 5])
    elif len(data) >= 8:
        struct.pack_into(">i", data, 4, where - 2**31)


def _records(data: bytearray, tokens: tuple[tuple[int, int], ...], where: int, what: int) -> None:
    """Inside a record batch: a compression flag on plain records, a count or length that lies, a flipped bit;
    the CRC recomputed (usually) so that the batch is judged on what is wrong with it, not on its checksum."""
    batches = [
        offset
        for offset, width in tokens
        if width >= _BATCH_HEADER and offset + _BATCH_HEADER <= len(data) and data[offset + _MAGIC] == 2
    ]
    if not batches:
        return _flip(data, tokens, where, what)
    start = batches[where % len(batches)]
    (length,) = struct.unpack_from(">i", data, start + _BATCH_LENGTH)
    end = min(len(data), start + 12 + max(length, 0))
    # ``what``: bits 0-2 the change (mod 5), bits 3-10 its argument, bits 11-13 all set to leave the CRC stale.
    choice, argument = (what & 7) % 5, (what >> 3) & 0xFF
    if choice == 0:  # gzip, snappy, lz4, zstd or an unknown codec, over bytes that are not compressed
        attributes = struct.unpack_from(">h", data, start + _ATTRIBUTES)[0] & ~7
        struct.pack_into(">h", data, start + _ATTRIBUTES, attributes | (1 + argument % 7))
    elif choice == 1:
        struct.pack_into(">I", data, start + _RECORDS_COUNT, (0x7FFFFFFF, 0xFFFFFFFF, 0, 1000)[argument % 4])
    elif choice == 2:
        lie = (0x7FFFFFFF, -1, 0, length + 1)[argument % 4]
        struct.pack_into(">I", data, start + _BATCH_LENGTH, lie % 2**32)
    elif choice == 3 and end > start + _BATCH_HEADER:
        data[start + _BATCH_HEADER + argument % (end - start - _BATCH_HEADER)] ^= 0x55
    else:
        data[start + _MAGIC] = (0, 1, 3)[argument % 3]
    if (what >> 11) & 7 != 7:  # mostly: a valid CRC over the bad contents
        struct.pack_into(">I", data, start + _CRC, crc32c(bytes(data[start + _ATTRIBUTES : end])))
    return None


def _append(data: bytearray, tokens: tuple[tuple[int, int], ...], where: int, what: int) -> None:
    data += what.to_bytes(4, "big")[: 1 + where % 4]


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_OPERATIONS = (
    _flip, _insert, _delete, _truncate, _length, _varint, _tagged, _duplicate, _null, _header, _records, _append,
)  # fmt: skip
