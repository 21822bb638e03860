"""A partition's segment files (issue 27; broker/storage/disk/segments.py): batches back byte for byte, a roll at
segment.bytes, a torn tail cut with one log line, a corrupt batch with data after it refused with file and byte,
and retention deleting whole segments below the log start offset, through a real broker and a restart."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from broker.storage.disk.errors import CorruptEntry
from broker.storage.disk.fsync import FsyncPolicy
from broker.storage.disk.segments import SegmentLog
from broker.storage.records import restamp
from tests.durability.broker_process import BrokerProcess
from tests.storage import CRC_AT, make_batch


def stored(base_offset: int, count: int = 3) -> bytes:
    """A batch as the broker stores it: its base offset and leader epoch in place."""
    return restamp(make_batch(count, value=b"v" * 40), base_offset, 0)


def segments(directory: Path, segment_bytes: int = 1 << 20) -> SegmentLog:
    return SegmentLog(directory, FsyncPolicy(), segment_bytes)


def test_batches_come_back_byte_for_byte_across_a_roll(tmp_path: Path) -> None:
    batches = [stored(offset) for offset in range(0, 30, 3)]
    one = segments(tmp_path, segment_bytes=len(batches[0]) * 4)
    for offset, batch in zip(range(0, 30, 3), batches, strict=True):
        one.append(offset, batch)
    one.close()
    assert sorted(p.name for p in tmp_path.glob("*.log")) == [f"{b:020d}.log" for b in (0, 12, 24)]
    two = segments(tmp_path, segment_bytes=len(batches[0]) * 4)
    assert list(two.batches()) == batches
    two.append(30, stored(30))  # a new process goes on in the last segment, which is not full
    two.close()
    assert sorted(p.name for p in tmp_path.glob("*.log"))[-1] == f"{24:020d}.log"
    assert list(segments(tmp_path).batches())[-1] == stored(30)


def test_a_torn_tail_is_cut_with_one_line(tmp_path: Path) -> None:
    one = segments(tmp_path)
    one.append(0, stored(0))
    one.append(3, stored(3))
    one.close()
    path = tmp_path / f"{0:020d}.log"
    whole = path.stat().st_size
    with open(path, "r+b") as file:
        file.truncate(whole - 5)  # the kill cut the last batch
    with capture_logs() as logs:
        assert list(segments(tmp_path).batches()) == [stored(0)]
    assert [line["event"] for line in logs] == ["data directory: torn tail truncated"]
    assert logs[0]["offset"] == len(stored(0)) and logs[0]["bytes_dropped"] == len(stored(3)) - 5
    assert path.stat().st_size == len(stored(0))
    assert list(segments(tmp_path).batches()) == [stored(0)]  # and the next start finds it whole


def test_a_corrupt_batch_with_data_after_it_stops_the_start(tmp_path: Path) -> None:
    one = segments(tmp_path)
    for offset in (0, 3, 6):
        one.append(offset, stored(offset))
    one.close()
    path = tmp_path / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    at = len(stored(0))
    struct.pack_into(">I", data, at + CRC_AT, 12345)  # the middle batch's CRC
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptEntry, match=rf"{path}: corrupt batch at byte {at} \(CRC mismatch\)"):
        list(segments(tmp_path).batches())
    assert path.read_bytes() == bytes(data)  # nothing cut


def test_an_earlier_segment_cut_short_is_corrupt_not_torn(tmp_path: Path) -> None:
    size = len(stored(0))
    one = segments(tmp_path, segment_bytes=size)
    one.append(0, stored(0))
    one.append(3, stored(3))
    one.close()
    first = tmp_path / f"{0:020d}.log"
    with open(first, "r+b") as file:
        file.truncate(size - 1)
    with pytest.raises(CorruptEntry, match="corrupt batch at byte 0 \\(cut short\\)"):
        list(segments(tmp_path).batches())


def test_delete_before_drops_whole_segments_and_never_the_last(tmp_path: Path) -> None:
    size = len(stored(0))
    one = segments(tmp_path, segment_bytes=size)
    for offset in range(0, 15, 3):
        one.append(offset, stored(offset))
    one.delete_before(7)  # offsets 0-5 are below: segments 0 and 3 go, 6 (holding 7) stays
    assert sorted(int(p.stem) for p in tmp_path.glob("*.log")) == [6, 9, 12]
    one.delete_before(100)
    assert sorted(int(p.stem) for p in tmp_path.glob("*.log")) == [12]
    one.close()


def test_retention_deletes_segment_files_and_the_start_survives_a_restart(tmp_path: Path) -> None:
    """DeleteRecords through a real client moves the log start: the segments wholly below it are gone from the
    directory, and a SIGKILLed broker comes back with that log start offset and the records above it."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        # Small segments: every flushed batch of 40 records (about 4.6 KB) rolls one.
        admin.create_topics([NewTopic("r", 1, config={"segment.bytes": "4096"})])["r"].result(20)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
        for _ in range(10):
            for _ in range(40):
                producer.produce("r", b"x" * 100, partition=0)
            producer.flush(20)
        directory = next((tmp_path / "data" / "logs").glob("r-0"))
        before = sorted(int(p.stem) for p in directory.glob("*.log"))
        assert len(before) >= 5, before
        admin.delete_records([TopicPartition("r", 0, 250)])[TopicPartition("r", 0, 250)].result(20)
        after = sorted(int(p.stem) for p in directory.glob("*.log"))
        assert after[0] <= 250 and all(base > 250 for base in after[1:]), after
        assert len(after) < len(before)

        broker.kill()
        broker.start()
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "r-reader"})
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition("r", 0), timeout=20)
        finally:
            consumer.close()
        assert (low, high) == (250, 400)
    finally:
        broker.stop()
