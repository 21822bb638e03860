"""``BodyFraming`` with bytes alone: chunk sizes past the limit are seen in step with the parser's requests, across
reads and pipelined requests, and whatever cannot be followed turns the following off."""

from __future__ import annotations

from broker.control.body_framing import BodyFraming, Framed

LIMIT = 1000
HEAD = b"POST /v1/faults HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunked_request(body: str = "body") -> Framed[str]:
    return Framed(body, chunked=True, content_length=None, upgrade=False)


def test_a_size_line_past_the_limit_names_its_body_at_once() -> None:
    framing: BodyFraming[str] = BodyFraming(LIMIT)
    assert framing.follow(HEAD + b"3e9\r\nabc", [chunked_request()]) == "body"
    assert framing.declared == 1001
    assert framing.lost  # nothing more is followed: the connection ends with the 413


def test_sizes_add_up_across_chunks_and_reads() -> None:
    framing: BodyFraming[str] = BodyFraming(LIMIT)
    assert framing.follow(HEAD + b"1f4\r\n" + b"x" * 300, [chunked_request()]) is None
    assert framing.follow(b"x" * 200 + b"\r\n1f", []) is None  # a size line split across reads
    assert framing.follow(b"5;ext=1\r\n", []) == "body"
    assert framing.declared == 500 + 0x1F5


def test_a_body_within_the_limit_then_the_next_request_is_followed() -> None:
    framing: BodyFraming[str] = BodyFraming(LIMIT)
    within = HEAD + b"3e8\r\n" + b"x" * 1000 + b"\r\n0\r\nTrailer: t\r\n\r\n"
    # Then 7 bytes of Content-Length body that look like chunks, and an empty line before the next request.
    length = b"POST /v1/faults HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\n0\r\n\r\n\r\n"
    requests = [chunked_request("first"), Framed("second", False, 7, False), chunked_request("third")]
    assert framing.follow(within + length + b"\r\n" + HEAD + b"3e9\r\n", requests) == "third"


def test_a_bad_chunk_size_is_left_to_the_parser() -> None:
    framing: BodyFraming[str] = BodyFraming(LIMIT)
    assert framing.follow(HEAD + b"zz\r\nffffffff\r\n", [chunked_request()]) is None
    assert framing.lost


def test_a_header_end_the_parser_made_no_request_of_stops_the_following() -> None:
    """The parser refused the request (None), or held the bytes back (no request at all)."""
    for requests in ([None], []):
        framing: BodyFraming[str] = BodyFraming(LIMIT)
        assert framing.follow(HEAD + b"ffffffff\r\n", requests) is None
        assert framing.lost


def test_a_request_whose_header_end_was_not_seen_stops_the_following() -> None:
    framing: BodyFraming[str] = BodyFraming(LIMIT)
    assert framing.follow(b"POST / HTTP/1.1\r\n", [chunked_request()]) is None
    assert framing.lost


def test_an_upgrade_stops_the_following() -> None:
    framing: BodyFraming[str] = BodyFraming(LIMIT)
    assert framing.follow(HEAD + b"ffffffff\r\n", [Framed("body", True, None, upgrade=True)]) is None
    assert framing.lost
