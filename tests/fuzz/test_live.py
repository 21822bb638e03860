"""The live fuzz run over real sockets (issue 14): a broker process, many connections sending mutated frames of
every API and version with valid ones in between, a well-behaved consumer beside them. A few thousand frames with
a fixed seed here; ``python -m benchmarks.fuzz --frames 200000`` is the long run (benchmarks/README.md).

Afterwards: the process never died, its log holds no internal error ("request failed", "Fatal error", a
traceback, any error-level record), the good consumer got every answer during and after the run, the broker hung
up on the bad frames with a reason, and RSS is back near where it started.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.fuzz.live import Campaign, Finding, Options

FRAMES = 3000
RSS_SLACK_KB = 64 * 1024  # heap the run may leave behind: groups and offsets the fuzz created, allocator slack


def shown(findings: list[Finding]) -> str:
    return "\n".join(
        f"{f.kind}: {f.detail}\n  " + "\n  ".join(frame[:600] for f in [f] for frame in f.frames) for f in findings[:10]
    )


async def test_a_broker_under_fuzz_lives_answers_and_gives_its_memory_back(tmp_path: Path) -> None:
    options = Options(frames=FRAMES, seed=14, connections=16, log_dir=tmp_path, settle=1.0)
    report = await Campaign(options).run()
    assert report.frames_sent == FRAMES
    assert report.mutated_sent > FRAMES // 2
    assert report.deaths == 0, shown(report.findings)
    assert report.internal_errors == 0, shown(report.findings)
    assert report.good_failures == [], report.good_failures
    assert report.good_cycles >= 2  # at least the one before the run and the one after
    # The broker hung up on bad frames and said why: a reason for every close it made.
    assert report.closed_by_broker > 0
    assert sum(report.close_reasons.values()) > 0
    assert report.rss_end_kb < report.rss_start_kb + RSS_SLACK_KB, (report.rss_start_kb, report.rss_end_kb)
