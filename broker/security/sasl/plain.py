"""SASL/PLAIN's server side (RFC 4616), as Kafka's ``PlainSaslServer`` with ``PlainServerCallbackHandler``.

The client's one token is ``authzid NUL authcid NUL password``. Every failure is one the client is told (Kafka
throws ``SaslAuthenticationException`` for each), in Kafka's order: three parts, a user name, a password, the
password matching (unknown user and wrong password read the same), the authorization id empty or the user's.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from broker.security.sasl.mechanism import SaslFailure


class PlainServer:
    def __init__(self, password_of: Callable[[str], str | None]) -> None:
        self._password_of = password_of
        self.complete = False
        self.authorization_id = ""
        self.user = ""
        self.credential_expiry_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        parts = token.decode("utf-8", errors="replace").split("\0")
        if len(parts) != 3:
            raise SaslFailure(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}", tell=True)
        authzid, user, password = parts
        self.user = user
        if not user:
            raise SaslFailure("Authentication failed: username not specified", tell=True)
        if not password:
            raise SaslFailure("Authentication failed: password not specified", tell=True)
        expected = self._password_of(user)
        # Constant time (PlainServerCallbackHandler uses MessageDigest.isEqual): a miss must not time the password.
        matched = hmac.compare_digest(password.encode(), (expected if expected is not None else "").encode())
        if expected is None or not matched:
            raise SaslFailure("Authentication failed: Invalid username or password", tell=True)
        if authzid and authzid != user:
            raise SaslFailure(
                "Authentication failed: Client requested an authorization id that is different from username",
                tell=True,
            )
        self.authorization_id = user
        self.complete = True
        return b""
