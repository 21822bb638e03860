"""The HTTP control API over real HTTP, with every answer checked against ``docs/control-api.yaml``.

Each test runs an in-process broker in its own event loop with the control API on a free port, talks to it with
``aiohttp.ClientSession``, and drives consumer groups with the raw Kafka client of the wire tests. Every HTTP answer
goes through openapi-core (the request too, when it is a well-formed one), so the document cannot drift from the
server: an undocumented status, field or content type fails the test that met it.
"""

from __future__ import annotations

import asyncio
import datetime
import json as jsonlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32
from openapi_core import Config, OpenAPI
from openapi_core.datatypes import RequestParameters
from openapi_core.deserializing.media_types.util import plain_loads
from openapi_core.templating.paths.exceptions import OperationNotFound, PathNotFound
from openapi_core.templating.responses.exceptions import ResponseNotFound
from openapi_core.validation.response.exceptions import DataValidationError, InvalidData
from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import validate as validate_spec
from openapi_spec_validator.readers import read_from_filename
from prometheus_client.parser import text_string_to_metric_families
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
from werkzeug.datastructures import Headers, ImmutableMultiDict

from broker.config import settings
from broker.coordinator.consumer_protocol import Assignment, encode_assignment
from broker.server.broker import BrokerServer
from protocol.apis import ApiKey
from tests.conftest import ROOT, broker_settings
from tests.coordinator.harness import subscription
from tests.wire.client import WireClient, part, request

E = ErrorCode
SPEC_PATH = ROOT / "docs" / "control-api.yaml"
SPEC_URI = "urn:kafka-group-broker:control-api"
TOPIC_PARTITIONS = 3  # broker_settings() creates "topic" with 3 partitions


# -- the document ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    document, _ = read_from_filename(str(SPEC_PATH))
    return dict(document)


@pytest.fixture(scope="module")
def openapi() -> OpenAPI:
    # SSE bodies are text; openapi-core would otherwise hand them to the schema as bytes.
    config = Config(extra_media_type_deserializers={"text/event-stream": plain_loads})
    return OpenAPI.from_file_path(str(SPEC_PATH), config=config)


def component_validator(document: dict[str, Any], name: str) -> OAS31Validator:
    """A JSON Schema validator for ``#/components/schemas/<name>``, its $refs resolved within the document."""
    registry: Registry[Any] = Registry().with_resource(
        SPEC_URI, Resource.from_contents(document, default_specification=DRAFT202012)
    )
    return OAS31Validator({"$ref": f"{SPEC_URI}#/components/schemas/{name}"}, registry=registry)


# -- openapi-core's request and response protocols, for the client side ------------------------------


@dataclass
class OpenApiRequest:
    host_url: str
    path: str
    method: str
    parameters: RequestParameters
    body: bytes | None
    content_type: str


@dataclass
class OpenApiResponse:
    status_code: int
    content_type: str
    headers: Headers
    data: bytes


@dataclass
class Answer:
    status: int
    headers: Mapping[str, str]
    data: bytes

    @property
    def json(self) -> Any:
        return jsonlib.loads(self.data)

    @property
    def error(self) -> str:
        message = self.json["error"]
        assert isinstance(message, str)
        return message


class ControlClient:
    """Calls the control API and validates every answer (and every well-formed request) against the document."""

    def __init__(self, session: aiohttp.ClientSession, port: int, openapi: OpenAPI, document: dict[str, Any]) -> None:
        self.session = session
        self.host_url = f"http://127.0.0.1:{port}"
        self.openapi = openapi
        self.error_schema = component_validator(document, "Error")
        self.event_schema = component_validator(document, "Event")

    async def call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int] | None = None,
        json: Any = None,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        documented: bool = True,
        well_formed: bool = True,
    ) -> Answer:
        """``documented=False``: a path or method the document does not list (it must answer an Error).
        ``well_formed=False``: a request meant to be rejected, so only the answer is validated."""
        params = {name: str(value) for name, value in (query or {}).items()}
        sent_headers = dict(headers or {})
        if json is not None:
            body = jsonlib.dumps(json).encode()
        if body is not None:
            sent_headers.setdefault("Content-Type", "application/json")
        async with self.session.request(
            method, self.host_url + path, params=params, data=body, headers=sent_headers
        ) as response:
            answer = Answer(response.status, response.headers, await response.read())
        self.validate(method, path, params, sent_headers, body, answer, documented, well_formed)
        return answer

    def openapi_request(
        self, method: str, path: str, params: Mapping[str, str], headers: Mapping[str, str], body: bytes | None
    ) -> OpenApiRequest:
        return OpenApiRequest(
            host_url=self.host_url,
            path=path,
            method=method.lower(),
            parameters=RequestParameters(query=ImmutableMultiDict(list(params.items())), header=Headers(headers)),
            body=body,
            content_type=headers.get("Content-Type", "").lower(),
        )

    def validate(
        self,
        method: str,
        path: str,
        params: Mapping[str, str],
        headers: Mapping[str, str],
        body: bytes | None,
        answer: Answer,
        documented: bool = True,
        well_formed: bool = True,
    ) -> None:
        request = self.openapi_request(method, path, params, headers, body)
        response = OpenApiResponse(
            status_code=answer.status,
            content_type=answer.headers.get("Content-Type", "").lower(),
            headers=Headers(list(answer.headers.items())),
            data=answer.data,
        )
        if not documented:
            with pytest.raises((PathNotFound, OperationNotFound)):
                self.openapi.validate_response(request, response)
            # components/responses NotFound and MethodNotAllowed: an Error body.
            assert response.content_type.startswith("application/json"), response.content_type
            self.error_schema.validate(answer.json)
            return
        if well_formed:
            self.openapi.validate_request(request)
        self.openapi.validate_response(request, response)

    async def get(self, path: str, **options: Any) -> Answer:
        return await self.call("GET", path, **options)

    async def post(self, path: str, **options: Any) -> Answer:
        return await self.call("POST", path, **options)

    async def delete(self, path: str, **options: Any) -> Answer:
        return await self.call("DELETE", path, **options)

    # -- shorthands that expect success --------------------------------------------------------------

    async def group(self, group_id: str) -> dict[str, Any]:
        answer = await self.get(url("v1", "groups", group_id))
        assert answer.status == 200, answer.data
        detail: dict[str, Any] = answer.json
        return detail

    async def wait(self, group_id: str, timeout_ms: int = 5000, **conditions: str | int) -> dict[str, Any]:
        answer = await self.get(url("v1", "groups", group_id, "wait"), query={**conditions, "timeout_ms": timeout_ms})
        assert answer.status == 200, answer.data
        detail: dict[str, Any] = answer.json
        return detail

    async def events(self, group_id: str, **query: str | int) -> list[dict[str, Any]]:
        answer = await self.get(url("v1", "groups", group_id, "events"), query=query)
        assert answer.status == 200, answer.data
        events: list[dict[str, Any]] = answer.json["events"]
        return events

    async def faults(self) -> list[dict[str, Any]]:
        answer = await self.get("/v1/faults")
        assert answer.status == 200
        faults: list[dict[str, Any]] = answer.json["faults"]
        return faults

    async def add_fault(self, **spec: Any) -> dict[str, Any]:
        answer = await self.post("/v1/faults", json=spec)
        assert answer.status == 201, answer.data
        rule: dict[str, Any] = answer.json
        return rule

    async def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        answer = await self.get("/metrics")
        assert answer.status == 200
        return {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(answer.data.decode())
            for sample in family.samples
        }

    @asynccontextmanager
    async def stream(
        self, query: Mapping[str, str | int] | None = None, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[EventStream]:
        params = {name: str(value) for name, value in (query or {}).items()}
        async with self.session.get(
            self.host_url + "/v1/events", params=params, headers=dict(headers or {})
        ) as response:
            stream = EventStream(response, self.event_schema)
            yield stream
            answer = Answer(response.status, response.headers, bytes(stream.raw))
            self.validate("GET", "/v1/events", params, dict(headers or {}), None, answer)


def url(*segments: str) -> str:
    return "/" + "/".join(quote(segment, safe="") for segment in segments)


class EventStream:
    """Reads Server-Sent Events; checks each one's framing and its data against the Event schema."""

    def __init__(self, response: aiohttp.ClientResponse, event_schema: OAS31Validator) -> None:
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/event-stream"
        self.response = response
        self.event_schema = event_schema
        self.raw = bytearray()

    async def next(self, timeout: float = 3.0) -> dict[str, Any]:
        fields: dict[str, str] = {}
        while True:
            line = await asyncio.wait_for(self.response.content.readline(), timeout)
            assert line, "the stream ended"
            self.raw += line
            text = line.decode().rstrip("\n")
            if not text:
                if fields:
                    break
                continue
            if text.startswith(":"):
                continue  # a comment: keep-alive or dropped events
            name, _, value = text.partition(": ")
            fields[name] = value
        record: dict[str, Any] = jsonlib.loads(fields["data"])
        self.event_schema.validate(record)
        assert fields["id"] == str(record["seq"])
        assert fields["event"] == record["event"]
        return record

    async def until(self, done: Callable[[dict[str, Any]], bool], timeout: float = 3.0) -> list[dict[str, Any]]:
        """Events up to and including the first one ``done`` accepts."""
        seen = []
        while True:
            record = await self.next(timeout)
            seen.append(record)
            if done(record):
                return seen


# -- brokers ----------------------------------------------------------------------------------------------


@pytest.fixture
async def broker() -> AsyncIterator[BrokerServer]:
    server = BrokerServer(broker_settings(admin_port=0))
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def api(
    broker: BrokerServer, openapi: OpenAPI, spec: dict[str, Any]
) -> AsyncIterator[ControlClient]:
    async with aiohttp.ClientSession() as session:
        yield ControlClient(session, broker.control.port, openapi, spec)


Connect = Callable[..., Awaitable[WireClient]]


@pytest.fixture
async def connect(broker: BrokerServer) -> AsyncIterator[Connect]:
    opened: list[WireClient] = []

    async def open_client(client_id: str = "admin-test") -> WireClient:
        client = await WireClient.connect(broker.port, client_id)
        opened.append(client)
        return client

    yield open_client
    for client in opened:
        await client.close()


# -- consumer group members over the raw Kafka protocol ----------------------------------------------------


def assignment_bytes(**topics: list[int]) -> bytes:
    return encode_assignment(Assignment(0, tuple((t, tuple(p)) for t, p in topics.items()), None))


def heartbeat_request(version: int, group_id: str, generation: int, member_id: str, instance_id: str | None) -> Any:
    return request(
        ApiKey.HEARTBEAT,
        version,
        group_id=group_id,
        generation_id=i32(generation),
        member_id=member_id,
        group_instance_id=instance_id,
    )


@dataclass
class Consumer:
    """One member of a consumer group, on its own connection: JoinGroup v9, SyncGroup v5, Heartbeat v0-4."""

    client: WireClient
    group_id: str
    instance_id: str | None = None
    session_ms: int = 10_000
    rebalance_ms: int = 10_000
    protocol_type: str = "consumer"
    metadata: bytes = field(default_factory=lambda: subscription("topic"))
    member_id: str = ""
    generation: int = -1
    leader: str = ""
    members: tuple[str, ...] = ()  # the generation's member ids, when this member leads it

    def join_request(self) -> Any:
        return request(
            ApiKey.JOIN_GROUP,
            9,
            group_id=self.group_id,
            session_timeout=datetime.timedelta(milliseconds=self.session_ms),
            rebalance_timeout=datetime.timedelta(milliseconds=self.rebalance_ms),
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_type=self.protocol_type,
            protocols=(part(ApiKey.JOIN_GROUP, 9, "JoinGroupRequestProtocol", name="range", metadata=self.metadata),),
            reason=None,
        )

    async def take_member_id(self) -> None:
        """KIP-394's first step: a dynamic member is told its id and is pending until it joins with it."""
        if self.instance_id is None and not self.member_id:
            answer = await self.client.call(self.join_request())
            assert answer.error_code is E.member_id_required, answer
            self.member_id = answer.member_id

    async def join(self) -> None:
        await self.take_member_id()
        answer = await self.client.call(self.join_request())
        assert answer.error_code is E.none, answer
        self.member_id, self.generation, self.leader = answer.member_id, answer.generation_id, answer.leader
        self.members = tuple(m.member_id for m in answer.members)

    async def sync(self, assignments: Mapping[str, bytes] | None = None) -> bytes:
        """SyncGroup; only the leader sends ``assignments``."""
        answer = await self.client.call(
            request(
                ApiKey.SYNC_GROUP,
                5,
                group_id=self.group_id,
                generation_id=i32(self.generation),
                member_id=self.member_id,
                group_instance_id=self.instance_id,
                protocol_type=self.protocol_type,
                protocol_name="range",
                assignments=tuple(
                    part(ApiKey.SYNC_GROUP, 5, "SyncGroupRequestAssignment", member_id=m, assignment=a)
                    for m, a in (assignments or {}).items()
                ),
            )
        )
        assert answer.error_code is E.none, answer
        assignment: bytes = answer.assignment
        return assignment

    async def heartbeat(self, version: int = 4) -> ErrorCode:
        answer = await self.client.call(
            heartbeat_request(version, self.group_id, self.generation, self.member_id, self.instance_id)
        )
        error: ErrorCode = answer.error_code
        return error


def round_robin(members: tuple[str, ...]) -> dict[str, bytes]:
    ordered = sorted(members)
    return {
        member: assignment_bytes(topic=list(range(index, TOPIC_PARTITIONS, len(ordered))))
        for index, member in enumerate(ordered)
    }


async def sync_all(
    consumers: list[Consumer], assign: Callable[[tuple[str, ...]], Mapping[str, bytes]] = round_robin
) -> None:
    """The leader sends the assignment, the followers' SyncGroups park until it does."""
    (leader,) = [c for c in consumers if c.member_id == c.leader]
    await asyncio.gather(*(c.sync(assign(leader.members) if c is leader else None) for c in consumers))


async def form_group(
    api: ControlClient,
    consumers: list[Consumer],
    assign: Callable[[tuple[str, ...]], Mapping[str, bytes]] = round_robin,
) -> int:
    """Makes every consumer a member of one Stable generation, assigned by ``assign``; returns the generation.

    The first consumer forms a generation alone, and the others join it with ``grow``.
    """
    first, *rest = consumers
    await first.join()
    await sync_all([first], assign if not rest else round_robin)
    await api.wait(first.group_id, state="Stable", members=1)
    if rest:
        await grow(api, [first], rest, assign)
    return first.generation


async def grow(
    api: ControlClient,
    members: list[Consumer],
    newcomers: list[Consumer],
    assign: Callable[[tuple[str, ...]], Mapping[str, bytes]] = round_robin,
) -> int:
    """Newcomers join a Stable group and everyone ends in the next generation; returns it.

    Dynamic newcomers take their member ids first, so they are pending and no join phase can complete without
    them; the members rejoin once the rebalance has begun (a member rejoining a Stable group with unchanged
    metadata is just told the current generation). At most one newcomer may be static.
    """
    group_id = members[0].group_id
    for consumer in newcomers:
        await consumer.take_member_id()
    joining = [asyncio.create_task(c.join()) for c in newcomers]
    await api.wait(group_id, state="PreparingRebalance")
    await asyncio.gather(*(c.join() for c in members), *joining)
    return await synced(api, members + newcomers, assign)


async def synced(
    api: ControlClient,
    consumers: list[Consumer],
    assign: Callable[[tuple[str, ...]], Mapping[str, bytes]] = round_robin,
) -> int:
    generations = {c.generation for c in consumers}
    assert len(generations) == 1, generations
    await sync_all(consumers, assign)
    detail = await api.wait(consumers[0].group_id, state="Stable", members=len(consumers))
    assert detail["generation_id"] == consumers[0].generation
    return consumers[0].generation


async def rejoin(api: ControlClient, consumers: list[Consumer]) -> int:
    """Every member rejoins a group that is already PreparingRebalance; returns the new generation."""
    await asyncio.gather(*(c.join() for c in consumers))
    return await synced(api, consumers)


async def stable_group(
    api: ControlClient, connect: Connect, group_id: str, size: int = 1, **options: Any
) -> list[Consumer]:
    consumers = [Consumer(await connect(f"{group_id}-c{i}"), group_id, **options) for i in range(size)]
    await form_group(api, consumers)
    return consumers


def without_ages(detail: dict[str, Any]) -> dict[str, Any]:
    """A group detail without what changes with the passing of time alone."""
    shape = {key: value for key, value in detail.items() if key != "state_age_ms"}
    shape["members"] = [{k: v for k, v in m.items() if k != "last_heartbeat_age_ms"} for m in detail["members"]]
    return shape


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


# == the document itself ===================================================================================


def test_the_document_is_a_valid_openapi_3_1_description(spec: dict[str, Any]) -> None:
    validate_spec(spec)
    assert spec["openapi"].startswith("3.1.")
    schemas = spec["components"]["schemas"]
    for name in ("GroupSummary", "GroupDetail", "Member", "FaultRule", "Error"):
        assert schemas[name]["additionalProperties"] is False, name
    assert set(schemas["Event"]["required"]) == {"v", "seq", "ts_ms", "run_id", "event", "group_id"}
    assert schemas["Event"]["additionalProperties"] is True
    assert {"GroupSummary", "GroupDetail", "Member", "Event", "FaultRule", "FaultRuleSpec", "Error"} <= set(schemas)
    (server,) = spec["servers"]
    assert server["variables"]["host"]["default"] == "127.0.0.1"
    assert "127.0.0.1" in spec["info"]["description"] and "--admin-host" in spec["info"]["description"]


async def test_the_validation_catches_drift(api: ControlClient) -> None:
    """The checks are not vacuous: an extra field, a missing one or an undocumented status fails them."""
    answer = await api.get("/v1/groups")
    drifted = [
        {"groups": [{"group_id": "g", "state": "Stable", "protocol_type": None, "protocol": None,
                     "generation_id": 1, "leader": None, "members": 0, "colour": "red"}]},
        {"groups": [{"group_id": "g", "state": "Stable"}]},
        {"groups": [], "total": 0},
    ]
    for body in drifted:
        fake = Answer(200, answer.headers, jsonlib.dumps(body).encode())
        with pytest.raises(InvalidData):
            api.validate("GET", "/v1/groups", {}, {}, None, fake)
    with pytest.raises(ResponseNotFound):
        api.validate("GET", "/v1/groups", {}, {}, None, Answer(418, answer.headers, b'{"error": "teapot"}'))
    html = {**answer.headers, "Content-Type": "text/html"}
    with pytest.raises(DataValidationError, match="mimetype not found: text/html"):
        api.validate("GET", "/v1/groups", {}, {}, None, Answer(200, html, answer.data))


# == health and metrics ======================================================================================


async def test_healthz_and_readyz(api: ControlClient) -> None:
    health = await api.get("/healthz")
    assert (health.status, health.json) == (200, {"status": "ok"})
    ready = await api.get("/readyz")
    assert (ready.status, ready.json) == (200, {"status": "ready"})


async def test_readyz_answers_503_stopping_once_stop_has_begun(
    openapi: OpenAPI, spec: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = BrokerServer(broker_settings(admin_port=0))
    await server.start()
    # Hold stop() after it has begun (Kafka listener closed, coordinator shut down), before the API goes away:
    # at the control API's own stop, so the hook does not depend on how the Kafka listeners are built.
    gate = asyncio.Event()
    control_stop = server.control.stop

    async def held() -> None:
        await gate.wait()
        await control_stop()

    monkeypatch.setattr(server.control, "stop", held)
    stopping = asyncio.create_task(server.stop())
    try:
        async with aiohttp.ClientSession() as session:
            api = ControlClient(session, server.control.port, openapi, spec)
            ready = await api.get("/readyz")
            assert (ready.status, ready.json) == (503, {"status": "stopping"})
            health = await api.get("/healthz")
            assert health.status == 200
    finally:
        gate.set()
        await stopping


async def test_metrics_count_requests_groups_rebalances_and_connections(
    api: ControlClient, connect: Connect
) -> None:
    consumers = await stable_group(api, connect, "metered", size=2)
    for version in (0, 4, 4):
        assert await consumers[0].heartbeat(version) is E.none
    metrics = await api.metrics()

    def value(name: str, **labels: str) -> float | None:
        return metrics.get((name, frozenset(labels.items())))

    # Each consumer: JoinGroup v9 twice (MEMBER_ID_REQUIRED, then the join), the first once more to rejoin;
    # SyncGroup v5 once per generation each (the first was alone in generation 1).
    assert value("kafka_requests_total", api="JoinGroup", version="9") == 5
    assert value("kafka_requests_total", api="SyncGroup", version="5") == 3
    assert value("kafka_requests_total", api="Heartbeat", version="0") == 1
    assert value("kafka_requests_total", api="Heartbeat", version="4") == 2
    assert value("kafka_request_duration_seconds_count", api="Heartbeat", version="4") == 2
    assert value("group_broker_groups", type="classic", state="Stable") == 1
    assert value("group_broker_groups", type="classic", state="Empty") == 0
    assert value("group_broker_groups", type="consumer", state="Stable") == 0
    assert value("group_broker_group_members", group="metered", type="classic") == 2
    assert value("group_broker_connections") == 2
    assert value("group_broker_connections_accepted_total") == 2

    events = await api.events("metered")
    causes: dict[str, int] = {}
    for record in events:
        if record["event"] == "rebalance_started":
            causes[record["cause"]] = causes.get(record["cause"], 0) + 1
    assert causes == {"member_joined": 2}
    for cause, count in causes.items():
        assert value("group_broker_rebalances_total", group="metered", cause=cause) == count
    synced = [r for r in events if r["event"] == "sync_completed"]
    protocol = synced[-1]["rebalance_protocol"] or "other"
    assert value("group_broker_rebalance_duration_seconds_count", protocol=protocol) == len(synced) == 2
    assert value("group_broker_rebalance_duration_seconds_bucket", protocol=protocol, le="+Inf") == 2

    await consumers[1].client.close()

    async def one_connection() -> bool:
        return (await api.metrics()).get(("group_broker_connections", frozenset())) == 1

    await eventually(one_connection)


async def test_metrics_eviction_delay_after_a_kick(api: ControlClient, connect: Connect) -> None:
    consumers = await stable_group(api, connect, "evicted", size=2)
    victim = consumers[1].member_id
    assert (await api.post(url("v1", "groups", "evicted", "members", victim, "kick"))).status == 200
    metrics = await api.metrics()
    labels = frozenset({"cause": "kicked"}.items())
    assert metrics[("group_broker_eviction_delay_seconds_count", labels)] == 1
    assert metrics[("group_broker_eviction_delay_seconds_sum", labels)] < 5
    assert metrics[("group_broker_rebalances_total", frozenset({"group": "evicted", "cause": "member_kicked"}.items()))]


async def test_metrics_referee_violations_after_a_bad_assignment(api: ControlClient, connect: Connect) -> None:
    consumers = [Consumer(await connect(f"bad-{i}"), "refereed") for i in range(2)]

    def both_own_partition_0(members: tuple[str, ...]) -> dict[str, bytes]:
        return {member: assignment_bytes(topic=[0]) for member in members}

    await form_group(api, consumers, both_own_partition_0)
    events = await api.events("refereed")
    violations = [r for r in events if r["event"] == "referee_violation"]
    double = [r for r in violations if r["kind"] == "double_owner"]
    assert len(double) == 1 and (double[0]["topic"], double[0]["partition"]) == ("topic", 0)
    assert sorted(double[0]["members"]) == sorted(c.member_id for c in consumers)
    metrics = await api.metrics()
    kinds = {r["kind"] for r in violations}
    for kind in kinds:
        count = sum(r["kind"] == kind for r in violations)
        labels = frozenset({"group": "refereed", "kind": kind}.items())
        assert metrics[("group_broker_referee_violations_total", labels)] == count
    assert kinds == {"double_owner", "unowned"}


# == groups =================================================================================================


async def test_list_groups_is_sorted_summaries(api: ControlClient, connect: Connect) -> None:
    assert (await api.get("/v1/groups")).json == {"groups": []}
    beta = await stable_group(api, connect, "beta")
    alpha = await stable_group(api, connect, "alpha", size=2)
    groups = (await api.get("/v1/groups")).json["groups"]
    # Rebalances so far and the last one's cause (for the web console, tests/control/test_console.py): alpha was
    # formed by one member and grown to two, beta formed once.
    assert [(g.pop("rebalances"), g.pop("last_rebalance")["cause"]) for g in groups] == [
        (2, "member_joined"), (1, "member_joined"),
    ]  # fmt: skip
    assert [g.pop("lag") for g in groups] == [0, 0]  # nothing committed (tests/control/test_lag_api.py)
    assert groups == [
        {"group_id": "alpha", "group_type": "classic", "state": "Stable", "protocol_type": "consumer",
         "protocol": "range", "generation_id": alpha[0].generation, "leader": alpha[0].leader, "members": 2,
         "group_epoch": None, "assignment_epoch": None},
        {"group_id": "beta", "group_type": "classic", "state": "Stable", "protocol_type": "consumer",
         "protocol": "range", "generation_id": beta[0].generation, "leader": beta[0].member_id, "members": 1,
         "group_epoch": None, "assignment_epoch": None},
    ]


async def test_describe_group_shows_members_with_their_decoded_assignments(
    api: ControlClient, connect: Connect
) -> None:
    dynamic = Consumer(await connect("dyn-client"), "described", session_ms=6000, rebalance_ms=9000)
    static = Consumer(await connect("static-client"), "described", instance_id="instance-1")
    await form_group(api, [dynamic, static])
    assert await dynamic.heartbeat() is E.none
    late = Consumer(await connect("late"), "described")
    await late.take_member_id()  # pending: told its id, not joined with it

    detail = await api.group("described")
    assert detail["state"] == "Stable"
    assert detail["generation_id"] == dynamic.generation
    assert detail["leader"] == dynamic.leader
    assert detail["pending_members"] == [late.member_id]
    assert detail["subscribed_topics"] == ["topic"]
    assert 0 <= detail["state_age_ms"] < 5000
    members = {m["member_id"]: m for m in detail["members"]}
    assert set(members) == {dynamic.member_id, static.member_id}
    expected = round_robin((dynamic.member_id, static.member_id))
    for consumer, client_id in ((dynamic, "dyn-client"), (static, "static-client")):
        member = members[consumer.member_id]
        age = member.pop("last_heartbeat_age_ms")
        assert 0 <= age < 5000
        partitions = list(range(sorted(expected).index(consumer.member_id), TOPIC_PARTITIONS, 2))
        assert member == {
            "member_id": consumer.member_id,
            "group_instance_id": consumer.instance_id,
            "client_id": client_id,
            "client_host": "/127.0.0.1",
            "session_timeout_ms": consumer.session_ms,
            "rebalance_timeout_ms": consumer.rebalance_ms,
            "awaiting_join": False,
            "awaiting_sync": False,
            "protocols": ["range"],
            "assignment": {"topic": partitions},
            "assignment_bytes": len(expected[consumer.member_id]),
            "is_leader": consumer.member_id == dynamic.leader,
        }
    assert members[dynamic.member_id]["session_timeout_ms"] == 6000
    assert members[dynamic.member_id]["rebalance_timeout_ms"] == 9000
    assert members[static.member_id]["group_instance_id"] == "instance-1"


async def test_describe_shows_awaiting_join_and_undecodable_assignments(api: ControlClient, connect: Connect) -> None:
    odd = Consumer(await connect("odd"), "odd")
    await odd.join()
    await odd.sync({odd.member_id: b"not the consumer protocol"})
    member = (await api.group("odd"))["members"][0]
    assert member["assignment"] is None and member["assignment_bytes"] == len(b"not the consumer protocol")

    other = Consumer(await connect("other"), "other-type", protocol_type="connect", metadata=b"\x00")
    await other.join()
    await other.sync({other.member_id: assignment_bytes(topic=[0])})
    described = await api.group("other-type")
    assert described["protocol_type"] == "connect"
    assert described["members"][0]["assignment"] is None  # not a consumer group: not decoded

    # A second member joins: the first is asked to rejoin and the newcomer's JoinGroup is parked.
    newcomer = Consumer(await connect("newcomer"), "odd")
    joining = asyncio.create_task(newcomer.join())
    parked = await api.wait("odd", state="PreparingRebalance", members=2)
    flags = {m["member_id"]: m["awaiting_join"] for m in parked["members"]}
    assert flags[odd.member_id] is False and list(flags.values()).count(True) == 1
    await odd.join()
    await joining


async def test_unknown_group_is_404(api: ControlClient) -> None:
    answer = await api.get(url("v1", "groups", "nobody"))
    assert answer.status == 404 and "nobody" in answer.error
    events = await api.get(url("v1", "groups", "nobody", "events"))
    assert events.status == 404 and "nobody" in events.error


async def test_group_ids_with_special_characters(api: ControlClient, connect: Connect) -> None:
    await stable_group(api, connect, "team/orders v2")
    detail = await api.group("team/orders v2")
    assert detail["group_id"] == "team/orders v2"


async def test_group_events_limit_and_since_seq(api: ControlClient, connect: Connect) -> None:
    await stable_group(api, connect, "history", size=2)
    events = await api.events("history")
    seqs = [r["seq"] for r in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert {r["group_id"] for r in events} == {"history"}
    assert len({r["run_id"] for r in events}) == 1
    assert events[0]["event"] == "group_created"
    names = [r["event"] for r in events]
    for name in ("member_joined", "rebalance_started", "join_completed", "sync_completed", "state_changed"):
        assert name in names

    assert await api.events("history", limit=2) == events[-2:]
    assert await api.events("history", limit=0) == []
    # An empty value is taken as absent (the document's integer type does not allow it: not a well-formed request).
    empty = await api.get(url("v1", "groups", "history", "events"), query={"limit": ""}, well_formed=False)
    assert (empty.status, empty.json["events"]) == (200, events)
    assert await api.events("history", since_seq=seqs[2]) == events[3:]
    assert await api.events("history", since_seq=seqs[2], limit=1) == events[-1:]
    assert await api.events("history", since_seq=seqs[-1]) == []


# == the event stream ==========================================================================================


async def test_event_stream_filters_by_group(api: ControlClient, connect: Connect) -> None:
    async with api.stream({"group": "watched"}) as stream:
        await stable_group(api, connect, "ignored")
        await stable_group(api, connect, "watched")
        seen = await stream.until(lambda r: r["event"] == "sync_completed")
    assert {r["group_id"] for r in seen} == {"watched"}
    assert seen[0]["event"] == "group_created"
    seqs = [r["seq"] for r in seen]
    assert seqs == sorted(seqs)


async def test_event_stream_without_a_group_has_every_group(api: ControlClient, connect: Connect) -> None:
    async with api.stream() as stream:
        await stable_group(api, connect, "first")
        await stable_group(api, connect, "second")
        seen = await stream.until(lambda r: r["group_id"] == "second" and r["event"] == "sync_completed")
    # seq 1 is the broker's own broker_started (group_id ""), written before the stream was opened.
    assert [r["seq"] for r in seen] == list(range(2, len(seen) + 2))
    assert {r["group_id"] for r in seen} == {"first", "second"}


@pytest.mark.parametrize("how", ["since_seq", "Last-Event-ID", "since_seq over Last-Event-ID"])
async def test_event_stream_replays_after_a_sequence_number_then_goes_live(
    api: ControlClient, connect: Connect, how: str
) -> None:
    consumers = await stable_group(api, connect, "replayed", size=2)
    history = await api.events("replayed")
    after = history[2]["seq"]
    query: dict[str, str | int] = {"group": "replayed"}
    headers: dict[str, str] = {}
    if how == "since_seq":
        query["since_seq"] = after
    elif how == "Last-Event-ID":
        headers["Last-Event-ID"] = str(after)
    else:
        query["since_seq"] = after
        headers["Last-Event-ID"] = "1"
    async with api.stream(query, headers) as stream:
        replayed = [await stream.next() for _ in history[3:]]
        assert replayed == history[3:]
        kicked = consumers[1].member_id
        assert (await api.post(url("v1", "groups", "replayed", "members", kicked, "kick"))).status == 200
        live = await stream.next()
    assert live["seq"] == history[-1]["seq"] + 1
    assert (live["event"], live["member_id"], live["cause"]) == ("member_expired", kicked, "kicked")


async def test_event_stream_rejects_a_bad_since_seq(api: ControlClient) -> None:
    answer = await api.get("/v1/events", query={"since_seq": "soon"}, well_formed=False)
    assert answer.status == 400 and "since_seq" in answer.error


# == wait ===================================================================================================


async def test_wait_answers_at_once_when_the_condition_holds(api: ControlClient, connect: Connect) -> None:
    consumers = await stable_group(api, connect, "ready")
    # A 30 s timeout, but the answer must come at once.
    detail = await asyncio.wait_for(
        api.wait("ready", timeout_ms=30_000, state="stable", members=1, min_generation=consumers[0].generation),
        timeout=2.0,
    )
    assert detail["state"] == "Stable" and len(detail["members"]) == 1
    assert (await asyncio.wait_for(api.wait("ready", timeout_ms=30_000), timeout=2.0))["group_id"] == "ready"


async def test_wait_answers_when_the_condition_becomes_true(api: ControlClient, connect: Connect) -> None:
    first = await stable_group(api, connect, "growing")
    waiting = asyncio.create_task(api.wait("growing", state="Stable", members=2))
    await asyncio.sleep(0)
    second = Consumer(await connect("second"), "growing")
    await second.take_member_id()
    joining = asyncio.create_task(second.join())
    await api.wait("growing", state="PreparingRebalance")
    await asyncio.gather(first[0].join(), joining)
    assert not waiting.done()
    await synced(api, [first[0], second])
    detail = await asyncio.wait_for(waiting, timeout=3.0)
    assert len(detail["members"]) == 2 and detail["generation_id"] == second.generation


async def test_wait_for_a_group_that_does_not_exist_yet(api: ControlClient, connect: Connect) -> None:
    waiting = asyncio.create_task(api.wait("unborn", state="Stable", members=1))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    consumers = await stable_group(api, connect, "unborn")
    detail = await asyncio.wait_for(waiting, timeout=3.0)
    assert detail["members"][0]["member_id"] == consumers[0].member_id


async def test_wait_times_out_with_408_and_the_group(api: ControlClient, connect: Connect) -> None:
    await stable_group(api, connect, "stuck")
    started = time.monotonic()
    answer = await api.get(url("v1", "groups", "stuck", "wait"), query={"members": 5, "timeout_ms": 150})
    assert answer.status == 408
    assert time.monotonic() - started >= 0.14
    assert "150 ms" in answer.error
    assert answer.json["group"]["group_id"] == "stuck" and len(answer.json["group"]["members"]) == 1

    missing = await api.get(url("v1", "groups", "never", "wait"), query={"timeout_ms": 0})
    assert missing.status == 408 and missing.json["group"] is None


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ({"state": "Sleeping"}, ["state", "Sleeping"]),
        ({"members": "two"}, ["members", "integer"]),
        ({"min_generation": "-1"}, ["min_generation"]),
        ({"timeout_ms": "600001"}, ["timeout_ms"]),
        ({"timeout_ms": "1.5"}, ["timeout_ms", "integer"]),
        ({"generation": "3"}, ["generation", "unknown"]),
    ],
)
async def test_wait_rejects_bad_parameters(
    api: ControlClient, query: dict[str, str], words: list[str]
) -> None:
    answer = await api.get(url("v1", "groups", "anything", "wait"), query=query, well_formed=False)
    assert answer.status == 400
    for word in words:
        assert word in answer.error


@pytest.mark.parametrize(
    ("query", "words"),
    [({"limit": "ten"}, ["limit", "integer"]), ({"limit": "-1"}, ["limit"]), ({"since_seq": "x"}, ["since_seq"])],
)
async def test_group_events_rejects_bad_parameters(
    api: ControlClient, connect: Connect, query: dict[str, str], words: list[str]
) -> None:
    await stable_group(api, connect, "queried")
    answer = await api.get(url("v1", "groups", "queried", "events"), query=query, well_formed=False)
    assert answer.status == 400
    for word in words:
        assert word in answer.error


# == chaos verbs ===============================================================================================


async def test_kick_removes_the_member_and_the_group_rebalances(api: ControlClient, connect: Connect) -> None:
    stayer, leaver = await stable_group(api, connect, "kicking", size=2)
    generation = stayer.generation
    answer = await api.post(url("v1", "groups", "kicking", "members", leaver.member_id, "kick"))
    assert (answer.status, answer.json) == (
        200, {"group_id": "kicking", "member_id": leaver.member_id, "kicked": True}
    )
    detail = await api.group("kicking")
    assert detail["state"] == "PreparingRebalance"
    assert [m["member_id"] for m in detail["members"]] == [stayer.member_id]
    assert await leaver.heartbeat() is E.unknown_member_id
    assert await stayer.heartbeat() is E.rebalance_in_progress

    assert await rejoin(api, [stayer]) == generation + 1
    expired = [r for r in await api.events("kicking") if r["event"] == "member_expired"]
    assert [(r["member_id"], r["cause"]) for r in expired] == [(leaver.member_id, "kicked")]
    started = [r for r in await api.events("kicking") if r["event"] == "rebalance_started"]
    assert (started[-1]["cause"], started[-1]["member_id"]) == ("member_kicked", leaver.member_id)

    # The kicked consumer comes back as a new member, as a real client does.
    leaver.member_id = ""
    assert await grow(api, [stayer], [leaver]) == generation + 2


async def test_kick_of_unknown_group_or_member_is_404_and_changes_nothing(
    api: ControlClient, connect: Connect
) -> None:
    await stable_group(api, connect, "untouched")
    before = without_ages(await api.group("untouched"))
    missing_member = await api.post(url("v1", "groups", "untouched", "members", "ghost", "kick"))
    assert missing_member.status == 404 and "ghost" in missing_member.error
    missing_group = await api.post(url("v1", "groups", "nowhere", "members", "ghost", "kick"))
    assert missing_group.status == 404 and "nowhere" in missing_group.error
    assert without_ages(await api.group("untouched")) == before


async def test_fence_makes_the_old_member_id_fenced(api: ControlClient, connect: Connect) -> None:
    (static,) = await stable_group(api, connect, "fencing", instance_id="worker-1")
    old = static.member_id
    answer = await api.post(url("v1", "groups", "fencing", "instances", "worker-1", "fence"))
    assert answer.status == 200
    body = answer.json
    assert body["group_id"] == "fencing" and body["group_instance_id"] == "worker-1"
    assert body["member_id"] == old and body["new_member_id"] != old
    assert await static.heartbeat(4) is E.fenced_instance_id
    assert E.fenced_instance_id.value == 82
    detail = await api.group("fencing")
    assert [(m["member_id"], m["group_instance_id"]) for m in detail["members"]] == [
        (body["new_member_id"], "worker-1")
    ]
    fenced = [r for r in await api.events("fencing") if r["event"] == "member_fenced"]
    assert [(r["member_id"], r["new_member_id"], r["cause"]) for r in fenced] == [
        (old, body["new_member_id"], "fenced")
    ]


async def test_fence_of_unknown_instance_is_404_and_changes_nothing(api: ControlClient, connect: Connect) -> None:
    (dynamic,) = await stable_group(api, connect, "unfenced")
    before = without_ages(await api.group("unfenced"))
    for instance in ("worker-9", dynamic.member_id):  # a dynamic member has no instance id to fence
        answer = await api.post(url("v1", "groups", "unfenced", "instances", instance, "fence"))
        assert answer.status == 404 and instance in answer.error
    answer = await api.post(url("v1", "groups", "nowhere", "instances", "worker-1", "fence"))
    assert answer.status == 404 and "nowhere" in answer.error
    assert without_ages(await api.group("unfenced")) == before
    assert await dynamic.heartbeat() is E.none


async def test_rebalance_starts_one_and_refuses_a_second(api: ControlClient, connect: Connect) -> None:
    consumers = await stable_group(api, connect, "forced", size=2)
    generation = consumers[0].generation
    answer = await api.post(url("v1", "groups", "forced", "rebalance"))
    assert answer.status == 200
    assert answer.json | {"leader": None} == {
        "group_id": "forced", "state": "PreparingRebalance", "protocol_type": "consumer", "protocol": "range",
        "generation_id": generation, "leader": None, "members": 2,
        "group_type": "classic", "group_epoch": None, "assignment_epoch": None,
    }
    before = without_ages(await api.group("forced"))
    again = await api.post(url("v1", "groups", "forced", "rebalance"))
    assert again.status == 409 and "already rebalancing" in again.error
    assert without_ages(await api.group("forced")) == before
    started = [r for r in await api.events("forced") if r["event"] == "rebalance_started"]
    assert started[-1]["cause"] == "forced" and started[-1]["member_id"] is None
    assert await consumers[0].heartbeat() is E.rebalance_in_progress
    assert await rejoin(api, consumers) == generation + 1


async def test_rebalance_of_an_empty_or_unknown_group(api: ControlClient, connect: Connect) -> None:
    (only,) = await stable_group(api, connect, "emptied")
    assert (await api.post(url("v1", "groups", "emptied", "members", only.member_id, "kick"))).status == 200
    await api.wait("emptied", state="Empty")
    before = without_ages(await api.group("emptied"))
    answer = await api.post(url("v1", "groups", "emptied", "rebalance"))
    assert answer.status == 409 and "Empty" in answer.error
    assert without_ages(await api.group("emptied")) == before
    missing = await api.post(url("v1", "groups", "nowhere", "rebalance"))
    assert missing.status == 404 and "nowhere" in missing.error


# == fault rules ================================================================================================


async def test_fault_rules_add_list_delete_clear(api: ControlClient) -> None:
    assert await api.faults() == []
    first = await api.add_fault(api="heartbeat", action="error", error="rebalance_in_progress", group_id="g", count=3)
    assert first == first | {
        "id": "f1", "api": "Heartbeat", "action": "error", "error": "REBALANCE_IN_PROGRESS", "error_code": 27,
        "group_id": "g", "member_id": None, "group_instance_id": None, "client_id": None, "delay_ms": None,
        "count": 3, "probability": None, "seed": None, "duration_ms": None, "hits": 0, "active": True,
    }
    assert abs(first["created_ms"] - time.time() * 1000) < 60_000
    second = await api.add_fault(api=12, action="delay", delay_ms=50, probability=1, seed=3, duration_ms=1000)
    assert (second["id"], second["api"], second["probability"], second["seed"]) == ("f2", "Heartbeat", 1.0, 3)
    third = await api.add_fault(action="close", client_id="c", member_id="m", group_instance_id="i")
    assert (third["api"], third["client_id"], third["member_id"], third["group_instance_id"]) == (None, "c", "m", "i")
    assert [r["id"] for r in await api.faults()] == ["f1", "f2", "f3"]

    deleted = await api.delete("/v1/faults/f2")
    assert (deleted.status, deleted.data) == (204, b"")
    assert [r["id"] for r in await api.faults()] == ["f1", "f3"]
    again = await api.delete("/v1/faults/f2")
    assert again.status == 404 and "f2" in again.error
    assert [r["id"] for r in await api.faults()] == ["f1", "f3"]

    cleared = await api.delete("/v1/faults")
    assert (cleared.status, cleared.json) == (200, {"deleted": 2})
    assert await api.faults() == []
    assert (await api.delete("/v1/faults")).json == {"deleted": 0}
    assert (await api.add_fault(action="close"))["id"] == "f4"  # ids are never reused


async def test_error_rule_answers_the_error_count_times_then_normally(api: ControlClient, connect: Connect) -> None:
    (consumer,) = await stable_group(api, connect, "erring")
    rule = await api.add_fault(
        api="Heartbeat", member_id=consumer.member_id, action="error", error="rebalance_in_progress", count=2
    )
    answers = [await consumer.heartbeat(version) for version in (4, 0, 4, 3)]
    assert answers == [E.rebalance_in_progress, E.rebalance_in_progress, E.none, E.none]
    (listed,) = await api.faults()
    assert (listed["id"], listed["hits"], listed["active"]) == (rule["id"], 2, False)
    assert (await api.group("erring"))["state"] == "Stable"  # the coordinator never saw the faulted heartbeats

    # By code, on a request that takes the generic path.
    await api.add_fault(api="JoinGroup", group_id="erring-joins", action="error", error=15, count=1)
    joiner = Consumer(await connect("joiner"), "erring-joins")
    refused = await joiner.client.call(joiner.join_request())
    assert refused.error_code is E.coordinator_not_available
    await joiner.join()  # the rule is used up: MEMBER_ID_REQUIRED, then the join
    assert joiner.generation == 1
    metrics = await api.metrics()
    assert metrics[("group_broker_fault_hits_total", frozenset({"rule": "f2", "action": "error"}.items()))] == 1


async def test_delay_rule_holds_the_answer_and_everything_behind_it(api: ControlClient, connect: Connect) -> None:
    (consumer,) = await stable_group(api, connect, "delayed")
    bystander = Consumer(await connect("bystander"), "delayed-other")
    await bystander.join()
    await bystander.sync({bystander.member_id: b""})
    delay_ms = 300
    await api.add_fault(api="Heartbeat", client_id="delayed-c0", action="delay", delay_ms=delay_ms, count=1)
    client = consumer.client
    beat = heartbeat_request(4, "delayed", consumer.generation, consumer.member_id, None)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await client.send_raw(client.encode(beat, 101) + client.encode(beat, 102))
    first = asyncio.create_task(client.read_frame())
    # Another connection is not held up.
    assert await bystander.heartbeat() is E.none
    assert not first.done()
    arrivals = []
    for frame in (await first, await client.read_frame()):
        arrivals.append(loop.time() - started)
        correlation, body = client.decode(ApiKey.HEARTBEAT, 4, frame)
        assert body.error_code is E.none
        assert correlation == 101 + len(arrivals) - 1  # in order
    assert min(arrivals) >= delay_ms / 1000 - 0.005, arrivals
    (rule,) = await api.faults()
    assert rule["hits"] == 1


async def test_close_rule_closes_only_that_connection(api: ControlClient, connect: Connect) -> None:
    victim, survivor = await stable_group(api, connect, "closing", size=2)
    await api.add_fault(api="Heartbeat", client_id="closing-c0", action="close")
    before = (await api.metrics())[("group_broker_connections", frozenset())]
    beat = heartbeat_request(4, "closing", victim.generation, victim.member_id, None)
    await victim.client.send_raw(victim.client.encode(beat))
    assert await victim.client.closed_by_peer(timeout=3.0)
    assert await survivor.heartbeat() is E.none
    assert await survivor.heartbeat() is E.none

    async def one_fewer() -> bool:
        return (await api.metrics())[("group_broker_connections", frozenset())] == before - 1

    await eventually(one_fewer)
    (rule,) = await api.faults()
    assert (rule["hits"], rule["active"]) == (1, True)


async def test_swallowed_heartbeats_are_answered_but_the_member_expires(
    api: ControlClient, connect: Connect
) -> None:
    (consumer,) = await stable_group(api, connect, "swallowed", session_ms=1000)
    await api.add_fault(member_id=consumer.member_id, action="swallow_heartbeats")
    answers: list[ErrorCode] = []
    stop = asyncio.Event()

    async def keep_beating() -> None:
        while not stop.is_set():
            answers.append(await consumer.heartbeat())
            await asyncio.sleep(0.1)

    beating = asyncio.create_task(keep_beating())
    started = time.monotonic()
    try:
        detail = await api.wait("swallowed", state="Empty", members=0, timeout_ms=5000)
    finally:
        stop.set()
        await beating
    assert time.monotonic() - started >= 0.5  # the session (1000 ms from the last real heartbeat) ran out
    assert detail["members"] == []
    assert len(answers) >= 3 and set(answers) == {E.none}
    (expired,) = [r for r in await api.events("swallowed") if r["event"] == "member_expired"]
    assert expired["cause"] == "session_timeout" and expired["member_id"] == consumer.member_id
    assert expired["since_last_heartbeat_ms"] >= 1000
    (rule,) = await api.faults()
    assert rule["hits"] == len(answers)


async def test_probability_with_a_seed_is_a_repeatable_sequence(api: ControlClient, connect: Connect) -> None:
    (consumer,) = await stable_group(api, connect, "dice")
    spec = {"member_id": consumer.member_id, "action": "error", "error": "REBALANCE_IN_PROGRESS",
            "probability": 0.5, "seed": 1234}

    async def roll() -> list[bool]:
        rule = await api.add_fault(**spec)
        outcomes = [await consumer.heartbeat() is E.rebalance_in_progress for _ in range(24)]
        (listed,) = await api.faults()
        assert listed["hits"] == sum(outcomes)
        assert (await api.delete(url("v1", "faults", rule["id"]))).status == 204
        return outcomes

    first = await roll()
    assert True in first and False in first
    assert await roll() == first


async def test_a_rule_lapses_after_its_duration(api: ControlClient, connect: Connect) -> None:
    (consumer,) = await stable_group(api, connect, "lapsing")
    started = time.monotonic()
    await api.add_fault(member_id=consumer.member_id, action="error", error=27, duration_ms=300)
    assert await consumer.heartbeat() is E.rebalance_in_progress

    async def normal_again() -> bool:
        return await consumer.heartbeat() is E.none

    await eventually(normal_again)
    assert time.monotonic() - started >= 0.3 - 0.005
    (rule,) = await api.faults()
    assert rule["active"] is False and rule["hits"] >= 1


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"{", ["not valid JSON"]),
        (b"\xff", ["not valid JSON"]),
        (b"", ["JSON object"]),
        (b"[]", ["JSON object"]),
        (b'"close"', ["JSON object"]),
        (b'{"action": "close", "colour": "red"}', ["unknown field", "colour"]),
        (b'{"api": "Heartbeat"}', ["action"]),
        (b'{"action": "explode"}', ["action", "explode"]),
        (b'{"action": "close", "count": "3"}', ["count", "integer"]),
        (b'{"action": "close", "count": 0}', ["count"]),
        (b'{"action": "close", "count": true}', ["count", "integer"]),
        (b'{"action": "close", "group_id": 5}', ["group_id", "string"]),
        (b'{"action": "close", "seed": 1.5}', ["seed", "integer"]),
        (b'{"action": "close", "duration_ms": -1}', ["duration_ms"]),
        (b'{"action": "error"}', ["error"]),
        (b'{"action": "error", "error": "KAFKA_IS_ON_FIRE"}', ["error", "KAFKA_IS_ON_FIRE"]),
        (b'{"action": "error", "error": 0}', ["error", "NONE"]),
        (b'{"action": "error", "error": 9999}', ["error", "9999"]),
        (b'{"action": "error", "error": ["x"]}', ["error"]),
        (b'{"action": "error", "error": 27, "api": "ApiVersions"}', ["error", "ApiVersions"]),
        (b'{"action": "close", "error": 27}', ["error", "close"]),
        (b'{"action": "delay"}', ["delay_ms"]),
        (b'{"action": "delay", "delay_ms": 0}', ["delay_ms"]),
        (b'{"action": "delay", "delay_ms": 1.5}', ["delay_ms", "integer"]),
        (b'{"action": "close", "delay_ms": 10}', ["delay_ms", "delay"]),
        (b'{"action": "close", "api": "Teleport"}', ["api", "Teleport"]),
        (b'{"action": "close", "api": 99}', ["api", "99"]),
        (b'{"action": "close", "api": 1.5}', ["api"]),
        (b'{"action": "swallow_heartbeats", "api": "JoinGroup"}', ["swallow_heartbeats", "JoinGroup"]),
        (b'{"action": "close", "probability": 0}', ["probability"]),
        (b'{"action": "close", "probability": 1.5}', ["probability"]),
        (b'{"action": "close", "probability": -0.5}', ["probability"]),
        (b'{"action": "close", "probability": "0.5"}', ["probability"]),
        (b'{"action": "close", "probability": NaN}', ["probability"]),
    ],
)
async def test_bad_fault_rules_are_400_and_change_nothing(
    api: ControlClient, body: bytes, words: list[str]
) -> None:
    existing = await api.add_fault(action="close", client_id="nobody")
    answer = await api.post("/v1/faults", body=body, well_formed=False)
    assert answer.status == 400, answer.data
    for word in words:
        assert word in answer.error, answer.error
    assert await api.faults() == [existing]


@pytest.mark.parametrize(
    "rule",
    [
        {"action": "close", "colour": "red"},
        {"api": "Heartbeat"},
        {"action": "explode"},
        {"action": "close", "count": "3"},
        {"action": "close", "count": 0},
        {"action": "close", "group_id": 5},
        {"action": "close", "duration_ms": -1},
        {"action": "error"},
        {"action": "close", "error": 27},
        {"action": "delay"},
        {"action": "delay", "delay_ms": 0},
        {"action": "close", "delay_ms": 10},
        {"action": "close", "probability": 0},
        {"action": "close", "probability": 1.5},
    ],
)
def test_the_fault_rule_schema_rejects_what_the_server_rejects(spec: dict[str, Any], rule: dict[str, Any]) -> None:
    """Where JSON Schema can say it (not for names the server looks up), the document refuses the same rules."""
    validator = component_validator(spec, "FaultRuleSpec")
    assert not validator.is_valid(rule)
    assert validator.is_valid({"action": "close", "count": 1, "probability": 1, "seed": -5, "api": None})
    assert validator.is_valid({"action": "error", "error": "rebalance_in_progress", "api": 12})


async def test_an_oversized_body_is_413(api: ControlClient) -> None:
    answer = await api.post("/v1/faults", body=b'{"action": "close", "client_id": "' + b"x" * 2_000_000 + b'"}')
    assert answer.status == 413
    assert await api.faults() == []


# == unknown paths, wrong methods and ids ==================================================================


@pytest.mark.parametrize("path", ["/v1", "/v2/groups", "/v1/groups/g/members", "/v1/faults/f1/hits", "/metrics/x"])
async def test_unknown_path_is_404_json(api: ControlClient, path: str) -> None:
    answer = await api.get(path, documented=False)
    assert answer.status == 404
    assert answer.error == f"no such endpoint: GET {path}"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", "/v1/faults"),
        ("POST", "/healthz"),
        ("PUT", "/v1/groups/g"),  # DELETE is DeleteGroups (version 1.4)
        ("GET", "/v1/groups/g/offsets/reset"),
        ("GET", "/v1/groups/g/rebalance"),
        ("GET", "/v1/groups/g/members/m/kick"),
        ("POST", "/v1/faults/f1"),
        ("PATCH", "/v1/events"),
        ("POST", "/v1/cluster"),
        ("GET", "/v1/cluster/nodes/1/stop"),
        ("DELETE", "/v1/cluster/coordinators"),
        ("GET", "/v1/cluster/partitions/topic/0/leader"),
    ],
)
async def test_wrong_method_is_405_json(api: ControlClient, method: str, path: str) -> None:
    answer = await api.call(method, path, documented=False)
    assert answer.status == 405
    assert answer.error == f"{method} is not allowed on {path}"


async def test_unknown_rule_id_is_404(api: ControlClient) -> None:
    rule = await api.add_fault(action="close", client_id="nobody")
    answer = await api.delete(url("v1", "faults", "f99"))
    assert answer.status == 404 and "f99" in answer.error
    assert await api.faults() == [rule]


# == where it listens ===================================================================================


def test_the_default_admin_host_is_loopback() -> None:
    assert settings.Settings().admin_host == "127.0.0.1"
    assert settings.Settings().admin_port == 9644
    parsed = settings.parse([], environ={})
    assert (parsed.admin_host, parsed.admin_port) == ("127.0.0.1", 9644)
    assert settings.parse(["--admin-port", "-1"], environ={}).admin_port == -1


async def test_admin_port_minus_one_turns_the_api_off() -> None:
    server = BrokerServer(broker_settings(admin_port=-1))
    await server.start()
    try:
        assert server.control is None
        assert server.ready
    finally:
        await server.stop()


async def test_the_api_listens_on_the_admin_host(broker: BrokerServer) -> None:
    assert broker.control.host == "127.0.0.1"
    assert broker.control.port > 0
