"""FrameReader (protocol/framing.py) over any byte stream cut at any points: it yields exactly the frames the
stream holds, raises FrameError (with the frames before the bad bytes) for a size Kafka refuses, and never
buffers more than one frame's worth. Pure Python with bounded inputs: run in the test process."""

from __future__ import annotations

import itertools
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.framing import FrameError, FrameReader

MAX_SIZE = 64

PAYLOADS = st.lists(st.binary(max_size=MAX_SIZE), max_size=8)
BAD_SIZES = st.one_of(st.none(), st.integers(-(2**31), -1), st.integers(MAX_SIZE + 1, 2**31 - 1))


@settings(settings.get_profile("fuzz"), max_examples=400)
@given(payloads=PAYLOADS, bad=BAD_SIZES, tail=st.binary(max_size=12), cuts=st.lists(st.integers(0, 1000)))
def test_frame_reader_yields_the_frames_of_any_stream_cut_anywhere(
    payloads: list[bytes], bad: int | None, tail: bytes, cuts: list[int]
) -> None:
    stream = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    if bad is not None:
        stream += struct.pack(">i", bad) + tail
    else:
        stream += tail[:3]  # an incomplete size prefix: waits for more
    points = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    reader = FrameReader(MAX_SIZE)
    frames: list[bytes] = []
    error: FrameError | None = None
    for start, end in itertools.pairwise(points):
        try:
            frames += reader.feed(stream[start:end])
        except FrameError as refused:
            error = refused
            frames += refused.frames
            break
        assert reader.buffered <= 4 + MAX_SIZE + (end - start)
    assert frames == payloads
    assert (error is not None) == (bad is not None)
    if error is not None:
        assert str(bad) in str(error)
