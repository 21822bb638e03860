"""The coordinator journal and the data directory (issue 27): round trips, atomic entries, a torn tail cut with one
log line, damage in the middle refused with file and byte, compaction, the lock, the cluster id, fsync modes, and
a SIGKILLed writer whose every acknowledged put is there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from broker.changes import Change
from broker.storage.disk.datadir import DataDir
from broker.storage.disk.errors import CorruptEntry, DataDirError
from broker.storage.disk.fsync import FsyncPolicy
from broker.storage.disk.journal import JOURNAL, SNAPSHOT, Journal, frame


def journal(path: Path, **kwargs: int) -> Journal:
    return Journal(path, FsyncPolicy(), **kwargs)


def test_puts_and_deletes_come_back_in_first_put_order(tmp_path: Path) -> None:
    one = journal(tmp_path)
    one.put("offsets.commit", ("g", "t", 0), {"offset": 1})
    one.put("classic.group", ("g",), {"generation": 1, "members": [{"id": "m"}]})
    one.put("offsets.commit", ("g", "t", 0), {"offset": 2})
    one.put("offsets.commit", ("g", "t", 1), {"offset": 5})
    one.delete("offsets.commit", ("g", "t", 1))
    size = one.size
    one.put("offsets.commit", ("g", "t", 0), {"offset": 2})  # unchanged: nothing written
    assert one.size == size
    one.close()
    two = journal(tmp_path)
    assert two.changes() == [
        Change("offsets.commit", ("g", "t", 0), {"offset": 2}),
        Change("classic.group", ("g",), {"generation": 1, "members": [{"id": "m"}]}),
    ]
    assert two.changes("classic.") == [two.changes()[1]]
    assert two.loaded_entries == 5 and two.truncated_tail == 0


def test_an_atomic_block_is_one_entry_all_or_nothing(tmp_path: Path) -> None:
    one = journal(tmp_path)
    one.put("a.x", ("before",), {"v": 0})
    kept = one.size
    with one.atomic():
        for i in range(10):
            one.put("a.x", (i,), {"v": i})
        assert one.size == kept  # nothing written until the block ends
    one.close()
    path = tmp_path / JOURNAL
    assert journal(tmp_path).loaded_entries == 2
    with open(path, "r+b") as file:
        file.truncate(path.stat().st_size - 3)  # the block's entry cut by the kill: none of it survives
    assert [c.key for c in journal(tmp_path).changes()] == [("before",)]


@pytest.mark.parametrize("damage", ["cut 1", "cut 9", "cut most", "crc"])
def test_a_torn_tail_is_truncated_with_one_log_line(
    tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    one = journal(tmp_path)
    for i in range(5):
        one.put("a.x", (i,), {"v": i})
    one.close()
    path = tmp_path / JOURNAL
    data = path.read_bytes()
    last = len(frame([Change("a.x", (4,), {"v": 4})]))
    if damage == "crc":
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
    else:
        cut = {"cut 1": 1, "cut 9": 9, "cut most": last - 2}[damage]
        path.write_bytes(data[:-cut])
    two = journal(tmp_path)
    assert [c.key for c in two.changes()] == [(0,), (1,), (2,), (3,)]
    assert two.truncated_tail > 0 and path.stat().st_size == len(data) - last
    said = capsys.readouterr()
    assert (said.out + said.err).count("torn tail truncated") == 1, said
    two.put("a.x", (9,), {"v": 9})  # appends go on after the cut
    two.close()
    assert [c.key for c in journal(tmp_path).changes()][-1] == (9,)


def test_a_corrupt_entry_in_the_middle_stops_the_load_naming_file_and_byte(tmp_path: Path) -> None:
    one = journal(tmp_path)
    for i in range(5):
        one.put("a.x", (i,), {"v": i})
    one.close()
    path = tmp_path / JOURNAL
    data = bytearray(path.read_bytes())
    second = len(frame([Change("a.x", (0,), {"v": 0})]))
    data[second + 12] ^= 0xFF  # inside the second entry's payload: its CRC fails, valid entries follow
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptEntry, match=rf"{JOURNAL}: corrupt entry at byte {second} \(CRC mismatch\)"):
        journal(tmp_path)
    assert path.read_bytes() == bytes(data)  # nothing dropped, nothing truncated


def test_an_unknown_version_is_refused(tmp_path: Path) -> None:
    import struct

    from broker.storage.records import crc32c

    body = bytes([7]) + b"[]"
    (tmp_path / JOURNAL).write_bytes(struct.pack(">II", len(body), crc32c(body)) + body)
    with pytest.raises(CorruptEntry, match="unknown version 7"):
        journal(tmp_path)


def test_compaction_bounds_the_journal_and_keeps_the_map(tmp_path: Path) -> None:
    one = journal(tmp_path, compact_bytes=20_000)
    for i in range(20_000):
        one.put("offsets.commit", ("g", "t", i % 7), {"offset": i})
    one.delete("offsets.commit", ("g", "t", 6))
    assert one.compactions > 10
    assert (tmp_path / JOURNAL).stat().st_size <= 20_000 + 200
    one.close()
    two = journal(tmp_path)
    assert {c.key[2]: c.value for c in two.changes()} == {
        p: {"offset": max(i for i in range(20_000) if i % 7 == p)} for p in range(6)
    }


def test_a_crash_between_the_snapshot_rename_and_the_truncate_loads_the_same_map(tmp_path: Path) -> None:
    one = journal(tmp_path)
    for i in range(50):
        one.put("a.x", (i % 5,), {"v": i})
    one.delete("a.x", (0,))
    before = one.changes()
    saved = (tmp_path / JOURNAL).read_bytes()
    one.compact()
    one.close()
    (tmp_path / JOURNAL).write_bytes(saved)  # the truncate never happened
    assert journal(tmp_path).changes() == before
    (tmp_path / (SNAPSHOT + ".tmp")).write_bytes(b"half a snapshot")  # a compaction cut short: ignored
    assert journal(tmp_path).changes() == before


def open_dir(path: Path, cluster_id: str = "c1", given: bool = False, mode: str = "never") -> DataDir:
    return DataDir.open(path, cluster_id=cluster_id, cluster_id_given=given, fsync=FsyncPolicy(mode, 1000))


def test_one_broker_per_directory_in_this_process_and_another(tmp_path: Path) -> None:
    first = open_dir(tmp_path / "d")
    with pytest.raises(DataDirError, match=rf"is in use by another broker \(pid {os.getpid()}\)"):
        open_dir(tmp_path / "d")
    other = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(f"""
            from broker.storage.disk.datadir import DataDir
            from broker.storage.disk.fsync import FsyncPolicy
            DataDir.open({str(tmp_path / "d")!r}, cluster_id="c1", cluster_id_given=False, fsync=FsyncPolicy())
        """)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert other.returncode != 0 and "is in use by another broker" in other.stderr
    first.close()
    open_dir(tmp_path / "d").close()


def test_the_cluster_id_is_kept_and_another_one_refused(tmp_path: Path) -> None:
    first = open_dir(tmp_path, "stored-id")
    assert first.clean_shutdown  # a new directory
    first.close()
    again = open_dir(tmp_path, "random-draw")
    assert again.cluster_id == "stored-id" and again.clean_shutdown
    again.journal.put("a.x", (1,), {"v": 1})
    # no close(): the next open sees an unclean shutdown once the lock is gone
    os.close(again._lock_fd)
    again._lock_fd = -1
    killed = open_dir(tmp_path, "stored-id", given=True)
    assert not killed.clean_shutdown
    killed.close()
    with pytest.raises(DataDirError, match="belongs to cluster stored-id, not other"):
        open_dir(tmp_path, "other", given=True)


def test_a_directory_that_is_not_ours_is_refused(tmp_path: Path) -> None:
    (tmp_path / "somebody-elses.txt").write_text("x")
    with pytest.raises(DataDirError, match="not a group-broker data directory"):
        open_dir(tmp_path)
    (tmp_path / "somebody-elses.txt").unlink()
    (tmp_path / "meta.json").write_text('{"format_version": 9, "cluster_id": "x"}')
    with pytest.raises(DataDirError, match="unknown format version 9"):
        open_dir(tmp_path)


def test_fsync_modes(tmp_path: Path) -> None:
    batch = open_dir(tmp_path / "b", mode="batch")
    for i in range(3):
        batch.journal.put("a.x", (i,), {"v": i})
    assert batch.fsync.fsyncs == 3
    interval = open_dir(tmp_path / "i", mode="interval")
    for i in range(3):
        interval.journal.put("a.x", (i,), {"v": i})
    assert interval.fsync.fsyncs == 0
    interval.fsync.tick()
    assert interval.fsync.fsyncs == 1
    never = open_dir(tmp_path / "n")
    never.journal.put("a.x", (1,), {"v": 1})
    assert never.fsync.fsyncs == 0
    for directory in (batch, interval, never):
        directory.close()


def test_every_put_a_sigkilled_writer_acknowledged_is_there(tmp_path: Path) -> None:
    writer = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys
            from broker.storage.disk.datadir import DataDir
            from broker.storage.disk.fsync import FsyncPolicy
            d = DataDir.open({str(tmp_path)!r}, cluster_id="c", cluster_id_given=False, fsync=FsyncPolicy())
            i = 0
            while True:
                with d.journal.atomic():
                    d.journal.put("offsets.commit", ("g", "t", i % 3), {{"offset": i}})
                    d.journal.put("a.count", ("n",), {{"n": i}})
                print(i, flush=True)
                i += 1
        """)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert writer.stdout is not None
    acknowledged = -1
    deadline = time.monotonic() + 30
    while acknowledged < 2000 and time.monotonic() < deadline:
        acknowledged = int(writer.stdout.readline())
    writer.send_signal(signal.SIGKILL)
    writer.wait(10)
    loaded = open_dir(tmp_path)
    count = {c.key: c.value for c in loaded.journal.changes()}[("n",)]
    assert count is not None and count["n"] >= acknowledged
    assert not loaded.clean_shutdown
    loaded.close()
