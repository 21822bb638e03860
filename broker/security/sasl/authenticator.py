"""One SASL connection's authentication, without I/O: Kafka's ``SaslServerAuthenticator`` state machine with the
re-authentication of ``KafkaChannel`` (KIP-368), docs/spec/security.md sections 3 and 7.

The connection (broker/server/pipeline.py) hands it every decoded request while ``pending`` (nothing is
authenticated yet, or a re-authentication runs), every raw token frame after a v0 handshake (``raw_tokens``), and
SaslHandshake on an authenticated connection (which may start a re-authentication). It answers with a ``Step``, or
None to let the request through to its handler: ApiVersions before the handshake, and once authenticated
everything (SaslHandshake and SaslAuthenticate then reach broker/api/sasl.py, which answers ILLEGAL_SASL_STATE as
Kafka's KafkaApis does). Once authenticated it costs the connection nothing per request but the session deadline
check (``expires_at_ms``), and only when the session has one.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker.events.names import AUTHENTICATION_FAILED, AUTHENTICATION_SUCCEEDED, REAUTHENTICATED, SESSION_EXPIRED
from broker.security.sasl.mechanism import SaslFailure, SaslServer
from broker.security.users import UserStore
from broker.server.settings import OAUTHBEARER, PLAIN, SCRAM_MECHANISMS, SaslConfig
from protocol.apis import ApiKey, api_name
from protocol.codec import build, response_schema

_API_VERSIONS = int(ApiKey.API_VERSIONS)
_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)
_AUTHENTICATE = int(ApiKey.SASL_AUTHENTICATE)
# KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS: a sooner SaslHandshake is KafkaApis' (ILLEGAL_SASL_STATE).
MIN_REAUTH_INTERVAL_MS = 1000


class SaslState(enum.Enum):
    INITIAL = "initial"  # INITIAL_REQUEST / HANDSHAKE_OR_VERSIONS_REQUEST: ApiVersions or SaslHandshake
    HANDSHAKE = "handshake"  # HANDSHAKE_REQUEST: ApiVersions was answered, SaslHandshake must follow
    AUTHENTICATE = "authenticate"  # tokens in SaslAuthenticate requests (v1 handshake)
    RAW_TOKENS = "raw_tokens"  # tokens as bare frames (v0 handshake, spec 2.4)
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(slots=True)
class Step:
    """What the connection does with one request or raw token.

    ``answer``: a response body for the request; ``raw``: a whole frame to write (a v0 token's answer); ``error``:
    answer the request with its API's own error answer of that code; ``close``: then close, this the reason;
    ``failed``: a failed authentication, whose answer waits ``connection.failed.authentication.delay.ms`` and whose
    close lingers (spec 3 rule 3); ``principal``: who the connection is from now on."""

    answer: Any = None
    raw: bytes | None = None
    error: ErrorCode | None = None
    close: str | None = None
    failed: bool = False
    principal: str | None = None


# (event name, fields) -> None: the broker's event hub, without the listener and peer, which the connection adds.
EventSink = Callable[[str, dict[str, Any]], None]


class SaslListener:
    """What every connection of one SASL listener shares: the settings, the users, the clock, the events."""

    def __init__(
        self, name: str, config: SaslConfig, users: UserStore, now_ms: Callable[[], int], events: EventSink
    ) -> None:
        from broker.security.sasl.oauthbearer import UnsecuredValidator

        self.name = name
        self.config = config
        self.users = users
        self.now_ms = now_ms
        self.events = events
        self.oauth = UnsecuredValidator(
            config.oauthbearer_principal_claim,
            config.oauthbearer_scope_claim,
            config.oauthbearer_required_scope,
            config.oauthbearer_clock_skew_ms,
        )

    def server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            from broker.security.sasl.plain import PlainServer

            return PlainServer(self.users.password_of)
        if mechanism in SCRAM_MECHANISMS:
            from broker.security.sasl.scram import ScramServer

            return ScramServer(mechanism, self.users.credential_of)
        assert mechanism == OAUTHBEARER
        from broker.security.sasl.oauthbearer import OAuthBearerServer

        return OAuthBearerServer(self.oauth, self.now_ms)

    def authenticator(self, who: Callable[[], dict[str, str]]) -> SaslAuthenticator:
        """``who``: the connection's peer and client id, for the events."""
        return SaslAuthenticator(self, who)


def _authenticate_answer(version: int, error: ErrorCode, message: str | None, token: bytes, lifetime_ms: int) -> Any:
    return build(
        response_schema(_AUTHENTICATE, version),
        error_code=error,
        error_message=message,
        auth_bytes=token,
        session_lifetime=datetime.timedelta(milliseconds=lifetime_ms),
    )


def _valid_software(body: Any) -> bool:
    """ApiVersionsRequest.isValid (KIP-511): v3+ names the client software."""
    from protocol.api_versions import SOFTWARE_NAME_VERSION

    return bool(
        SOFTWARE_NAME_VERSION.fullmatch(body.client_software_name)
        and SOFTWARE_NAME_VERSION.fullmatch(body.client_software_version)
    )


def _raw_frame(token: bytes) -> bytes:
    return len(token).to_bytes(4, "big") + token


class SaslAuthenticator:
    def __init__(self, listener: SaslListener, who: Callable[[], dict[str, str]]) -> None:
        self._listener = listener
        self._who = who
        self.state = SaslState.INITIAL
        self.pending = True  # the connection's gate is armed: every frame comes here first
        self.expires_at_ms: int | None = None  # the session's end (KIP-368); None: it has none
        self._server: SaslServer | None = None
        self._mechanism = ""
        self._principal: str | None = None  # after the first login
        self._previous_mechanism = ""  # during a re-authentication
        self._bad_mechanism: str | None = None  # REAUTH_BAD_MECHANISM's message
        self._last_reauth_start_ms = 0

    @property
    def raw_tokens(self) -> bool:
        return self.state is SaslState.RAW_TOKENS

    @property
    def reauthenticating(self) -> bool:
        return self._principal is not None and self.state is not SaslState.COMPLETE

    def expired(self) -> bool:
        """Whether the session has ended (SocketServer: nowNanos past the session's expiration)."""
        return self.expires_at_ms is not None and self._listener.now_ms() > self.expires_at_ms

    @property
    def failed_delay_s(self) -> float:
        return self._listener.config.failed_authentication_delay_ms / 1000

    def expire(self) -> str:
        """The session ended before a request (SocketServer "Disconnecting expired channel"): the close's reason."""
        self._emit(SESSION_EXPIRED, {"mechanism": self._mechanism, "principal": self._principal or ""})
        self.state = SaslState.FAILED
        return f"SASL session of {self._principal} expired (connections.max.reauth.ms or the token's exp)"

    def _emit(self, event: str, fields: dict[str, Any]) -> None:
        self._listener.events(event, {"listener": self._listener.name, **self._who(), **fields})

    # -- requests --------------------------------------------------------------------------------------------

    def request(self, api_key: int, version: int, body: Any) -> Step | None:
        """A decoded request while ``pending``, or a SaslHandshake once authenticated."""
        state = self.state
        if state is SaslState.COMPLETE:
            return self._maybe_reauthenticate(api_key, version, body)
        if state is SaslState.INITIAL and api_key == _API_VERSIONS:
            # SSA handleApiVersionsRequest: a version newer than ours (body None) or an invalid one is answered
            # with its error and may be retried; only a valid one moves on to the handshake.
            if body is not None and (version < 3 or _valid_software(body)):
                self.state = SaslState.HANDSHAKE
            return None
        if state in (SaslState.INITIAL, SaslState.HANDSHAKE) and api_key == _HANDSHAKE:
            return self._handshake(version, body.mechanism)
        if state is SaslState.AUTHENTICATE and api_key == _AUTHENTICATE:
            return self._token(version, body.auth_bytes)
        if state is SaslState.AUTHENTICATE:
            # SSA: an error response of that API with ILLEGAL_SASL_STATE, then the close.
            reason = f"Unexpected Kafka request of type {api_name(api_key)} during SASL authentication."
            return self._fail(reason, reason, Step(error=ErrorCode.illegal_sasl_state))
        expected = "SaslHandshake" if state is SaslState.HANDSHAKE else "ApiVersions or SaslHandshake"
        self.state = SaslState.FAILED
        return Step(
            close=f"Unexpected Kafka request of type {api_name(api_key)} during SASL handshake (SASL listener "
            f"{self._listener.name} expects {expected}; Kafka closes without an answer)"
        )

    def raw_token(self, frame: bytes) -> Step:
        """A bare token after a v0 handshake; failures cannot be told (no error field), only closed on."""
        try:
            token = self._evaluate(frame)
        except SaslFailure as failure:
            step = self._fail(str(failure), str(failure), Step())
            step.close = f"SASL {self._mechanism} authentication failed (raw tokens): {failure}"
            return step
        step = Step(raw=_raw_frame(token))
        server = self._server
        return self._done(step, self._lifetime_ms(server)) if server is not None and server.complete else step

    def too_large(self, size: int) -> bool:
        return size > self._listener.config.max_receive_size

    # -- the steps -------------------------------------------------------------------------------------------

    def _handshake(self, version: int, mechanism: str) -> Step:
        enabled = self._listener.config.enabled_mechanisms
        answer = build(
            response_schema(_HANDSHAKE, version), error_code=ErrorCode.none, mechanisms=enabled
        )
        if mechanism not in enabled:
            answer = build(
                response_schema(_HANDSHAKE, version),
                error_code=ErrorCode.unsupported_sasl_mechanism,
                mechanisms=enabled,
            )
            reason = f"Unsupported SASL mechanism {mechanism}"
            self._mechanism = mechanism
            return self._fail(reason, reason, Step(answer=answer))
        if self.reauthenticating and mechanism != self._previous_mechanism:
            # SSA ReauthInfo.saslMechanismUnchanged: the handshake is answered, the next token fails with this.
            self._bad_mechanism = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for re-authentication of "
                f"mechanism '{self._previous_mechanism}'"
            )
        self._mechanism = mechanism
        self._server = self._listener.server(mechanism)
        self.state = SaslState.AUTHENTICATE if version >= 1 else SaslState.RAW_TOKENS
        return Step(answer=answer)

    def _token(self, version: int, token: bytes) -> Step:
        if self._bad_mechanism is not None:
            # SSA's REAUTH_BAD_MECHANISM: the token is not read, no answer is built; the connection closes.
            message = self._bad_mechanism
            return self._fail(message, message, Step(close=f"SASL re-authentication refused: {message}"))
        try:
            answer = self._evaluate(token)
        except SaslFailure as failure:
            told = str(failure) if failure.tell else self._generic()
            return self._fail(str(failure), told, self._failure_answer(version, told))
        server = self._server
        assert server is not None
        if not server.complete:
            return Step(answer=_authenticate_answer(version, ErrorCode.none, None, answer, 0))
        principal = f"User:{server.authorization_id}"
        if self._principal is not None and principal != self._principal:
            before, after = self._principal.replace(":", ".", 1), principal.replace(":", ".", 1)
            message = f"Cannot change principals during re-authentication from {before}: {after}"
            return self._fail(message, message, self._failure_answer(version, message))
        lifetime = self._lifetime_ms(server)
        return self._done(Step(answer=_authenticate_answer(version, ErrorCode.none, None, answer, lifetime)), lifetime)

    def _evaluate(self, token: bytes) -> bytes:
        server = self._server
        assert server is not None
        return server.evaluate(token)

    def _lifetime_ms(self, server: SaslServer) -> int:
        """ReauthInfo.calcCompletionTimesAndReturnSessionLifetimeMs. Kafka computes it, and sets the session's
        expiry, for every client: one that sent SaslAuthenticate v0 or raw tokens is not told, and is closed all
        the same at its first request after it (it cannot re-authenticate, only reconnect)."""
        limit = self._listener.config.connections_max_reauth_ms
        expiry = server.credential_expiry_ms
        if expiry is None and limit <= 0:
            return 0
        left = None if expiry is None else max(0, expiry - self._listener.now_ms())
        if left is None:
            return limit
        return left if limit <= 0 else min(left, limit)

    def _done(self, step: Step, lifetime_ms: int) -> Step:
        server = self._server
        assert server is not None
        now = self._listener.now_ms()
        reauthenticated = self._principal is not None
        self._principal = f"User:{server.authorization_id}"
        limited = self._listener.config.connections_max_reauth_ms > 0 or server.credential_expiry_ms is not None
        self.expires_at_ms = now + lifetime_ms if limited else None
        self.state = SaslState.COMPLETE
        self.pending = False
        self._server = None
        step.principal = self._principal
        self._emit(
            REAUTHENTICATED if reauthenticated else AUTHENTICATION_SUCCEEDED,
            {
                "mechanism": self._mechanism,
                "user": server.authorization_id,
                "principal": self._principal,
                "session_lifetime_ms": lifetime_ms,
            },
        )
        return step

    def _maybe_reauthenticate(self, api_key: int, version: int, body: Any) -> Step | None:
        """KafkaChannel.maybeBeginServerReauthentication: only a SaslHandshake v1 on a session with an expiry, at
        most once a second; anything else goes to its handler."""
        if api_key != _HANDSHAKE or version < 1 or self.expires_at_ms is None:
            return None
        now = self._listener.now_ms()
        if self._last_reauth_start_ms and now - self._last_reauth_start_ms < MIN_REAUTH_INTERVAL_MS:
            return None
        self._last_reauth_start_ms = now
        self._previous_mechanism = self._mechanism
        self._bad_mechanism = None
        self.expires_at_ms = None  # Kafka's new authenticator has no session until it completes
        self.pending = True
        self.state = SaslState.HANDSHAKE
        return self._handshake(version, body.mechanism)

    def _generic(self) -> str:
        which = "re-authentication" if self.reauthenticating else "authentication"
        return f"Authentication failed during {which} due to invalid credentials with SASL mechanism {self._mechanism}"

    def _failure_answer(self, version: int, message: str) -> Step:
        return Step(answer=_authenticate_answer(version, ErrorCode.sasl_authentication_failed, message, b"", 0))

    def _fail(self, reason: str, told: str, step: Step) -> Step:
        """End the exchange: the event says why (never a password or token), the client hears ``told``."""
        server = self._server
        self._emit(
            AUTHENTICATION_FAILED,
            {
                "mechanism": self._mechanism,
                "user": server.user if server is not None else "",
                "reason": reason,
                "reauthentication": self._principal is not None,
            },
        )
        self.state = SaslState.FAILED
        self.pending = True
        step.failed = True
        if step.close is None:
            step.close = f"SASL authentication failed: {told}"
        return step
