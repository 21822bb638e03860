"""The request pipeline with bytes alone (broker/server/pipeline.py): no socket, no loop, a manual clock.

Frames go in with ``receive`` (which runs a pass), a later pass is ``run``; what the pipeline would write to its
transport is read back
from a fake ``PipelineIO``; the host is a ``BrokerServer`` that is never started (its state is built at once).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api.base import ApiContext, BrokerIdentity
from broker.server.broker import BrokerServer
from broker.server.gates import Answer, Close, GateRequest, Verdict
from broker.server.pipeline import PipelineState, RequestPipeline
from broker.timing.clock import ManualClock
from protocol.apis import ApiKey
from protocol.heartbeat import encode_heartbeat_response
from tests.conftest import broker_settings
from tests.wire.client import WireClient, request
from tests.wire.test_bad_input import api_versions_request, join_request

CLIENT = WireClient(None, None, "pipeline-test")  # type: ignore[arg-type]  # only its codec: no stream


class FakeIO:
    """The transport's side, as a test sees it: what was written, what was asked for."""

    def __init__(self) -> None:
        self.pipeline: RequestPipeline
        self.writes: list[bytes] = []
        self.closed = False
        self.soon = 0
        self.timers: list[tuple[float, Callable[[], None]]] = []
        self.unsent_bytes = 0

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close_transport(self) -> None:
        self.closed = True

    def run_now(self) -> None:
        self.pipeline.run()

    def run_soon(self) -> None:
        self.soon += 1

    def call_later(self, seconds: float, callback: Callable[[], None]) -> None:
        self.timers.append((seconds, callback))

    def answers(self) -> list[bytes]:
        """Every answer written so far, without its size prefix."""
        data, frames = b"".join(self.writes), []
        while data:
            (size,) = struct.unpack_from(">i", data)
            frames.append(data[4 : 4 + size])
            data = data[4 + size :]
        return frames


@pytest.fixture
def server() -> BrokerServer:
    clock = ManualClock()
    broker = BrokerServer(broker_settings(), clock)
    clock.attach(broker.purgatory)  # advancing the clock runs what falls due, as the loop timer would
    return broker


def pipeline_of(server: BrokerServer) -> tuple[RequestPipeline, FakeIO]:
    api = ApiContext(
        server.coordinator,
        server.topics,
        BrokerIdentity(1, "127.0.0.1", 9092, "test-cluster"),
        server.fetches,
        settings=server.settings,
        transactions=server.transactions,
    )
    io = FakeIO()
    io.pipeline = RequestPipeline(server, api, io)
    io.pipeline.connected("127.0.0.1:5555", "127.0.0.1", io.write)
    return io.pipeline, io


def heartbeat(correlation_id: int, group_id: str = "nobody") -> bytes:
    body = request(ApiKey.HEARTBEAT, 4, group_id=group_id, generation_id=1, member_id="m", group_instance_id=None)
    return CLIENT.encode(body, correlation_id)


def decoded(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    return CLIENT.decode(api_key, version, frame)


def test_a_pass_answers_every_queued_request_in_order_in_one_write(server: BrokerServer) -> None:
    pipeline, io = pipeline_of(server)
    pipeline.receive(CLIENT.encode(api_versions_request(0), 1) + heartbeat(2) + heartbeat(3))
    assert len(io.writes) == 1 and not pipeline.requests
    first, second, third = io.answers()
    assert decoded(ApiKey.API_VERSIONS, 0, first)[0] == 1
    # The fast path's bytes, with the coordinator's answer (it does not know the group).
    error = server.coordinator.heartbeat("nobody", 1, "m", None)
    assert second == encode_heartbeat_response(4, 2, error)[4:]
    assert decoded(ApiKey.HEARTBEAT, 4, third)[0] == 3
    assert pipeline.client_id == "pipeline-test"
    assert server.request_stats.by_api[(ApiKey.HEARTBEAT, 4)].count == 2


def test_bytes_split_anywhere_make_the_same_frames(server: BrokerServer) -> None:
    pipeline, io = pipeline_of(server)
    data = heartbeat(1) + heartbeat(2)
    for byte in data:
        pipeline.receive(bytes([byte]))
    assert [decoded(ApiKey.HEARTBEAT, 4, answer)[0] for answer in io.answers()] == [1, 2]


def test_a_parked_join_holds_back_the_rest_until_it_is_answered(server: BrokerServer) -> None:
    pipeline, io = pipeline_of(server)
    pipeline.receive(CLIENT.encode(join_request(0, "g"), 1) + CLIENT.encode(api_versions_request(0), 2))
    assert pipeline.state is PipelineState.PARKED
    assert len(pipeline.requests) == 1 and io.answers() == []
    server.clock.advance(10_000)  # type: ignore[attr-defined]  # the join's rebalance completes
    assert pipeline.state is PipelineState.READY
    assert [decoded(ApiKey.JOIN_GROUP, 0, answer)[0] for answer in io.answers()] == [1]
    assert io.soon == 1  # the rest on a fresh loop turn
    pipeline.run()
    assert decoded(ApiKey.API_VERSIONS, 0, io.answers()[1])[0] == 2


def test_an_armed_fault_gate_answers_a_heartbeat_in_its_own_error_shape(server: BrokerServer) -> None:
    pipeline, io = pipeline_of(server)
    server.faults.add({"api": "Heartbeat", "action": "error", "error": "REBALANCE_IN_PROGRESS"})
    pipeline.receive(heartbeat(7))
    assert io.answers() == [encode_heartbeat_response(4, 7, ErrorCode.rebalance_in_progress)[4:]]


def test_a_delay_holds_the_queue_and_the_delayed_request_is_not_judged_twice(server: BrokerServer) -> None:
    pipeline, io = pipeline_of(server)
    rule = server.faults.add({"api": "ApiVersions", "action": "delay", "delay_ms": 250})
    pipeline.receive(CLIENT.encode(api_versions_request(0), 1) + heartbeat(2))
    assert pipeline.state is PipelineState.DELAYED and len(pipeline.requests) == 2
    ((seconds, end_delay),) = io.timers
    assert seconds == 0.25 and io.answers() == []
    end_delay()
    assert pipeline.state is PipelineState.READY
    assert [
        decoded(k, 0 if k == ApiKey.API_VERSIONS else 4, a)[0]
        for k, a in zip((ApiKey.API_VERSIONS, ApiKey.HEARTBEAT), io.answers(), strict=True)
    ] == [1, 2]
    assert rule.hits == 1


def test_a_close_rule_closes_after_the_answers_before_it(server: BrokerServer) -> None:
    pipeline, io = pipeline_of(server)
    server.faults.add({"api": "Heartbeat", "action": "close"})
    pipeline.receive(CLIENT.encode(api_versions_request(0), 1) + heartbeat(2) + heartbeat(3))
    assert [decoded(ApiKey.API_VERSIONS, 0, a)[0] for a in io.answers()] == [1]
    assert io.closed and pipeline.state is PipelineState.CLOSED and len(pipeline.requests) == 0
    pipeline.receive(heartbeat(4))
    assert not pipeline.requests and len(io.answers()) == 1


def test_a_frame_over_the_limit_ends_the_connection_once_the_frames_before_it_are_answered(
    server: BrokerServer,
) -> None:
    pipeline, io = pipeline_of(server)
    oversized = struct.pack(">i", server.settings.socket_request_max_bytes + 1)
    pipeline.receive(heartbeat(1) + oversized)
    assert pipeline.ending
    assert [decoded(ApiKey.HEARTBEAT, 4, a)[0] for a in io.answers()] == [1]
    assert io.closed and pipeline.state is PipelineState.CLOSED


def test_end_of_input_answers_what_is_queued_then_hangs_up_quietly(server: BrokerServer) -> None:
    pipeline, io = pipeline_of(server)
    pipeline.output_paused = True  # held, so that the end comes while a request is queued
    pipeline.receive(heartbeat(1))
    pipeline.end_of_input()
    assert pipeline.ending == "" and not io.closed
    pipeline.output_paused = False
    pipeline.run()
    assert len(io.answers()) == 1 and io.closed


def test_paused_output_answers_nothing_more_until_resumed(server: BrokerServer) -> None:
    pipeline, io = pipeline_of(server)
    pipeline.output_paused = True
    pipeline.receive(heartbeat(1))
    assert io.answers() == [] and len(pipeline.requests) == 1
    pipeline.output_paused = False
    pipeline.run()
    assert len(io.answers()) == 1


class OnlyApiVersions:
    """A gate of the shape authentication will have: nothing but ApiVersions before it says so."""

    def __init__(self) -> None:
        self.armed = True
        self.seen: list[tuple[int, int, str]] = []

    def check(self, request: GateRequest) -> Verdict | None:
        self.seen.append((request.api_key, request.api_version, request.client_id))
        if request.api_key == ApiKey.API_VERSIONS:
            return None
        if request.api_key == ApiKey.HEARTBEAT:
            return Answer(ErrorCode.illegal_sasl_state)
        return Close("not authenticated")


def test_an_armed_gate_sees_every_frame_fast_path_apis_included_once_each(server: BrokerServer) -> None:
    gate = OnlyApiVersions()
    server.gates = (gate, *server.gates)
    pipeline, io = pipeline_of(server)
    pipeline.receive(CLIENT.encode(api_versions_request(0), 1) + heartbeat(2) + CLIENT.encode(join_request(0, "g"), 3))
    assert gate.seen == [
        (ApiKey.API_VERSIONS, 0, "pipeline-test"),
        (ApiKey.HEARTBEAT, 4, "pipeline-test"),
        (ApiKey.JOIN_GROUP, 0, "pipeline-test"),
    ]
    api_versions, refused = io.answers()
    assert decoded(ApiKey.API_VERSIONS, 0, api_versions)[0] == 1
    assert refused == encode_heartbeat_response(4, 2, ErrorCode.illegal_sasl_state)[4:]
    assert io.closed
    gate.armed = False  # disarmed (authenticated, say): the fast paths answer again, the gate sees nothing
    pipeline, io = pipeline_of(server)
    pipeline.receive(heartbeat(4))
    assert len(gate.seen) == 3 and len(io.answers()) == 1


def test_the_gate_request_decodes_the_identity_once_when_asked(server: BrokerServer) -> None:
    body = request(ApiKey.HEARTBEAT, 4, group_id="g", generation_id=1, member_id="m", group_instance_id="i")
    seen = GateRequest(ApiKey.HEARTBEAT, 4, "c", body)
    assert seen.identity == ("g", "m", "i", None)
    assert seen.identity is seen.identity
    assert isinstance(Close("x"), Close)


def test_an_armed_gate_that_lets_a_heartbeat_through_gives_the_fast_paths_bytes(server: BrokerServer) -> None:
    fast, fast_io = pipeline_of(server)
    fast.receive(heartbeat(5))
    server.faults.add({"api": "JoinGroup", "action": "close"})  # armed, matching no Heartbeat
    generic, generic_io = pipeline_of(server)
    generic.receive(heartbeat(5))
    assert generic_io.answers() == fast_io.answers()


def test_a_swallow_rule_answers_all_is_well_to_a_member_the_coordinator_has(server: BrokerServer) -> None:
    server.faults.add({"action": "swallow_heartbeats"})
    pipeline, io = pipeline_of(server)
    pipeline.receive(CLIENT.encode(join_request(0, "g"), 1))
    server.clock.advance(100)  # type: ignore[attr-defined]  # the join completes, the session runs on
    pipeline.run()
    member_id = decoded(ApiKey.JOIN_GROUP, 0, io.answers()[0])[1].member_id
    body = request(ApiKey.HEARTBEAT, 4, group_id="g", generation_id=1, member_id=member_id, group_instance_id=None)
    pipeline.receive(CLIENT.encode(body, 2))
    assert io.answers()[1] == encode_heartbeat_response(4, 2, ErrorCode.none)[4:]
    assert server.faults.rules["f1"].hits == 1
