"""The fuzz suite's shared pieces: one hypothesis profile (fixed seed, bounded) and one guarded worker.

``derandomize=True``: every run draws the same cases, so CI is deterministic and a failure replays with the same
command. The worker (benchmarks/fuzz/worker.py) runs decode and the handlers under ``RLIMIT_AS`` in a process of
its own: a frame that makes kio abort, or a handler that allocates gigabytes, fails the test with that frame
instead of taking pytest down.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from benchmarks.fuzz.guard import Guard
from benchmarks.fuzz.mutate import OPERATORS, Mutation
from benchmarks.fuzz.requests import ALL_VERSIONS

settings.register_profile(
    "fuzz",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow],
)

API_VERSIONS = st.sampled_from(ALL_VERSIONS)
SEEDS = st.integers(0, 2**32 - 1)
MUTATIONS: st.SearchStrategy[list[Mutation]] = st.lists(
    st.tuples(st.integers(0, OPERATORS - 1), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)),
    min_size=1,
    max_size=3,
)


@pytest.fixture(scope="session")
def guard() -> Iterator[Guard]:
    with Guard(memory_mb=1024, timeout=30.0) as worker:
        yield worker


def shown(frame: bytes, limit: int = 600) -> str:
    """A frame as the issue writes reproducers: hex, size prefix included (cut short when long)."""
    text = (len(frame).to_bytes(4, "big") + frame).hex()
    return text if len(text) <= limit else f"{text[:limit]}… ({len(frame)} bytes)"


def failure(result: dict[str, Any], frames: list[bytes]) -> str:
    error = result["error"]
    lines = [f"{error['kind']} at {error.get('where') or '?'}: {error['message']}"]
    lines += [f"  frame {index}: {shown(frame)}" for index, frame in enumerate(frames)]
    if error.get("traceback"):
        lines.append(error["traceback"])
    return "\n".join(lines)
