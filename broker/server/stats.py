"""Requests answered and their latency, counted with plain integers on the hot path.

A prometheus_client ``labels().inc()`` per heartbeat would cost more than the heartbeat; the control API turns
these counts into metric families when it is scraped (``broker/control/metrics.py``).
"""

from __future__ import annotations

import bisect
from collections import Counter

LATENCY_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class _Latency:
    __slots__ = ("buckets", "count", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)


class RequestStats:
    """Requests answered and their latency (arrival in the read pass to the flush), per API and version."""

    def __init__(self) -> None:
        self.by_api: dict[tuple[int, int], _Latency] = {}

    def record(self, api_key: int, version: int, seconds: float, times: int = 1) -> None:
        entry = self.by_api.get((api_key, version))
        if entry is None:
            entry = self.by_api[(api_key, version)] = _Latency()
        entry.count += times
        entry.total += seconds * times
        entry.buckets[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += times

    def record_pass(self, seconds: float, answered: list[tuple[int, int]]) -> None:
        """One read pass: every answer in it went out in the same write, ``seconds`` after the pass began."""
        if len(answered) == 1:
            self.record(answered[0][0], answered[0][1], seconds)
            return
        for (api_key, version), times in Counter(answered).items():
            self.record(api_key, version, seconds, times)
