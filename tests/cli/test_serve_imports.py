"""What ``group-broker serve`` loads before it answers: a deterministic proxy for the start-up figure of
``python -m benchmarks`` (benchmarks/README.md), checked on every CI run instead of a timing (issue 17: the first
ApiVersions answer within 150 ms of the process start, the control API on)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from broker.api.dispatch import FAMILIES, FAMILY_MODULES, HANDLERS
from broker.server.broker import STATE_MODULES, BrokerServer
from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from tests.conftest import broker_settings
from tests.wire.client import WireClient

# A serve process with the real argv (the control API on, as the benchmark runs it), stopped right after its first
# ApiVersions v0 is answered and before its state loads: it prints the modules loaded at that moment.
PROBE = textwrap.dedent(
    """
    import asyncio, json, struct, sys
    sys.argv = ["group-broker", "serve", "--host", "127.0.0.1", "--port", "0", "--admin-port", "0",
                "--log-level", "warning"]
    import broker.cli.main as cli

    class Answered(Exception):
        pass

    async def answer_first(self, loop):  # stands for BrokerServer._load_in_background: the listener is up
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        header = struct.pack(">hhih", 18, 0, 1, 5) + b"probe"  # ApiVersions v0, correlation id 1
        writer.write(struct.pack(">i", len(header)) + header)
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        answer = await reader.readexactly(size)
        assert answer[:6] == struct.pack(">ih", 1, 0), answer  # correlation id 1, error none
        writer.close()
        print(json.dumps(sorted(sys.modules)))
        raise Answered

    serve = cli._serve

    async def probe_serve(config):
        import broker.server.broker as server  # _serve's own first import
        server.BrokerServer._load_in_background = answer_first
        return await serve(config)

    cli._serve = probe_serve
    try:
        cli.main()
    except Answered:
        pass
    """
)

# Libraries that must not load before the first answer: test and tool libraries (kio imports hypothesis whenever
# it can; structlog imports rich), the control API's (loaded in a thread once the broker is ready), and those of
# the data plane's first use (crc32c reads its version with importlib.metadata).
HEAVY = (
    "aiohttp",
    "crc32c",
    "hypothesis",
    "importlib.metadata",
    "matplotlib",
    "prometheus_client",
    "pyspark",
    "re2",
    "rich",
)
# The state the broker builds after its first answer (broker/server/broker.py, STATE_MODULES).
DEFERRED = (
    # kio's schemas, readers and writers: the first ApiVersions is answered by hand (protocol/api_versions.py).
    "kio.index",
    "kio.serial",
    # Logging: nothing is logged on the way to the first answer; the loading thread sets it up (broker/log.py).
    "structlog",
    "broker.coordinator.coordinator",
    "broker.server.catalog",
    "broker.storage.delayed_fetch",
    "broker.transactions.coordinator",
    "broker.control.app",
)
# Ceilings with a margin over what loads today (242 modules, 45 of them ours, Python 3.11; some 465 and 104 before issue
# 17, 290 and 42 before ApiVersions was answered by hand and structlog loaded after the first answer): a change that
# pulls a package onto the start-up path fails here, and either moves it off or raises the ceiling knowingly.
MAX_MODULES = 255
# 50 since issue 27: the producer id allocator (broker/transactions/producer_ids.py, stdlib only) exists before
# the first answer, as the counter it replaced did. 51 since issue 29: the loop timer moved out of
# broker/server/broker.py into its own module (the same code; broker.py had reached the 600-line limit). 52 since
# issue 28: the steady ShareFetch's hand decoder (protocol/share_fetch_requests.py, stdlib only) is read by the
# connection pipeline, as the heartbeats' decoders are. 53 since issue 30: the listener record and the loading
# stand-in moved out of broker.py likewise (broker/server/listener.py, the same code). 55 since issue 30's SASL:
# the pipeline's states and its SASL steps moved out of broker/server/pipeline.py (pipeline_state.py,
# sasl_steps.py; the same code, pipeline.py had passed the 600-line limit).
MAX_OWN_MODULES = 55


@pytest.fixture(scope="module")
def loaded_at_first_answer() -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True)
    modules: list[str] = json.loads(done.stdout)
    return modules


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted({name for name in names for module in modules if module == name or module.startswith(name + ".")})


def test_serve_loads_no_test_tool_or_control_library_before_it_answers(loaded_at_first_answer: list[str]) -> None:
    """hypothesis (~120 ms), rich (~70 ms), aiohttp and prometheus_client (~200 ms, ~16 MB): none before the
    first answer; Spark and matplotlib never, RE2 only once a group subscribes by pattern."""
    assert _loaded(loaded_at_first_answer, HEAVY) == []


def test_serve_answers_before_its_state_loads(loaded_at_first_answer: list[str]) -> None:
    assert _loaded(loaded_at_first_answer, DEFERRED) == []


def test_serve_loads_few_modules_before_it_answers(loaded_at_first_answer: list[str]) -> None:
    own = [m for m in loaded_at_first_answer if m.split(".")[0] in ("broker", "protocol")]
    assert len(loaded_at_first_answer) <= MAX_MODULES, f"{len(loaded_at_first_answer)} modules"
    assert len(own) <= MAX_OWN_MODULES, own


@pytest.mark.parametrize("library", ["hypothesis.strategies", "rich.console"])
def test_hidden_libraries_stay_importable_in_the_broker_process(library: str) -> None:
    probe = PROBE.replace("print(json.dumps(sorted(sys.modules)))", f"import {library}; print('ok')")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "ok"


def test_every_api_has_a_handler_loaded_on_first_use() -> None:
    assert set(FAMILIES) | {ApiKey.API_VERSIONS} == set(SUPPORTED_VERSIONS)
    for api_key in SUPPORTED_VERSIONS:
        assert callable(HANDLERS[api_key])
    assert set(STATE_MODULES) >= FAMILY_MODULES


def test_a_pending_state_builds_on_first_use() -> None:
    """A request that comes while the state still loads finishes the loading on the spot."""
    server = BrokerServer(broker_settings(), load_in_background=True)
    assert server.coordinator.active  # built here
    assert server.topics.get("topic") is not None
    assert type(server.coordinator).__name__ == "GroupCoordinator"


async def test_api_versions_is_answered_while_the_state_loads_and_later_requests_wait_for_it(
    held_imports: threading.Event,
) -> None:
    server = BrokerServer(broker_settings(), load_in_background=True)
    starting = asyncio.create_task(server.start())
    try:
        while not server.port:
            await asyncio.sleep(0)
        client = await WireClient.connect(server.port)
        answer = await client.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert answer.error_code == 0
        assert not server.ready  # answered with the state still loading
        # A Metadata request now blocks the loop until the imports are released (finish_loading joins the thread):
        # release them from another thread a moment after, then it is answered in full.
        timer = threading.Timer(0.05, held_imports.set)
        timer.start()
        metadata = await client.call(
            MetadataRequest(
                topics=(MetadataRequestTopic(name="topic", topic_id=None),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        assert [topic.name for topic in metadata.topics] == ["topic"]
        await starting
        assert server.ready
        await client.close()
    finally:
        held_imports.set()
        if not starting.done():
            await starting
        await server.stop()


def test_console_tracebacks_use_rich_imported_at_the_first_one() -> None:
    """serve loads structlog with rich hidden; the console format still renders tracebacks with rich."""
    probe = textwrap.dedent(
        """
        import io, sys
        sys.modules["rich"] = None
        import structlog
        del sys.modules["rich"]
        from broker.config.logs import RichTraceback
        assert "rich" not in sys.modules
        try:
            1 / 0
        except ZeroDivisionError:
            out = io.StringIO()
            RichTraceback(colors=False)(out, sys.exc_info())
        print("rich" in sys.modules, "ZeroDivisionError" in out.getvalue())
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["True", "True"]


def test_a_line_logged_before_the_state_loads_is_set_up_on_the_spot() -> None:
    """Logging loads after the first answer (broker/log.py); a connection closed before that is still logged,
    in the configured format, with structlog loaded as serve loads it (rich hidden)."""
    assert "    print(json.dumps(sorted(sys.modules)))\n" in PROBE
    probe = (
        PROBE.replace("--log-level", "--log-format")
        .replace('"warning"]', '"json"]')
        .replace(
            "    print(json.dumps(sorted(sys.modules)))\n",
            "    assert 'structlog' not in sys.modules\n"
            "    reader, writer = await asyncio.open_connection('127.0.0.1', self.port)\n"
            "    writer.write(struct.pack('>i', 2) + b'xx')  # too short for a request header: closed, logged\n"
            "    assert await reader.read() == b''\n"
            "    print(json.dumps(sorted(sys.modules)))\n",
        )
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    modules = json.loads(done.stdout)
    assert "structlog" in modules and "rich" not in modules
    (line,) = [json.loads(raw) for raw in done.stderr.splitlines() if "closing connection" in raw]
    assert (line["level"], line["reason"]) == ("warning", "frame of 2 bytes is too short for a request header")
