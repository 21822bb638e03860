"""Find a broker's control API from its Kafka address: ``group-broker watch --bootstrap HOST:PORT`` (issue 18).

The default admin port (9644) gives way to a free one when another broker holds it, so the CLI asks the broker
itself, through Kafka's own protocol: Metadata v1 for the node id of the broker it reached, then DescribeConfigs v1
(api 32) on that BROKER resource for ``group.broker.control.url`` (broker/api/configs.py). A tiny blocking client,
stdlib only (socket and struct), both requests encoded by hand (the CLI starts without kio), one connection, 5 s per
step. No ApiVersions first: Metadata v1 and DescribeConfigs v1 are versions every Kafka 4 broker serves (KIP-896
kept them), so a plain Kafka broker answers too, and is told apart by the missing config.

Which address wins: ``--admin`` given, else ``--bootstrap``, else ``GROUP_BROKER_ADMIN_URL``, else
``GROUP_BROKER_BOOTSTRAP``, else the default URL (flags before variables, a URL before a Kafka address).
"""

from __future__ import annotations

import argparse
import os
import socket
import struct

from broker.control.client import URL_ENV, configured_url
from broker.control.grace import GraceError, grace_seconds, with_grace
from broker.server.settings import host_port

BOOTSTRAP_ENV = "GROUP_BROKER_BOOTSTRAP"
CONTROL_URL_CONFIG = "group.broker.control.url"  # broker/api/configs.py's CONTROL_URL_CONFIG
TIMEOUT_S = 5.0

_METADATA, _DESCRIBE_CONFIGS = 3, 32
_BROKER_RESOURCE = 4  # ConfigResource.Type.BROKER
_CLIENT_ID = b"group-broker-cli"
_MAX_ANSWER = 16 * 1024 * 1024  # a Metadata answer for no topics, or one config: far below this


class DiscoveryError(Exception):
    """The control API could not be found from the Kafka address; the message says why and what to do.

    ``refused``: nothing listens at the address (yet), which ``grace.with_grace`` waits out; ``usage``: a bad
    value the user gave (exit 2)."""

    def __init__(self, message: str, *, refused: bool = False, usage: bool = False) -> None:
        super().__init__(message)
        self.refused = refused
        self.usage = usage


def settle_admin(args: argparse.Namespace) -> None:
    """Fill ``args.admin`` with the control API's URL, asking the broker at the bootstrap address when that is how
    it was named. ``chaos run`` has a ``--bootstrap`` of its own (the running broker its workers use): its control
    API is found from it unless ``--admin`` or the URL variable names one."""
    handler = getattr(args, "_handler", None)
    if handler == "run_unavailable":
        return
    try:  # --wait-for-broker, else its variable, else the default: settled here for every command (issue 26)
        args.wait_for_broker = grace_seconds(args)
    except GraceError as error:
        raise DiscoveryError(str(error), usage=True) from None
    if handler == "run":
        if args.bootstrap is not None and args.admin is None and not os.environ.get(URL_ENV):
            args.admin = control_url(args.bootstrap, grace_s=args.wait_for_broker)
        return
    if args.admin:
        return
    bootstrap = args.bootstrap
    if bootstrap is None and not os.environ.get(URL_ENV):
        bootstrap = os.environ.get(BOOTSTRAP_ENV) or None
    args.admin = control_url(bootstrap, grace_s=args.wait_for_broker) if bootstrap else configured_url()


def control_url(bootstrap: str, timeout: float = TIMEOUT_S, grace_s: float = 0.0) -> str:
    """The control API's URL from the first address of ``bootstrap`` (Kafka's ``HOST:PORT[,HOST:PORT...]``) that
    answers; the first address's failure when none does. While every address refuses the connection (a broker
    starting), they are all tried again for up to ``grace_s`` seconds (``grace.with_grace``)."""
    return with_grace(lambda: _first_answer(bootstrap, timeout), target=bootstrap, grace_s=grace_s)


def _first_answer(bootstrap: str, timeout: float) -> str:
    failures: list[DiscoveryError] = []
    for address in (part.strip() for part in bootstrap.split(",")):
        if not address:
            continue
        try:
            return _ask(*_split(address), timeout)
        except DiscoveryError as error:
            failures.append(error)
    if not failures:
        raise DiscoveryError(f"--bootstrap {bootstrap!r} names no HOST:PORT", usage=True)
    raise DiscoveryError(str(failures[0]), refused=all(f.refused for f in failures), usage=failures[0].usage)


def _split(address: str) -> tuple[str, int]:
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit() or not host or int(port) > 65535:
        raise DiscoveryError(f"--bootstrap {address!r} is not HOST:PORT", usage=True)
    return host.strip("[]"), int(port)


def _ask(host: str, port: int, timeout: float) -> str:
    where = host_port(host, port)
    try:
        with socket.create_connection((host, port), timeout=timeout) as connection:
            node_id = _node_id(_Wire(connection, where), host, port)
            url, found = _control_url(_Wire(connection, where), node_id)
    except DiscoveryError:
        raise
    except ConnectionRefusedError:
        nobody = f"nothing listens at {where} (is the broker running, on that port?)"
        raise DiscoveryError(nobody, refused=True) from None
    except TimeoutError:
        raise DiscoveryError(f"{where} did not answer within {timeout:g} s") from None
    except socket.gaierror as error:
        raise DiscoveryError(f"cannot resolve {host!r}: {error.strerror}") from None
    except OSError as error:
        raise DiscoveryError(f"cannot reach {where}: {error.strerror or error}") from None
    if not found:
        raise DiscoveryError(
            f"{where} is a Kafka broker but not a group-broker (no {CONTROL_URL_CONFIG} in its configs): "
            "pass --admin URL"
        )
    if url is None:
        raise DiscoveryError(f"the group-broker at {where} runs without its control API (--admin-port -1)")
    return url


def _node_id(wire: _Wire, host: str, port: int) -> int:
    """Metadata v1 for no topics: the id of the broker listed at the address asked (the only one, on ours)."""
    answer = wire.call(_METADATA, 1, struct.pack(">i", 0))
    brokers = []
    for _ in range(answer.count()):
        node_id = answer.int32()
        broker_host, broker_port = answer.string(), answer.int32()
        answer.string()  # rack
        brokers.append((node_id, broker_host, broker_port))
    if not brokers:
        raise DiscoveryError(f"{wire.where} listed no brokers in its Metadata answer")
    for node_id, broker_host, broker_port in brokers:
        if broker_port == port and broker_host == host:
            return node_id
    return brokers[0][0]


def _control_url(wire: _Wire, node_id: int) -> tuple[str | None, bool]:
    """DescribeConfigs v1 on BROKER ``node_id``, for our one key: (its value, whether it was there at all)."""
    key = CONTROL_URL_CONFIG.encode()
    name = str(node_id).encode()
    body = (
        struct.pack(">ibh", 1, _BROKER_RESOURCE, len(name)) + name + struct.pack(">ih", 1, len(key)) + key
        + struct.pack(">b", 0)  # include_synonyms
    )  # fmt: skip
    answer = wire.call(_DESCRIBE_CONFIGS, 1, body)
    answer.int32()  # throttle_time_ms
    for _ in range(answer.count()):
        error_code = answer.int16()
        answer.string()  # error_message
        answer.int8()  # resource_type
        answer.string()  # resource_name
        for _ in range(answer.count()):
            config, value = answer.string(), answer.string()
            answer.int8(), answer.int8(), answer.int8()  # read_only, config_source, is_sensitive
            for _ in range(answer.count()):  # synonyms (none asked for)
                answer.string(), answer.string(), answer.int8()
            if error_code == 0 and config == CONTROL_URL_CONFIG:
                return value, True
    return None, False


class _Wire:
    """Request/answer over one connection: Kafka's size-prefixed frames, request header v1, response header v0."""

    def __init__(self, connection: socket.socket, where: str) -> None:
        self.connection = connection
        self.where = where
        self.correlation_id = 0

    def call(self, api_key: int, version: int, body: bytes) -> _Reader:
        self.correlation_id += 1
        header = struct.pack(">hhih", api_key, version, self.correlation_id, len(_CLIENT_ID)) + _CLIENT_ID
        self.connection.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        size = struct.unpack(">i", self._read(4))[0]
        if not 4 <= size <= _MAX_ANSWER:
            raise self.garbled(f"a frame of {size} bytes")
        answer = _Reader(self._read(size), self)
        if answer.int32() != self.correlation_id:
            raise self.garbled("another request's correlation id")
        return answer

    def _read(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.connection.recv(count - len(data))
            if not chunk:
                raise self.garbled("the connection closed")
            data += chunk
        return data

    def garbled(self, what: str) -> DiscoveryError:
        return DiscoveryError(f"{self.where} did not answer as a Kafka broker ({what}): pass --admin URL")


class _Reader:
    """Kafka's non-flexible primitives, read off one answer; running short is a garbled answer."""

    def __init__(self, data: bytes, wire: _Wire) -> None:
        self.data = data
        self.offset = 0
        self.wire = wire

    def _take(self, layout: str) -> int:
        size = struct.calcsize(layout)
        if self.offset + size > len(self.data):
            raise self.wire.garbled("an answer cut short")
        (value,) = struct.unpack_from(layout, self.data, self.offset)
        self.offset += size
        return int(value)

    def int8(self) -> int:
        return self._take(">b")

    def int16(self) -> int:
        return self._take(">h")

    def int32(self) -> int:
        return self._take(">i")

    def count(self) -> int:
        """An array's length (a null array read as empty)."""
        return max(self.int32(), 0)

    def string(self) -> str | None:
        size = self.int16()
        if size < 0:
            return None
        if self.offset + size > len(self.data):
            raise self.wire.garbled("an answer cut short")
        text = self.data[self.offset : self.offset + size].decode("utf-8", "replace")
        self.offset += size
        return text
