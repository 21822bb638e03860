"""The control API's offset routes: reset a group's offsets, delete some of them, delete the group (issue 26).

``POST /v1/groups/{group}/offsets/reset``, ``DELETE /v1/groups/{group}/offsets`` and ``DELETE /v1/groups/{group}``
(docs/control-api.yaml). They run in the broker's loop and go through the coordinator's own entry points, those the
Kafka APIs call (``commit_offsets`` with an admin commit: generation -1, member ""; ``delete_offsets``;
``delete_groups``), so the validation, the error codes and the events are the Kafka APIs'. A reset is planned by
``offset_reset.py``, as the CLI's and Kafka's tool plan it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aiohttp import web

from broker.control import bounded_json
from broker.control.http_guard import HttpLimits, json_error, read_body, rejected
from broker.control.offset_reset import (
    EARLIEST,
    LATEST,
    GroupNotInactive,
    ResetUsageError,
    TopicPartition,
    UnknownTopic,
    check_inactive,
    kafka_error,
    partitions_to_reset,
    plan_reset,
    target_from,
)
from broker.coordinator.messages import CommitRequest, PartitionCommit

if TYPE_CHECKING:
    from broker.server.broker import BrokerServer

_TARGETS = {"to", "to_offset", "shift_by", "to_datetime", "by_duration"}
_RESET_FIELDS = {"topics", "all_topics", "execute", *_TARGETS}
_MAX_PARTITION = 2**31 - 1
_MAX_OFFSET = 2**63 - 1


def routes(server: BrokerServer, limits: HttpLimits) -> list[web.RouteDef]:
    handlers = OffsetRoutes(server, limits)
    return [
        web.post("/v1/groups/{group}/offsets/reset", handlers.reset),
        web.delete("/v1/groups/{group}/offsets", handlers.delete_offsets),
        web.delete("/v1/groups/{group}", handlers.delete_group),
    ]


class BrokerOffsets:
    """``offset_reset.OffsetSource`` read from the broker itself: the coordinator's OffsetFetch and the logs
    (ListOffsets' answers: earliest is the log start, latest the high watermark, a timestamp the first record at or
    after it that is fetchable)."""

    def __init__(self, server: BrokerServer) -> None:
        self._server = server

    def partitions_of(self, topics: Sequence[str]) -> dict[str, list[int]]:
        found = {}
        for name in topics:
            topic = self._server.topics.get(name)
            if topic is None:
                raise UnknownTopic(name)
            found[name] = list(range(topic.partitions))
        return found

    def committed(self, group: str) -> dict[TopicPartition, int]:
        offsets = self._server.coordinator.fetch_offsets(group, None)
        return {
            (topic, fetched.partition): fetched.offset
            for topic, partitions in offsets.topics
            for fetched in partitions
            if fetched.error.value == 0 and fetched.offset >= 0
        }

    def log_offsets(self, partitions: Sequence[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        answers = {}
        for name, index in partitions:
            topic = self._server.topics.get(name)
            log = topic.log(index) if topic is not None else None
            if log is None:
                continue
            latest = log.last_fetchable_offset(read_committed=False)
            if timestamp == LATEST:
                answers[(name, index)] = latest
            elif timestamp == EARLIEST:
                answers[(name, index)] = log.log_start_offset
            else:
                found = log.offset_for_timestamp(timestamp)
                answers[(name, index)] = found[0] if found is not None and found[0] < latest else -1
        return answers


class OffsetRoutes:
    def __init__(self, server: BrokerServer, limits: HttpLimits) -> None:
        self.server = server
        self.limits = limits

    async def reset(self, request: web.Request) -> web.Response:
        group = request.match_info["group"]
        try:
            body = bounded_json.loads(await read_body(request, self.limits))
        except bounded_json.BadJson as bad:
            return rejected(request, 400, str(bad))
        try:
            topics, all_topics, target_fields, execute = _reset_body(body)
            target = target_from(**target_fields, now_ms=int(time.time() * 1000))  # as Kafka's tool: now
        except ResetUsageError as bad:
            return json_error(400, str(bad))
        coordinator = self.server.coordinator
        summary = coordinator.group_summary(group)
        state = summary.state if summary is not None else "Dead"
        source = BrokerOffsets(self.server)
        try:
            check_inactive(group, state)
            partitions = partitions_to_reset(source, group, topics, all_topics)
            plan = plan_reset(source, group, partitions, target)
        except GroupNotInactive as busy:
            return json_error(409, str(busy))
        except ResetUsageError as bad:
            return json_error(400, str(bad))
        except UnknownTopic as missing:
            return json_error(404, str(missing))
        if execute and plan.offsets:
            by_topic: dict[str, list[PartitionCommit]] = {}
            for (topic, partition), offset in plan.offsets.items():
                by_topic.setdefault(topic, []).append(PartitionCommit(partition, offset))
            # An admin's commit, as Kafka's alterConsumerGroupOffsets sends it: generation -1, no member.
            result = coordinator.commit_offsets(
                CommitRequest(group, tuple((topic, tuple(commits)) for topic, commits in by_topic.items()))
            )
            refused = sorted({error.name.upper() for _, errors in result for _, error in errors if error.value})
            if refused:
                return json_error(409, f"the commit was refused: {', '.join(kafka_error(e) for e in refused)}")
        return _json({
            "group_id": group,
            "state": state,
            "executed": execute,
            "offsets": [{"topic": t, "partition": p, "new_offset": o} for (t, p), o in plan.offsets.items()],
            "warnings": plan.warnings,
        })

    async def delete_offsets(self, request: web.Request) -> web.Response:
        group = request.match_info["group"]
        unknown = sorted(set(request.query) - {"topic", "partition"})
        if unknown:
            return json_error(400, f"unknown query parameter(s) {unknown}")
        topics = request.query.getall("topic", [])
        if len(topics) != 1 or not topics[0]:
            return json_error(400, "exactly one topic is needed: ?topic=T[&partition=P...]")
        name = topics[0]
        try:
            partitions = [_partition(raw) for raw in request.query.getall("partition", [])]
        except ValueError as bad:
            return json_error(400, str(bad))
        topic = self.server.topics.get(name)
        if topic is None:
            return json_error(404, str(UnknownTopic(name)))
        partitions = list(dict.fromkeys(partitions)) or list(range(topic.partitions))
        missing = [p for p in partitions if p >= topic.partitions]
        if missing:
            return json_error(404, f"{kafka_error('UNKNOWN_TOPIC_OR_PARTITION')} ({name}: {missing})")
        result = self.server.coordinator.delete_offsets(group, [(name, partitions)])
        if result.error.value:
            error = result.error.name.upper()
            status = 404 if error == "GROUP_ID_NOT_FOUND" else 400 if error == "INVALID_GROUP_ID" else 409
            return json_error(status, kafka_error(error))
        answers = [(t, p, e) for t, errors in result.topics for p, e in errors]
        refused = sorted({e.name.upper() for _, _, e in answers if e.value})
        if refused:
            return json_error(409, ", ".join(kafka_error(e) for e in refused) + f" (topic {name})")
        return _json({"group_id": group, "offsets": [{"topic": t, "partition": p} for t, p, _ in answers]})

    async def delete_group(self, request: web.Request) -> web.Response:
        group = request.match_info["group"]
        if request.query:
            return json_error(400, f"unknown query parameter(s) {sorted(set(request.query))}")
        ((_, error),) = self.server.coordinator.delete_groups([group])
        if error.value:
            name = error.name.upper()
            status = 404 if name == "GROUP_ID_NOT_FOUND" else 409
            return json_error(status, f"group {group!r} could not be deleted: {kafka_error(name)}")
        return _json({"group_id": group, "deleted": True})


def _json(body: Any) -> web.Response:
    return web.json_response(body)


def _partition(raw: str) -> int:
    if not raw.isascii() or not raw.isdigit() or len(raw) > 10 or int(raw) > _MAX_PARTITION:
        raise ValueError(f"partition must be an integer from 0 to {_MAX_PARTITION}, got {raw[:40]!r}")
    return int(raw)


def _reset_body(body: Any) -> tuple[list[str], bool, dict[str, Any], bool]:
    """The reset's JSON body, checked field by field; ``target_from``'s keywords."""
    if not isinstance(body, dict):
        raise ResetUsageError("the body must be a JSON object: {\"topics\": {...} | \"all_topics\": true, a target, "
                              "\"execute\": bool}")
    unknown = sorted(set(body) - _RESET_FIELDS)
    if unknown:
        raise ResetUsageError(f"unknown field(s) {unknown}; the fields are {sorted(_RESET_FIELDS)}")
    execute = body.get("execute", False)
    all_topics = body.get("all_topics", False)
    if not isinstance(execute, bool) or not isinstance(all_topics, bool):
        raise ResetUsageError("execute and all_topics must be true or false")
    topics: list[str] = []
    named = body.get("topics")
    if named is not None:
        if not isinstance(named, dict) or not named:
            raise ResetUsageError("topics must be an object of topic names to a list of partitions or null")
        for name, partitions in named.items():
            if not name:
                raise ResetUsageError("a topic name must not be empty")
            if partitions is None:
                topics.append(name)
                continue
            if not isinstance(partitions, list) or not partitions or not all(
                type(p) is int and 0 <= p <= _MAX_PARTITION for p in partitions
            ):
                raise ResetUsageError(f"topics[{name!r}] must be null or a non-empty list of partitions (0 to "
                                      f"{_MAX_PARTITION})")
            topics.append(f"{name}:{','.join(map(str, partitions))}")
    if not topics and not all_topics:
        raise ResetUsageError("One of the reset scopes should be defined: topics or all_topics.")
    if topics and all_topics:
        raise ResetUsageError("topics and all_topics exclude each other")
    given = _TARGETS & set(body)
    if len(given) != 1:
        raise ResetUsageError(f"exactly one target is needed: one of {sorted(_TARGETS)} ({len(given)} given)")
    (key,) = given
    value = body[key]
    fields: dict[str, Any] = {}
    if key == "to":
        if value not in ("earliest", "latest"):
            raise ResetUsageError(f"to must be \"earliest\" or \"latest\", got {value!r:.40}")
        fields["to_earliest" if value == "earliest" else "to_latest"] = True
    elif key in ("to_offset", "shift_by"):
        if type(value) is not int or not -_MAX_OFFSET <= value <= _MAX_OFFSET:
            raise ResetUsageError(f"{key} must be a 64-bit integer, got {value!r:.40}")
        fields[key] = value
    else:
        if not isinstance(value, str) or not value:
            raise ResetUsageError(f"{key} must be an ISO-8601 string, got {value!r:.40}")
        fields[key] = value
    return topics, all_topics, fields, execute
