"""SaslHandshake (17) v0-1 and SaslAuthenticate (36) v0-2 as Kafka's ``KafkaApis`` answers them.

A SASL listener's connection authenticates before any handler sees a request (broker/security/sasl/authenticator.py
consumes the SASL requests while it does). What reaches these handlers is what reaches KafkaApis: a SASL request on
a listener without SASL (PLAINTEXT: spec section 3 rule 6, the connection stays open), or on an authenticated
connection that does not re-authenticate (rule 5). Both are answered ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.api.base import ApiContext, Call, Route
from protocol.apis import ApiKey
from protocol.codec import build, response_schema

AUTHENTICATED = "SaslAuthenticate request received after successful authentication"


def _handshake_error(version: int, body: Any, error: ErrorCode) -> Any:
    return build(response_schema(ApiKey.SASL_HANDSHAKE, version), error_code=error, mechanisms=())


def _authenticate_error(version: int, body: Any, error: ErrorCode, message: str | None = None) -> Any:
    return build(
        response_schema(ApiKey.SASL_AUTHENTICATE, version), error_code=error, error_message=message, auth_bytes=b""
    )


def sasl_handshake(ctx: ApiContext, call: Call, body: Any) -> Any:
    return _handshake_error(call.api_version, body, ErrorCode.illegal_sasl_state)


def sasl_authenticate(ctx: ApiContext, call: Call, body: Any) -> Any:
    return _authenticate_error(call.api_version, body, ErrorCode.illegal_sasl_state, AUTHENTICATED)


ROUTES = {
    ApiKey.SASL_HANDSHAKE: Route(sasl_handshake, _handshake_error),
    ApiKey.SASL_AUTHENTICATE: Route(sasl_authenticate, _authenticate_error),
}
