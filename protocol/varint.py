"""Kafka's unsigned varint (UNSIGNED_VARINT in the protocol guide: 7 bits a byte, low bits first), written by hand
where an answer or an edited request is built without kio (bounds.py, group_answers.py, api_versions.py), and
under the signed (zigzag) varints of the control records broker/storage/control.py writes."""

from __future__ import annotations


def encode_uvarint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))  # compact lengths and counts below 127: the usual case, one byte
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
