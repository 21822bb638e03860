"""Decompressing a record batch's records section, with a ceiling on what it may inflate to.

Kafka's broker decompresses every compressed batch a producer sends (LogValidator walks its records to validate
them and assign offsets), so a payload that is not what its codec flag says is refused, not stored. Kafka streams
the records and holds none of them; this broker inflates the section whole, so ``limit`` bounds what a small
payload may grow to (a decompression bomb): the output never passes it, and memory for it is taken only as the
codec writes (an anonymous map, whose pages the kernel commits on first write and takes back on close).

gzip is the standard library's zlib. snappy, lz4 and zstd come from cramjam (the Rust codecs aiokafka also uses:
one well-kept wheel instead of three bindings), imported on first use so a broker that never sees them starts
without loading it; where it is missing, those batches are refused (Unsupported), never stored unread. Each codec
reads what Kafka's own reader accepts:
- gzip (GZIPInputStream): one or more concatenated members; bytes after the last member that are not another
  member are ignored, as Java does.
- snappy (xerial's SnappyInputStream): its framed stream (the 8-byte magic, two version ints, then blocks each
  prefixed with a 4-byte length) or, without the magic, one raw snappy block.
- lz4 (KafkaLZ4BlockInputStream): the LZ4 frame format.
- zstd (ZstdInputStream): zstd frames.
"""

from __future__ import annotations

import functools
import mmap
import struct
import zlib
from collections.abc import Callable
from types import ModuleType
from typing import Any, Final

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES: Final = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer around deflate data, CRC checked
_CHUNK = 1 << 16
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16  # the magic, then the format version and the minimum compatible version (two int32s)
_BLOCK_LENGTH = struct.Struct(">i")
# What cramjam says when the output buffer filled before the stream ended (Rust's io::ErrorKind::WriteZero, and
# the snappy decoder's own words): the payload inflates past the limit, it is not corrupt.
_OUTPUT_FULL = ("failed to write whole buffer", "smaller than required")


class CorruptPayload(Exception):
    """The payload is not valid data of its codec (Kafka: a KafkaException from the codec's input stream)."""


class Unsupported(Exception):
    """This broker has no decoder for the codec (cramjam is not installed)."""


class TooLarge(Exception):
    """The payload inflates to more than the limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"it inflates to more than {limit} bytes")
        self.limit = limit


@functools.cache
def _load_cramjam() -> ModuleType | None:
    try:
        import cramjam  # a compiled extension: loaded when the first snappy, lz4 or zstd batch comes
    except ImportError:
        return None
    return cramjam


def _cramjam() -> ModuleType:
    module = _load_cramjam()
    if module is None:
        raise Unsupported("cramjam, which decompresses snappy, lz4 and zstd, is not installed")
    return module


def inflate(codec: int, payload: bytes | memoryview, limit: int) -> bytes:
    """The decompressed ``payload`` of ``codec`` (one of GZIP, SNAPPY, LZ4, ZSTD), at most ``limit`` bytes long.

    Raises CorruptPayload, TooLarge or Unsupported; never anything else, whatever the bytes.
    """
    if codec == GZIP:
        return _gunzip(payload, limit)
    if codec == SNAPPY:
        return _unsnappy(payload, limit)
    if codec in (LZ4, ZSTD):
        module = _cramjam()
        into = module.lz4.decompress_into if codec == LZ4 else module.zstd.decompress_into
        return _into_map(into, payload, limit)
    raise CorruptPayload(f"Unknown compression type id: {codec}")


def _gunzip(payload: bytes | memoryview, limit: int) -> bytes:
    out = bytearray()
    rest = bytes(payload)
    if not rest.startswith(_GZIP_MAGIC):
        raise CorruptPayload("Not in GZIP format")
    while rest.startswith(_GZIP_MAGIC):  # Java reads concatenated members and ignores anything else after them
        member = zlib.decompressobj(_GZIP_WBITS)
        pending = rest
        try:
            while not member.eof:
                # Never ask for more than one byte past the limit: that byte is how an overflow shows.
                chunk = member.decompress(pending, min(_CHUNK, limit + 1 - len(out)))
                out += chunk
                if len(out) > limit:
                    raise TooLarge(limit)
                pending = member.unconsumed_tail
                if not chunk and not pending:
                    raise CorruptPayload("Unexpected end of ZLIB input stream")
        except zlib.error as error:
            raise CorruptPayload(str(error)) from None
        rest = member.unused_data
    return bytes(out)


def _unsnappy(payload: bytes | memoryview, limit: int) -> bytes:
    cramjam = _cramjam()
    data = memoryview(payload)
    if bytes(data[: len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
        return _snappy_block(cramjam, data, limit)
    if len(data) < _XERIAL_HEADER:
        raise CorruptPayload("snappy: the stream header is truncated")
    out = bytearray()
    position = _XERIAL_HEADER
    while position < len(data):
        if len(data) - position < _BLOCK_LENGTH.size:
            raise CorruptPayload("snappy: a block length is truncated")
        (length,) = _BLOCK_LENGTH.unpack_from(data, position)
        position += _BLOCK_LENGTH.size
        if length < 0 or position + length > len(data):
            raise CorruptPayload(f"snappy: a block of {length} bytes runs past the stream")
        out += _snappy_block(cramjam, data[position : position + length], limit - len(out))
        position += length
    return bytes(out)


def _snappy_block(cramjam: ModuleType, block: memoryview, limit: int) -> bytes:
    # A raw snappy block starts with its uncompressed length: checked before anything is allocated.
    # Whatever a foreign decoder raises on foreign bytes means the same: the payload cannot be read.
    try:
        declared = int(cramjam.snappy.decompress_raw_len(block))
    except Exception as error:
        raise CorruptPayload(str(error)) from None
    if declared > limit:
        raise TooLarge(limit)
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as error:
        raise CorruptPayload(str(error)) from None


def _into_map(into: Callable[[Any, Any], Any], payload: bytes | memoryview, limit: int) -> bytes:
    # One byte more than the limit: a payload that fills it all is too large, one that fits leaves it unwritten.
    buffer = mmap.mmap(-1, limit + 1)
    try:
        try:
            written = int(into(payload, buffer))
        except Exception as error:
            if any(marker in str(error) for marker in _OUTPUT_FULL):
                raise TooLarge(limit) from None
            raise CorruptPayload(str(error)) from None
        if written > limit:
            raise TooLarge(limit)
        return buffer[:written]
    finally:
        buffer.close()
