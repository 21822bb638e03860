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

from broker.setting import INT32_MAX, Setting, names_from_toml, parse_bool, parse_names

# Kafka's SecurityProtocol names. A listener's protocol is its entry in listener.security.protocol.map, whose default
# maps each of these names to itself (``protocol_of``).
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One entry of Kafka's ``listeners`` or ``advertised.listeners``: ``NAME://host:port``."""

    name: str
    host: str
    port: int

    @property
    def security_protocol(self) -> str:
        """What a client of this listener must speak without a protocol map (``protocol_of`` with one)."""
        return protocol_of(self, ())[0]

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


# -- listeners by security protocol (issue 30; docs/spec/security.md 1) ------------------------------------------

# What a listener can speak: plaintext, TLS (broker/security/tls.py), SASL over plaintext (broker/security/sasl/)
# and SASL over TLS (both: the TLS handshake first, then the SASL login, whose principal wins over the certificate).
# A listener that asks for another protocol refuses the start.
SERVED_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

ProtocolMap = tuple[tuple[str, str], ...]


def parse_protocol_map(text: str) -> ProtocolMap:
    """Kafka's ``listener.security.protocol.map``: comma-separated ``NAME:PROTOCOL`` (both case-blind, as Kafka's
    ``ListenerName.normalised`` and ``SecurityProtocol.forName`` read them)."""
    pairs: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, colon, protocol = (part.strip() for part in item.partition(":"))
        if not colon or not name or not protocol:
            raise ValueError(f"{item!r} is not LISTENER_NAME:SECURITY_PROTOCOL")
        if protocol.upper() not in SECURITY_PROTOCOLS:
            raise ValueError(f"{item!r}: {protocol} is not a security protocol ({', '.join(SECURITY_PROTOCOLS)})")
        if name.upper() in pairs:
            raise ValueError(f"listener name {name} appears twice")
        pairs[name.upper()] = protocol.upper()
    return tuple(pairs.items())


def _protocol_map_from_toml(value: Any) -> str | None:
    """A TOML table ``{INTERNAL = "PLAINTEXT", EXTERNAL = "SSL"}``, as the flag's ``NAME:PROTOCOL,...``."""
    return ",".join(f"{name}:{protocol}" for name, protocol in value.items()) if isinstance(value, dict) else None


def protocol_of(listener: Endpoint, protocol_map: ProtocolMap) -> tuple[str, bool]:
    """The listener's security protocol, and whether Kafka would know it: its entry in the map, else its name when
    that is a protocol name (Kafka's default map), else PLAINTEXT, which Kafka refuses ("No security protocol
    defined for listener") and this broker allows with a warning for today's INTERNAL/EXTERNAL compose files
    (docs/spec/security.md 14.6 item 1)."""
    name = listener.name.upper()
    for mapped, protocol in protocol_map:
        if mapped == name:
            return protocol, True
    return (name, True) if name in SECURITY_PROTOCOLS else ("PLAINTEXT", False)


def uses_tls(protocol: str) -> bool:
    """SSL and SASL_SSL listeners speak TLS (Kafka's SslChannelBuilder / SaslChannelBuilder with an SslFactory)."""
    return protocol.endswith("SSL")


def refuse_unserved(listeners: Iterable[Endpoint], protocol_map: ProtocolMap = ()) -> None:
    """ValueError naming the first listener whose security protocol this broker cannot speak."""
    for listener in listeners:
        protocol = protocol_of(listener, protocol_map)[0]
        if protocol not in SERVED_SECURITY_PROTOCOLS:
            raise ValueError(
                f"listener {listener}: security protocol {protocol} is not served by this broker "
                f"(only {', '.join(SERVED_SECURITY_PROTOCOLS)})"
            )


LISTENER_SECURITY_PROTOCOL_MAP = Setting(
    "listener_security_protocol_map", (), parse_protocol_map,
    "NAME:PROTOCOL,...: each listener's security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); a listener named "
    "after a protocol has it, any other unmapped name is PLAINTEXT with a warning (Kafka refuses to start)",
    kafka="listener.security.protocol.map",
    kafka_default="PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
    shown_default="each protocol name to itself", from_toml_shape=_protocol_map_from_toml,
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


# -- the nodes of this process (issue 29; cluster-and-durability.md 8.1) ---------------------------------------------


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


# -- TLS on SSL and SASL_SSL listeners (issue 30; docs/spec/security.md 8, 14.1) ----------------------------------

SSL_CLIENT_AUTH = ("none", "requested", "required")


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """The certificate TLS listeners present and how they treat client certificates; read only when a listener
    speaks TLS (broker/security/tls.py). A bare ``TlsConfig()`` generates a CA and a certificate in the default
    directory."""

    ssl_dir: str = Setting(
        "ssl_dir", "", str,
        "where the generated CA (ca.pem, for clients; ca-key.pem, to sign client certificates) and server "
        "certificate go, reused on the next start",
        shown_default="$GROUP_BROKER_STATE_DIR/tls, else ./.group-broker/tls",
    ).field()
    ssl_cert: str | None = Setting(
        "ssl_cert", None, str,
        "PEM file with the certificate chain (leaf first) of TLS listeners, and its key unless --ssl-key is given, "
        "instead of a generated one",
        kafka="ssl.keystore.location", kafka_default="none (ssl.keystore.type=PEM)", shown_default="generated",
    ).field()
    ssl_key: str | None = Setting(
        "ssl_key", None, str, "PEM file with the unencrypted private key of --ssl-cert", shown_default="in --ssl-cert",
    ).field()
    ssl_cert_hosts: tuple[str, ...] = Setting(
        "ssl_cert_hosts", (), parse_names,
        "HOST,...: extra names (or IP addresses) in the generated certificate, beside localhost, this machine's "
        "name, 127.0.0.1, ::1 and every advertised host of every TLS listener",
        from_toml_shape=names_from_toml,
    ).field()
    ssl_truststore: str | None = Setting(
        "ssl_truststore", None, str, "PEM CA certificates that client certificates must chain to",
        kafka="ssl.truststore.location", kafka_default="none", shown_default="the generated CA",
    ).field()
    ssl_client_auth: str = Setting(
        "ssl_client_auth", "none", str,
        "ask TLS clients for a certificate: none, requested (verified if sent) or required (no certificate, no "
        "connection)",
        kafka="ssl.client.auth", choices=SSL_CLIENT_AUTH,
    ).field()
    ssl_principal_mapping_rules: str = Setting(
        "ssl_principal_mapping_rules", "DEFAULT", str,
        "how an SSL client certificate's subject becomes the principal: RULE:regex/replacement/[L|U],...,DEFAULT "
        "(DEFAULT: the whole DN, User:CN=alice,OU=eng)",
        kafka="ssl.principal.mapping.rules",
    ).field()

    def __post_init__(self) -> None:
        if self.ssl_key is not None and self.ssl_cert is None:
            raise ValueError("`ssl_key` is the key of `ssl_cert`, which is not set")
        if self.ssl_client_auth != "none" and self.ssl_cert is not None and self.ssl_truststore is None:
            raise ValueError(
                f"`ssl_client_auth` is {self.ssl_client_auth} with a certificate of your own (`ssl_cert`): "
                "`ssl_truststore` must name the CA that client certificates chain to"
            )
        if self.ssl_principal_mapping_rules != "DEFAULT":
            from broker.security.principal_mapping import PrincipalMapper  # a regex parser, stdlib only

            PrincipalMapper(self.ssl_principal_mapping_rules)  # ValueError "Invalid rule: ..." refuses the start


# -- ACLs (issue 30, the authorization part; docs/spec/security.md 9 and 14.1) ----------------------------------


def _parse_authorizer(text: str) -> str:
    """``standard``, or Kafka's class name for it (``authorizer.class.name`` in a TOML file); ``none`` is off."""
    lowered = text.strip()
    if lowered.endswith("StandardAuthorizer"):
        return "standard"
    return lowered.lower() or "none"


def _parse_super_users(text: str) -> tuple[str, ...]:
    """Kafka's ``super.users``: ``User:alice;User:admin``, each a principal ``Type:name``."""
    users = tuple(item.strip() for item in text.split(";") if item.strip())
    for user in users:
        if ":" not in user:
            raise ValueError(f"expected principals like User:alice separated by ';', got {user!r}")
    return users


@dataclass(frozen=True, slots=True)
class AclConfig:
    """The authorizer (Kafka's StandardAuthorizer): off unless ``authorizer`` is standard or ``acls_enabled``."""

    authorizer: str = Setting(
        "authorizer", "none", _parse_authorizer,
        "standard turns ACL checks on (Kafka's StandardAuthorizer; the ACL APIs answer SECURITY_DISABLED without)",
        kafka="authorizer.class.name", kafka_default="'' (none)", choices=("none", "standard"),
    ).field()
    acls_enabled: bool = Setting(
        "acls_enabled", False, parse_bool, "the same as --authorizer standard",
    ).field()
    super_users: tuple[str, ...] = Setting(
        "super_users", (), _parse_super_users,
        "principals allowed everything, separated by ';' (User:alice;User:admin)",
        kafka="super.users", shown_default="none",
    ).field()
    allow_everyone_if_no_acl_found: bool = Setting(
        "allow_everyone_if_no_acl_found", False, parse_bool,
        "allow an action on a resource nobody has an ACL for (any ACL on it, for anyone, ends that)",
        kafka="allow.everyone.if.no.acl.found",
    ).field()
    acl_file: str | None = Setting(
        "acl_file", None, str,
        "ACLs to load at start, one per line: ALLOW or DENY, principal, host, operations, TYPE:name, and LITERAL "
        "(the default) or PREFIXED",
    ).field()

    @property
    def enabled(self) -> bool:
        return self.authorizer == "standard" or self.acls_enabled
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
