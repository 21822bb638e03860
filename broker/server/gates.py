"""Gates: what a connection consults once per frame, before any path answers it, fast or generic.

A gate sees the request's API key, version and client id and, when it needs them, the names the request carries
(``GateRequest.identity``, decoded once and only when asked). It lets the request through (``None``), or answers it
with nothing but an error in the API's own shape (``Answer``, Kafka's ``getErrorResponse``), holds it and
everything behind it (``Delay``), or closes the connection (``Close``). Fault rules are the gate today
(``FaultGate``); the principal for ACLs and quotas come next, each a gate of the same shape. Authentication (issue
30: nothing but ApiVersions, SaslHandshake and SaslAuthenticate before it, as Kafka's ``SaslServerAuthenticator``)
is the same idea kept per connection: the pipeline's authenticator (broker/security/sasl/authenticator.py) is
armed until the login completes, and its answers carry tokens, which a ``Verdict`` cannot.

A gate is ``armed`` while it may act. While none is, the connection answers Heartbeat, the steady
ConsumerGroupHeartbeat and ApiVersions on their fast paths and pays one truth test per pass for the gates; while
one is, every frame takes the generic decode, so that each gate sees a decoded request, whatever its API.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from broker.api.routes import RequestIdentity, request_identity
from broker.coordinator.client import LOCAL_CLIENT, Client
from broker.server.faults import CLOSE, SWALLOW, FaultRules


@dataclass(frozen=True, slots=True)
class Answer:
    """Answer the request with nothing but ``error`` (``ErrorCode.none``: all is well, the handler unasked)."""

    error: ErrorCode


@dataclass(frozen=True, slots=True)
class Delay:
    """Hold the request, and everything behind it on its connection (answers go in order), for ``ms``."""

    ms: int


@dataclass(frozen=True, slots=True)
class Close:
    """Close the connection, saying ``reason``; what was answered before still goes out."""

    reason: str


Verdict = Answer | Delay | Close


class GateRequest:
    """One decoded request, as a gate sees it."""

    __slots__ = ("_identity", "api_key", "api_version", "body", "client", "client_id")

    def __init__(
        self, api_key: int, api_version: int, client_id: str, body: Any, client: Client = LOCAL_CLIENT
    ) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.client_id = client_id
        self.body = body  # None for an ApiVersions newer than we speak (answered as Kafka does: v0, the error)
        self.client = client  # who sent it: the principal and host ACLs are decided on (issue 30)
        self._identity: RequestIdentity | None = None

    @property
    def identity(self) -> RequestIdentity:
        """The group, member, instance and transactional ids the request names (broker/api/routes.py)."""
        if self._identity is None:
            self._identity = request_identity(self.api_key, self.body)
        return self._identity


class Gate(Protocol):
    @property
    def armed(self) -> object:
        """Truthy while the gate may act on a request; read once per pass on the hot path, so a plain attribute
        (a dict of rules: its truth is a C check) rather than a computed one."""

    def check(self, request: GateRequest) -> Verdict | None:
        """What to do with ``request``; None lets it through to the next gate and then its handler."""


class FaultGate:
    """Fault rules (broker/server/faults.py) as a gate: a rule that matches the request acts on it.

    ``is_member(group_id, member_id)`` says whether the coordinator has a member: a swallow rule passes over one
    it no longer has, which must hear so, as it would from Kafka."""

    __slots__ = ("_is_member", "_rules", "armed")

    def __init__(self, rules: FaultRules, is_member: Callable[[str, str], bool]) -> None:
        self._rules = rules
        self._is_member = is_member
        self.armed = rules.rules  # the rules themselves: truthy while there is one

    def check(self, request: GateRequest) -> Verdict | None:
        if request.body is None:  # an ApiVersions newer than we speak is answered as Kafka does, never faulted
            return None
        identity = request.identity
        rule = self._rules.match(
            request.api_key,
            request.client_id,
            identity.group_id,
            identity.member_id,
            identity.group_instance_id,
            self._is_member,
            identity.transactional_id,
        )
        if rule is None:
            return None
        if rule.action == SWALLOW:
            return Answer(ErrorCode.none)  # all is well, says the broker, while the session runs out
        if rule.error is not None:
            return Answer(rule.error)
        if rule.action == CLOSE:
            return Close(f"fault rule {rule.id} closes the connection")
        assert rule.delay_ms is not None  # a delay rule: parse_rule requires its delay_ms
        return Delay(rule.delay_ms)
