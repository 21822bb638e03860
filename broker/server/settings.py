"""The server's settings: where it listens, who it is, its socket and connection limits (Kafka's
``SocketServerConfigs`` and ``KRaftConfigs`` names) and the control listener it binds, each declared once as a
``Setting`` (broker/setting.py).

With them, the listener syntax they parse (Kafka's ``listeners`` entries, ``NAME://host:port``, as its
``EndPoint``) and the addresses derived from it: ``settings.py`` of config/ re-exports these; the command line
(``broker/cli/``) and the embedded broker use ``reachable_host`` and ``host_port`` to build bootstrap strings and
URLs.

A leaf: it imports only the declaration type (stdlib otherwise), never the server itself, so that
broker/config/settings.py (a layer below the server) can collect these declarations into ``Settings`` without an
import pointing up; tests/test_layout.py ranks it below config/ for that reason. It also says which security
protocols a listener may ask for (issue 25 item 7): the server's to know, config/'s to refuse before anything binds.

The control API's address is declared here too: ``server/control_listener.py`` binds that port (control/ only
answers behind it), and a leaf of control/'s own would load two more modules (the package and the leaf) before
serve's first answer, which tests/cli/test_serve_imports.py counts (issue 17).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from broker.setting import INT32_MAX, Setting, names_from_toml, parse_names

# Kafka's SecurityProtocol names. Kafka finds a listener's protocol in listener.security.protocol.map, whose default
# maps each of these names to itself; this broker has no such setting, so a listener named after one asks for that
# protocol, and any other name (INTERNAL, EXTERNAL) is a label on a plaintext listener.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One entry of Kafka's ``listeners`` or ``advertised.listeners``: ``NAME://host:port``."""

    name: str
    host: str
    port: int

    @property
    def security_protocol(self) -> str:
        """What a client of this listener must speak (Kafka normalises listener names to upper case)."""
        name = self.name.upper()
        return name if name in SECURITY_PROTOCOLS else "PLAINTEXT"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_ENDPOINT = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?:\[(?P<ipv6>[^\]]*)\]|(?P<host>[^:/\[\]]*)):(?P<port>\d+)$")


def parse_endpoints(text: str) -> tuple[Endpoint, ...]:
    """Kafka's listener list: comma-separated ``NAME://host:port``; an empty host means every interface."""
    endpoints = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        match = _ENDPOINT.match(item)
        if match is None:
            raise ValueError(f"{item!r} is not NAME://HOST:PORT")
        port = int(match["port"])
        if port > 65535:
            raise ValueError(f"{item!r}: port {port} is out of range")
        host = match["ipv6"] if match["ipv6"] is not None else match["host"]
        endpoints.append(Endpoint(match["name"], host, port))
    names = [e.name for e in endpoints]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"listener name {duplicates[0]} appears twice")
    return tuple(endpoints)


def is_wildcard(host: str) -> bool:
    """Kafka's "every interface" hosts: empty (``PLAINTEXT://:9092``), 0.0.0.0 and ::."""
    return host in ("", "0.0.0.0", "::")


def reachable_host(bound: str) -> str:
    """Where a client on this machine reaches a listener bound to ``bound``: loopback for a wildcard."""
    return "127.0.0.1" if bound in ("", "0.0.0.0") else "::1" if bound == "::" else bound


def host_port(host: str, port: int) -> str:
    """``host:port``, an IPv6 address in brackets (for bootstrap strings and URLs)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# What a listener speaks: plaintext, and SASL over plaintext (issue 30: broker/security/sasl/). The TLS part adds
# "SSL"; "SASL_SSL" is added when TLS and SASL merge. Until then a listener that asks for another refuses the start
# rather than serving plaintext to a client configured for TLS.
SERVED_SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT")


def refuse_unserved(listeners: Iterable[Endpoint]) -> None:
    """ValueError naming the first listener whose security protocol this broker cannot speak."""
    for listener in listeners:
        if listener.security_protocol not in SERVED_SECURITY_PROTOCOLS:
            raise ValueError(
                f"listener {listener}: security protocol {listener.security_protocol} is not served by this broker "
                f"(only {', '.join(SERVED_SECURITY_PROTOCOLS)})"
            )


def _endpoints_from_toml(value: Any) -> str | None:
    """A TOML list of ``NAME://HOST:PORT`` entries, as the comma-separated flag."""
    return ",".join(str(item) for item in value) if isinstance(value, list) else None


def parse_node_endpoints(text: str) -> tuple[tuple[int, tuple[Endpoint, ...]], ...]:
    """Each node's own ``advertised.listeners`` (Kafka sets them per broker): ``ID=NAME://HOST:PORT,...`` entries
    separated by ``;``, e.g. ``1=EXTERNAL://localhost:29092;2=EXTERNAL://localhost:39092``."""
    nodes: dict[int, tuple[Endpoint, ...]] = {}
    for item in (part.strip() for part in text.split(";")):
        if not item:
            continue
        node, equals, listeners = item.partition("=")
        if not equals or not node.strip().lstrip("-").isdigit():
            raise ValueError(f"{item!r} is not NODE_ID=NAME://HOST:PORT,...")
        node_id = int(node)
        if node_id in nodes:
            raise ValueError(f"node {node_id} appears twice")
        nodes[node_id] = parse_endpoints(listeners)
    return tuple(nodes.items())


def _node_endpoints_from_toml(value: Any) -> str | None:
    """A TOML table ``{"1" = ["EXTERNAL://localhost:29092"], ...}`` (or one string per node), as the flag."""
    if not isinstance(value, dict):
        return None
    return ";".join(
        f"{node}={','.join(map(str, listeners)) if isinstance(listeners, list) else listeners}"
        for node, listeners in value.items()
    )


def parse_host_counts(text: str) -> tuple[tuple[str, int], ...]:
    """Kafka's ``max.connections.per.ip.overrides``: comma-separated ``host:count`` (the last colon splits, so an
    IPv6 address needs no brackets)."""
    pairs = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, colon, count = item.rpartition(":")
        if not colon or not host or not count.isdigit():
            raise ValueError(f"{item!r} is not HOST:COUNT")
        pairs.append((host.strip("[]"), int(count)))
    return tuple(pairs)


def _host_counts_from_toml(value: Any) -> str | None:
    """A TOML table ``{"10.0.0.5" = 3}``, as the flag's ``HOST:COUNT,...``."""
    return ",".join(f"{host}:{count}" for host, count in value.items()) if isinstance(value, dict) else None


# -- where the broker listens and who it is --------------------------------------------------------------------

HOST = Setting("host", "0.0.0.0", str, "address to listen on (when --listeners is not set)")
PORT = Setting(
    "port", 9092, int, "port to listen on (0 picks a free one; when --listeners is not set)", bounds=(0, 65535)
)
LISTENERS = Setting(
    "listeners", (), parse_endpoints, "NAME://HOST:PORT,...: one listener each, overrides --host/--port",
    kafka="listeners", kafka_default="PLAINTEXT://:9092", shown_default="PLAINTEXT://HOST:PORT",
    from_toml_shape=_endpoints_from_toml,
)
ADVERTISED_LISTENERS = Setting(
    "advertised_listeners", (), parse_endpoints,
    "NAME://HOST:PORT,...: what Metadata and FindCoordinator return to clients of each listener",
    kafka="advertised.listeners", kafka_default="listeners", shown_default="the listeners",
    from_toml_shape=_endpoints_from_toml,
)
ADVERTISED_HOST = Setting(
    "advertised_host", None, str, "host to advertise for listeners without an advertised.listeners entry",
    shown_default="listen host, or localhost",
)
ADVERTISED_PORT = Setting(
    "advertised_port", None, int, "port to advertise likewise", shown_default="the bound port", bounds=(1, 65535)
)
NODE_ID = Setting("node_id", 1, int, "this broker's node id", kafka="node.id", kafka_default="-1 (must be set)")
CLUSTER_ID = Setting(  # empty: a random one in Kafka's format, drawn by Settings.__post_init__
    "cluster_id", "", str, "cluster id reported in Metadata (Kafka's comes from `kafka-storage.sh format`)",
    shown_default="random, Kafka's format",
)

# -- sockets and connections -----------------------------------------------------------------------------------

SOCKET_REQUEST_MAX_BYTES = Setting(
    "socket_request_max_bytes", 104_857_600, int, "largest request; a larger one closes the connection",
    kafka="socket.request.max.bytes",
)
SOCKET_SEND_BUFFER_HIGH_BYTES = Setting(
    "socket_send_buffer_high_bytes", 4 * 1024 * 1024, int,
    "stop reading a connection and answering its queued requests while more than this many bytes of answers "
    "wait to be sent to it (Kafka has no such setting: it mutes a connection until its answer is sent)",
)
SOCKET_SEND_BUFFER_LOW_BYTES = Setting(
    "socket_send_buffer_low_bytes", 1024 * 1024, int,
    "resume once the answers waiting to be sent drain to this many bytes (Kafka has no such setting either)",
)
MAX_CONNECTIONS = Setting(
    "max_connections", INT32_MAX, int,
    "most client connections at once, all listeners together; at the limit the broker stops accepting until "
    "one closes (the next connection waits, unread)",
    kafka="max.connections",
)
MAX_CONNECTIONS_PER_IP = Setting(
    "max_connections_per_ip", INT32_MAX, int,
    "most client connections at once from one address; a connection over it is closed at once",
    kafka="max.connections.per.ip",
)
MAX_CONNECTIONS_PER_IP_OVERRIDES = Setting(
    "max_connections_per_ip_overrides", (), parse_host_counts,
    "HOST:COUNT,...: a per-address limit for these addresses", kafka="max.connections.per.ip.overrides",
    from_toml_shape=_host_counts_from_toml,
)

# -- the control listener (server/control_listener.py) -------------------------------------------------------

ADMIN_HOST = Setting(
    "admin_host", "127.0.0.1", str, "address of the HTTP control API (0.0.0.0 exposes it: it can kick members)"
)
ADMIN_PORT = Setting(  # its default, when taken and not asked for, gives way to a free one (issue 18)
    "admin_port", 9644, int,
    "port of the HTTP control API (0 picks a free one, -1 turns it off; the default, when taken and not asked "
    "for, gives way to a free one)",
    bounds=(-1, 65535),
)


# -- the nodes of this process (issue 29; docs/spec/cluster.md 8.1) ---------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """A bare ``ClusterConfig()`` is today's broker: one node, Kafka's 50 internal partitions each."""

    nodes: int = Setting(
        "nodes", 1, int,
        "nodes in this process: node i has node id --node-id + i and listens on each listener's port + i; "
        "partitions and group coordinators are spread over them, and the control API stops and starts them",
        bounds=(1, 64),
    ).field()
    offsets_topic_num_partitions: int = Setting(
        "offsets_topic_num_partitions", 50, int,
        "__consumer_offsets partitions: a group's coordinator is the leader of partition "
        "abs(hashCode(group id)) modulo this (kept by a data directory, which refuses another value)",
        kafka="offsets.topic.num.partitions", bounds=(1, 10_000),
    ).field()
    transaction_state_log_num_partitions: int = Setting(
        "transaction_state_log_num_partitions", 50, int,
        "__transaction_state partitions, likewise for transactional ids", kafka="transaction.state.log.num.partitions",
        bounds=(1, 10_000),
    ).field()
    default_replication_factor: int = Setting(
        "default_replication_factor", 0, int,
        "replicas of each partition, placed round robin over the nodes; 0 is min(3, --nodes)",
        kafka="default.replication.factor", kafka_default="1", shown_default="min(3, nodes)", bounds=(0, 64),
    ).field()
    node_advertised_listeners: tuple[tuple[int, tuple[Endpoint, ...]], ...] = Setting(
        "node_advertised_listeners", (), parse_node_endpoints,
        "ID=NAME://HOST:PORT,...;ID=...: a node's own advertised listeners, for nodes a port mapping does not reach "
        "on port + i (a listener a node leaves out advertises the advertised listener's port + i)",
        shown_default="none", from_toml_shape=_node_endpoints_from_toml,
    ).field()
    coordinator_load_delay_ms: int = Setting(
        "coordinator_load_delay_ms", 0, int,
        "how long a node that gains a coordinator partition answers COORDINATOR_LOAD_IN_PROGRESS for its groups and "
        "transactional ids (a chaos knob; the control API changes it at run time)",
        bounds=(0, 3_600_000),
    ).field()


# -- SASL (issue 30, docs/spec/security.md 14.1): the ``sasl`` section of Settings ------------------------------
# Kafka's names are accepted in a TOML file (sasl.enabled.mechanisms, connections.max.reauth.ms,
# connection.failed.authentication.delay.ms, sasl.server.max.receive.size); the users and the OAUTHBEARER options
# are JAAS entries in Kafka (PlainLoginModule user_<name>, OAuthBearerLoginModule unsecuredValidator*), flags here.
# Declared in this leaf rather than beside broker/security/: serve's first answer loads no more modules for them.

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
OAUTHBEARER = "OAUTHBEARER"
# What this broker can serve (GSSAPI and the secured OAUTHBEARER validator are not offered: spec 14.6 item 2).
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)
SCRAM_MECHANISMS = (SCRAM_SHA_256, SCRAM_SHA_512)
# What a --sasl-users entry without a mechanism list gets: every password mechanism.
PASSWORD_MECHANISMS: tuple[str, ...] = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)


@dataclass(frozen=True, slots=True)
class UserEntry:
    """One ``--sasl-users`` entry: a user, its password and the mechanisms it gets a credential for."""

    name: str
    password: str
    mechanisms: tuple[str, ...] = PASSWORD_MECHANISMS

    def __repr__(self) -> str:  # never the password, not even in a traceback or a settings dump
        return f"UserEntry({self.name!r}, mechanisms={self.mechanisms!r})"


def parse_mechanisms(text: str) -> tuple[str, ...]:
    """Kafka's ``sasl.enabled.mechanisms`` (a LIST), upper-cased; a mechanism this broker cannot serve refuses."""
    names = tuple(name.upper() for name in parse_names(text))
    for name in names:
        if name not in MECHANISMS:
            raise ValueError(f"SASL mechanism {name} is not served (only {', '.join(MECHANISMS)})")
    return names


def parse_users(text: str) -> tuple[UserEntry, ...]:
    """``alice:secret,bob:bob-secret:SCRAM-SHA-512+PLAIN``: comma-separated ``USER:PASSWORD[:MECHANISM+...]``.

    The last ``:`` part is a mechanism list only when every ``+``-separated item of it names a password mechanism;
    otherwise it belongs to the password (which may then hold a ``:``)."""
    entries: list[UserEntry] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, colon, rest = item.partition(":")
        if not colon or not name:
            raise ValueError(f"{item.split(':')[0]!r}: a SASL user is USER:PASSWORD[:MECHANISM+...]")
        password, mechanisms = rest, PASSWORD_MECHANISMS
        head, colon, tail = rest.rpartition(":")
        listed: tuple[str, ...] = tuple(mechanism.strip().upper() for mechanism in tail.split("+"))
        if colon and all(mechanism in PASSWORD_MECHANISMS for mechanism in listed):
            password, mechanisms = head, listed
        if not password:
            raise ValueError(f"SASL user {name!r} has an empty password")
        if any(entry.name == name for entry in entries):
            raise ValueError(f"SASL user {name!r} appears twice")
        entries.append(UserEntry(name, password, mechanisms))
    return tuple(entries)


def _users_from_toml(value: Any) -> str | None:
    """A TOML table ``{alice = "secret"}`` (or ``{bob = {password = "...", mechanisms = [...]}}``), as the flag."""
    if not isinstance(value, dict):
        return None
    items = []
    for name, entry in value.items():
        if isinstance(entry, dict):
            mechanisms = entry.get("mechanisms")
            suffix = ":" + "+".join(mechanisms) if mechanisms else ""
            items.append(f"{name}:{entry.get('password', '')}{suffix}")
        else:
            items.append(f"{name}:{entry}")
    return ",".join(items)


@dataclass(frozen=True, slots=True)
class SaslConfig:
    """How SASL_PLAINTEXT (and, with TLS, SASL_SSL) listeners authenticate (the ``sasl`` section of Settings)."""

    enabled_mechanisms: tuple[str, ...] = Setting(
        "sasl_enabled_mechanisms", PASSWORD_MECHANISMS, parse_mechanisms,
        "mechanisms a SASL listener offers (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER), listed in the "
        "SaslHandshake answer",
        kafka="sasl.enabled.mechanisms", kafka_default="GSSAPI", shown_default="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        from_toml_shape=names_from_toml,
    ).field()
    users: tuple[UserEntry, ...] = Setting(
        "sasl_users", (), parse_users,
        "USER:PASSWORD[:MECHANISM+...],...: SASL users; each gets PLAIN and both SCRAM credentials (4096 iterations) "
        "unless mechanisms are listed; AlterUserScramCredentials changes the SCRAM ones at run time",
        shown_default="none", from_toml_shape=_users_from_toml,
    ).field()
    connections_max_reauth_ms: int = Setting(
        "connections_max_reauth_ms", 0, int,
        "session lifetime of a SASL login (KIP-368): a request after it closes the connection unless the client "
        "re-authenticated; 0 = sessions never expire (an OAUTHBEARER session still ends with its token)",
        kafka="connections.max.reauth.ms", bounds=(0, 2**63 - 1),
    ).field()
    failed_authentication_delay_ms: int = Setting(
        "connection_failed_authentication_delay_ms", 100, int,
        "how long a failed SASL login waits before its failure answer (then the connection closes, ~100 ms later)",
        kafka="connection.failed.authentication.delay.ms", bounds=(0, INT32_MAX),
    ).field()
    max_receive_size: int = Setting(
        "sasl_server_max_receive_size", 524288, int,
        "largest request before a SASL login completes; a larger one closes the connection",
        kafka="sasl.server.max.receive.size", bounds=(1, INT32_MAX),
    ).field()
    oauthbearer_principal_claim: str = Setting(
        "oauthbearer_principal_claim", "sub", str,
        "the unsecured OAUTHBEARER token's claim that names the principal (JAAS unsecuredValidatorPrincipalClaimName)",
    ).field()
    oauthbearer_scope_claim: str = Setting(
        "oauthbearer_scope_claim", "scope", str,
        "the claim holding the token's scopes (JAAS unsecuredValidatorScopeClaimName)",
    ).field()
    oauthbearer_required_scope: tuple[str, ...] = Setting(
        "oauthbearer_required_scope", (), parse_names,
        "scopes every OAUTHBEARER token must carry, comma-separated (JAAS unsecuredValidatorRequiredScope)",
        shown_default="none", from_toml_shape=names_from_toml,
    ).field()
    oauthbearer_clock_skew_ms: int = Setting(
        "oauthbearer_clock_skew_ms", 0, int,
        "clock skew allowed when checking a token's iat and exp (JAAS unsecuredValidatorAllowableClockSkewMs)",
        bounds=(0, INT32_MAX),
    ).field()
