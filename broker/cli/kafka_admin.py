"""A small blocking Kafka admin client for the offset commands (``offsets_commands.py``): stdlib sockets, kio's
generated schemas to encode requests and decode answers (as the broker itself reads and writes them).

One broker, one connection: the bootstrap address is the group coordinator (this broker is the only one). It asks
ApiVersions first and uses, per API, the newest version both sides know within the range written here, as Kafka's
clients do. The requests are those Kafka's AdminClient sends for ``kafka-consumer-groups.sh``: ListGroups (v5: the
state and type of every group), OffsetFetch, Metadata, ListOffsets, OffsetCommit (generation -1, member "": an
admin commit, as ``alterConsumerGroupOffsets`` sends it), OffsetDelete and DeleteGroups.

``connect`` is the one place a TCP connection is opened; it waits for a broker that is starting (``--wait-for-broker``).
"""

from __future__ import annotations

import io
import itertools
import os
import socket
import struct
from collections.abc import Sequence
from typing import Any

from broker.control.offset_reset import TopicPartition, UnknownTopic

BOOTSTRAP_ENV = "GROUP_BROKER_BOOTSTRAP"
TIMEOUT_S = 10.0
_CLIENT_ID = "group-broker-cli"
_MAX_ANSWER = 64 * 1024 * 1024

# The API keys used and the newest version of each this client writes (protocol/apis.py names them all).
_API_VERSIONS, _METADATA, _LIST_OFFSETS, _OFFSET_COMMIT, _OFFSET_FETCH = 18, 3, 2, 8, 9
_LIST_GROUPS, _DELETE_GROUPS, _OFFSET_DELETE, _FIND_COORDINATOR = 16, 42, 47, 10
_NEWEST = {_METADATA: 8, _LIST_OFFSETS: 8, _OFFSET_COMMIT: 9, _OFFSET_FETCH: 7, _LIST_GROUPS: 5,
           _DELETE_GROUPS: 2, _OFFSET_DELETE: 0, _FIND_COORDINATOR: 3}
_OLDEST = {_METADATA: 0, _LIST_OFFSETS: 1, _OFFSET_COMMIT: 2, _OFFSET_FETCH: 1, _LIST_GROUPS: 4,
           _DELETE_GROUPS: 0, _OFFSET_DELETE: 0, _FIND_COORDINATOR: 1}


class AdminError(Exception):
    """The broker could not be reached, or answered what this client cannot use."""


def bootstrap_address(given: str | None) -> tuple[str, int]:
    """``--bootstrap``, else ``GROUP_BROKER_BOOTSTRAP``, else the listener the ``serve`` settings name."""
    address = given or os.environ.get(BOOTSTRAP_ENV)
    if not address:
        from broker.config import settings

        try:
            listener = settings.parse([]).bind_endpoints()[0]
        except settings.SettingsError as error:
            raise AdminError(str(error)) from None
        if listener.port == 0:
            raise AdminError("the broker's port is 0 (picked at start): pass --bootstrap HOST:PORT")
        return settings.reachable_host(listener.host), listener.port
    first = address.split(",")[0].strip()
    host, colon, port = first.rpartition(":")
    if not colon or not port.isdigit() or not host or int(port) > 65535:
        raise AdminError(f"--bootstrap {first!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def connect(host: str, port: int, timeout: float, grace_s: float = 0.0) -> socket.socket:
    """The TCP connection to the broker (the one place it is made); a refused one is retried for ``grace_s``
    seconds, a broker that is starting (``--wait-for-broker``, broker/control/grace.py)."""
    from broker.control.grace import with_grace

    try:
        return with_grace(
            lambda: socket.create_connection((host, port), timeout=timeout), target=f"{host}:{port}", grace_s=grace_s
        )
    except OSError as error:
        raise AdminError(f"cannot reach the broker at {host}:{port}: {error.strerror or error}") from None


class KafkaAdmin:
    def __init__(self, host: str, port: int, timeout: float = TIMEOUT_S, grace_s: float = 0.0) -> None:
        self.address = f"{host}:{port}"
        self._socket = connect(host, port, timeout, grace_s)
        self._correlation = itertools.count(1)
        self._versions: dict[int, int] = {}
        try:
            self._negotiate()
        except BaseException:
            self._socket.close()
            raise

    def __enter__(self) -> KafkaAdmin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._socket.close()

    # -- the wire ---------------------------------------------------------------------------------------

    def _negotiate(self) -> None:
        answer = self._call(_API_VERSIONS, 0)
        if answer.error_code.value != 0:
            raise AdminError(f"ApiVersions answered {answer.error_code.name.upper()}")
        served = {int(api.api_key): (int(api.min_version), int(api.max_version)) for api in answer.api_keys}
        for key, newest in _NEWEST.items():
            low, high = served.get(key, (0, -1))
            version = min(newest, high)
            if version < max(low, _OLDEST[key]):
                continue  # not served: the command that needs it says so
            self._versions[key] = version

    def _version(self, api_key: int) -> int:
        if api_key not in self._versions:
            raise AdminError(f"the broker at {self.address} serves no version of API {api_key} this tool writes")
        return self._versions[api_key]

    def _request(self, api_key: int, **values: Any) -> Any:
        from protocol.codec import build

        version = self._version(api_key)
        return self._call(api_key, version, build(_schema(api_key, version, request=True), **values))

    def _call(self, api_key: int, version: int, body: Any = None) -> Any:
        from kio.serial import entity_reader, entity_writer

        request_cls = _schema(api_key, version, request=True)
        if body is None:
            body = request_cls()
        header_cls = request_cls.__header_schema__
        correlation_id = next(self._correlation)
        header = header_cls(
            request_api_key=api_key, request_api_version=version, correlation_id=correlation_id, client_id=_CLIENT_ID
        )
        buffer = io.BytesIO()
        entity_writer(header_cls)(buffer, header)
        entity_writer(request_cls)(buffer, body)
        payload = buffer.getvalue()
        try:
            self._socket.sendall(struct.pack(">i", len(payload)) + payload)
            size = struct.unpack(">i", self._read(4))[0]
            if not 0 < size <= _MAX_ANSWER:
                raise AdminError(f"the broker at {self.address} sent a frame of {size} bytes")
            frame = self._read(size)
        except OSError as error:
            raise AdminError(f"the broker at {self.address} did not answer: {error}") from None
        response_cls = _schema(api_key, version, request=False)
        answer_header_cls = (_schema(_API_VERSIONS, 0, request=False) if api_key == _API_VERSIONS else response_cls)
        answer_header, offset = entity_reader(answer_header_cls.__header_schema__)(frame, 0)
        if answer_header.correlation_id != correlation_id:
            raise AdminError(f"the broker at {self.address} answered correlation id {answer_header.correlation_id}")
        answer, _ = entity_reader(response_cls)(frame, offset)
        return answer

    def _read(self, count: int) -> bytes:
        data = bytearray()
        while len(data) < count:
            chunk = self._socket.recv(count - len(data))
            if not chunk:
                raise AdminError(f"the broker at {self.address} closed the connection")
            data += chunk
        return bytes(data)

    # -- the requests ----------------------------------------------------------------------------------------

    def find_coordinator(self, group: str) -> None:
        """FindCoordinator for the group, as Kafka's AdminClient asks first: one broker is every group's
        coordinator, so only its error matters (COORDINATOR_NOT_AVAILABLE while the broker loads)."""
        answer = self._request(_FIND_COORDINATOR, key=group, key_type=0)
        if answer.error_code.value != 0:
            raise AdminError(f"FindCoordinator for group '{group}' answered {answer.error_code.name.upper()}"
                             + (f": {answer.error_message}" if answer.error_message else ""))

    def group_state(self, group: str) -> tuple[str, str | None]:
        """The group's state and type from ListGroups; ("Dead", None) for a group the broker does not have (as
        Kafka's describeConsumerGroups shows one)."""
        answer = self._request(_LIST_GROUPS, states_filter=(), types_filter=())
        _check(answer.error_code)
        for listed in answer.groups:
            if listed.group_id == group:
                return listed.group_state, getattr(listed, "group_type", None)
        return "Dead", None

    def partitions_of(self, topics: Sequence[str]) -> dict[str, list[int]]:
        from protocol.codec import nested

        version = self._version(_METADATA)
        topic_cls = nested(_schema(_METADATA, version, request=True), "MetadataRequestTopic")
        answer = self._request(
            _METADATA, topics=tuple(_build(topic_cls, name=t) for t in topics), allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False, include_topic_authorized_operations=False,
        )
        found: dict[str, list[int]] = {}
        for topic in answer.topics:
            if topic.error_code.value != 0:
                raise UnknownTopic(str(topic.name))
            found[str(topic.name)] = sorted(int(p.partition_index) for p in topic.partitions)
        return {t: found[t] for t in topics if t in found}

    def committed(self, group: str) -> dict[TopicPartition, int]:
        answer = self._request(_OFFSET_FETCH, group_id=group, topics=None, require_stable=False)
        _check(getattr(answer, "error_code", None))
        return {
            (str(topic.name), int(p.partition_index)): int(p.committed_offset)
            for topic in answer.topics
            for p in topic.partitions
            if p.error_code.value == 0 and p.committed_offset >= 0
        }

    def log_offsets(self, partitions: Sequence[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        from protocol.codec import nested

        if not partitions:
            return {}
        version = self._version(_LIST_OFFSETS)
        cls = _schema(_LIST_OFFSETS, version, request=True)
        topic_cls, partition_cls = nested(cls, "ListOffsetsTopic"), nested(cls, "ListOffsetsPartition")
        answer = self._request(
            _LIST_OFFSETS, replica_id=-1, isolation_level=0,
            topics=tuple(
                _build(topic_cls, name=topic, partitions=tuple(
                    _build(partition_cls, partition_index=p, current_leader_epoch=-1, timestamp=timestamp)
                    for p in ps))
                for topic, ps in _by_topic(partitions).items()
            ),
        )
        return {
            (str(topic.name), int(p.partition_index)): int(p.offset)
            for topic in answer.topics
            for p in topic.partitions
            if p.error_code.value == 0
        }

    def commit(self, group: str, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, str]:
        """An admin commit (generation -1, member ""); the partitions refused, by Kafka error name."""
        from protocol.codec import nested

        version = self._version(_OFFSET_COMMIT)
        cls = _schema(_OFFSET_COMMIT, version, request=True)
        topic_cls, partition_cls = nested(cls, "OffsetCommitRequestTopic"), nested(cls, "OffsetCommitRequestPartition")
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append((partition, offset))
        answer = self._request(
            _OFFSET_COMMIT, group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            retention_time=-1,
            topics=tuple(
                _build(topic_cls, name=topic, partitions=tuple(
                    _build(partition_cls, partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                           commit_timestamp=-1, committed_metadata="")
                    for p, o in ps))
                for topic, ps in by_topic.items()
            ),
        )
        return {
            (str(topic.name), int(p.partition_index)): p.error_code.name.upper()
            for topic in answer.topics
            for p in topic.partitions
            if p.error_code.value != 0
        }

    def delete_offsets(
        self, group: str, partitions: Sequence[TopicPartition]
    ) -> tuple[str | None, dict[TopicPartition, str | None]]:
        """OffsetDelete: the top-level error and each partition's (None for success), by Kafka error name."""
        from protocol.codec import nested

        cls = _schema(_OFFSET_DELETE, self._version(_OFFSET_DELETE), request=True)
        topic_cls, partition_cls = nested(cls, "OffsetDeleteRequestTopic"), nested(cls, "OffsetDeleteRequestPartition")
        answer = self._request(
            _OFFSET_DELETE, group_id=group,
            topics=tuple(
                _build(topic_cls, name=topic, partitions=tuple(_build(partition_cls, partition_index=p) for p in ps))
                for topic, ps in _by_topic(partitions).items()
            ),
        )
        top = _name(answer.error_code)
        results: dict[TopicPartition, str | None] = {p: top for p in partitions}
        for topic in answer.topics:
            for p in topic.partitions:
                results[(str(topic.name), int(p.partition_index))] = _name(p.error_code)
        return top, results

    def delete_groups(self, groups: Sequence[str]) -> dict[str, str | None]:
        answer = self._request(_DELETE_GROUPS, groups_names=tuple(groups))
        return {str(result.group_id): _name(result.error_code) for result in answer.results}


def _schema(api_key: int, version: int, request: bool) -> Any:
    from kio.index import load_request_schema, load_response_schema

    return load_request_schema(api_key, version) if request else load_response_schema(api_key, version)


def _build(cls: type, **values: Any) -> Any:
    from protocol.codec import build

    return build(cls, **values)


def _by_topic(partitions: Sequence[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for topic, partition in partitions:
        grouped.setdefault(topic, []).append(partition)
    return grouped


def _name(error: Any) -> str | None:
    return None if error.value == 0 else str(error.name).upper()


def _check(error: Any) -> None:
    if error is not None and error.value != 0:
        raise AdminError(f"the broker answered {error.name.upper()}")
