"""SASL/OAUTHBEARER (RFC 7628) with Kafka's unsecured token validator (docs/spec/security.md section 6): Kafka's
``OAuthBearerSaslServer``, ``OAuthBearerClientInitialResponse``, ``OAuthBearerUnsecuredValidatorCallbackHandler``,
``OAuthBearerUnsecuredJws`` and ``OAuthBearerValidationUtils``.

A token is a JWT with ``alg: none`` and no signature; only its claims are checked. An invalid token is not an error
at first: the server answers the JSON challenge ``{"status":"invalid_token"}`` (``insufficient_scope`` with the
missing scope), the client sends a lone 0x01, and only then comes SASL_AUTHENTICATION_FAILED with that JSON. The
segments are decoded with the URL-safe alphabet (Kafka 4.2, KAFKA-17089), the basic one's ``+`` and ``/`` accepted
too (4.0/4.1 decode with it): a deviation that accepts what either release accepts.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeGuard

from broker.security.sasl.mechanism import SaslFailure

_SEPARATOR = "\x01"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KVPAIRS = rf"(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+{_SEPARATOR})*"
_INITIAL_RESPONSE = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_SEPARATOR}(?P<kvpairs>{_KVPAIRS}){_SEPARATOR}")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")


@dataclass(frozen=True, slots=True)
class UnsecuredValidator:
    """The JAAS ``unsecuredValidator*`` options (OAuthBearerUnsecuredValidatorCallbackHandler)."""

    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0


class InvalidToken(Exception):
    """OAuthBearerIllegalTokenException: ``scope`` is the missing scope when only the scope check failed."""

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope


def _segment(text: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(text.replace("+", "-").replace("/", "_") + "=" * (-len(text) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError):
        raise InvalidToken("malformed Base64 URL encoded value or JSON") from None
    if not isinstance(value, dict):
        raise InvalidToken("a JWS segment is not a JSON object")
    return value


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def validate(token: str, options: UnsecuredValidator, now_ms: int) -> tuple[str, int]:
    """(principal, expiry epoch ms) of a valid unsecured token; raises InvalidToken, in OUV's order."""
    if ".." in token:
        raise InvalidToken("Malformed compact serialization contains '..'")
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
    if parts[2]:
        raise InvalidToken("Unsecured JWS must not contain a digital signature")
    header, claims = _segment(parts[0]), _segment(parts[1])
    if header.get("alg") != "none":
        raise InvalidToken("Unsecured JWS must have an 'alg' header of 'none'")
    expiry = claims.get("exp")
    if not _number(expiry):
        raise InvalidToken("No expiration time in JWT")
    expiry_ms = round(expiry * 1000)
    principal = claims.get(options.principal_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise InvalidToken(f"No principal name in JWT claim: {options.principal_claim}")
    skew = options.clock_skew_ms
    issued = claims.get("iat")
    issued_ms: int | None = None
    if issued is not None:
        if not _number(issued):
            raise InvalidToken("The 'iat' claim is not a number")
        issued_ms = round(issued * 1000)
        if issued_ms > now_ms + skew:
            raise InvalidToken("The Issued At value is after the current time plus the allowable clock skew")
    if now_ms - skew >= expiry_ms:
        raise InvalidToken("The indicated time is past the expiration time minus the allowable clock skew")
    if issued_ms is not None and expiry_ms <= issued_ms:
        raise InvalidToken("The Expiration Time is not after the Issued At time")
    scope = claims.get(options.scope_claim)
    scopes = scope.split() if isinstance(scope, str) else [s for s in scope if isinstance(s, str)] if isinstance(
        scope, list
    ) else []
    for required in options.required_scope:
        if required not in scopes:
            raise InvalidToken(f"The provided scope ({scopes}) was missing a required scope ({required})", required)
    return principal, expiry_ms


def challenge(error: InvalidToken) -> str:
    """OAuthBearerSaslServer.jsonErrorResponse, byte for byte (its ", " before "scope" included)."""
    if error.scope is None:
        return '{"status":"invalid_token"}'
    return f'{{"status":"insufficient_scope", "scope":"{error.scope}"}}'


class OAuthBearerServer:
    def __init__(self, options: UnsecuredValidator, now_ms: Callable[[], int]) -> None:
        self._options = options
        self._now_ms = now_ms
        self._challenge: str | None = None  # the JSON sent for an invalid token: the client's 0x01 fails with it
        self.complete = False
        self.authorization_id = ""
        self.user = ""
        self.credential_expiry_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        if token == b"\x01" and self._challenge is not None:
            raise SaslFailure(self._challenge, tell=True)
        self._challenge = None
        match = _INITIAL_RESPONSE.fullmatch(token.decode("utf-8", errors="replace"))
        if match is None:
            raise SaslFailure("Invalid OAUTHBEARER client first message", tell=True)
        pairs = dict(pair.split("=", 1) for pair in match["kvpairs"].split(_SEPARATOR) if pair)
        auth = pairs.pop("auth", None)
        if auth is None:
            raise SaslFailure("Invalid OAUTHBEARER client first message: 'auth' not specified", tell=True)
        # The unsecured validator accepts every extension (OAuthBearerUnsecuredValidatorCallbackHandler).
        if not all(_EXTENSION_KEY.fullmatch(key) for key in pairs):
            raise SaslFailure("Invalid OAUTHBEARER client first message: invalid extension key", tell=True)
        scheme = _AUTH.fullmatch(auth)
        if scheme is None:
            raise SaslFailure("Invalid OAUTHBEARER client first message: invalid 'auth' format", tell=True)
        if scheme["scheme"].lower() != "bearer":
            raise SaslFailure(f"Invalid scheme in OAUTHBEARER client first message: {scheme['scheme']}", tell=True)
        try:
            principal, expiry_ms = validate(scheme["token"], self._options, self._now_ms())
        except InvalidToken as error:
            self.user = ""
            self._challenge = challenge(error)
            self.rejected = str(error)  # why, for the broker's log: the client only sees the status
            return self._challenge.encode()
        self.user = principal
        authzid = match["authzid"] or ""
        if authzid and authzid != principal:
            raise SaslFailure(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is different from "
                f"the token's principal name ({principal})",
                tell=True,
            )
        self.authorization_id = principal
        self.credential_expiry_ms = expiry_ms
        self.complete = True
        return b""

    rejected = ""
