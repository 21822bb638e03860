"""What ``group-broker serve`` loads before it answers: a deterministic proxy for the start-up figure of
``python -m benchmarks`` (benchmarks/README.md), checked on every CI run instead of a timing."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# The broker's process, up to the point where its listener would start: main() with the real argv.
PROBE = textwrap.dedent(
    """
    import sys
    sys.argv = ["group-broker", "serve", "--port", "0"]
    import broker.cli.main as cli
    cli.serve_forever = lambda config: 0  # stop where the server would start
    assert cli.main() == 0
    import broker.server.broker  # what the server imports before its first answer
    heavy = sorted(m for m in ("hypothesis", "aiohttp", "prometheus_client", "pyspark", "matplotlib", "re2")
                   if m in sys.modules)
    print(",".join(heavy))
    """
)


def test_serve_loads_no_test_or_tool_library_before_it_answers() -> None:
    """kio loads hypothesis whenever it can (~120 ms, several MB); the control API's aiohttp comes after the first
    answer; Spark and matplotlib never, and RE2 only once a group subscribes by pattern. (rich does load: structlog
    imports it for its console tracebacks whenever it is installed.)"""
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == ""


def test_hypothesis_stays_importable_in_the_broker_process() -> None:
    probe = PROBE.replace('print(",".join(heavy))', "import hypothesis.strategies; print('ok')")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "ok"
