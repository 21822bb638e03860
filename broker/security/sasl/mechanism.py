"""What every SASL mechanism's server side is: a token in, a token out, until ``complete`` (Java's ``SaslServer``).

A failure is a ``SaslFailure``. Kafka tells two kinds apart (SaslServerAuthenticator ``handleSaslToken``): a
``SaslAuthenticationException``, whose text the client is told as is (``tell`` true), and any other
``SaslException``, answered with the generic "Authentication failed during authentication due to invalid
credentials with SASL mechanism X" so that the answer never says whether the user exists (``tell`` false; the
reason then reaches only the broker's log and events).
"""

from __future__ import annotations

from typing import Protocol


class SaslFailure(Exception):
    """The exchange failed: ``str(self)`` is the reason; ``tell``: whether the client sees it as is."""

    def __init__(self, reason: str, *, tell: bool = False) -> None:
        super().__init__(reason)
        self.tell = tell


class SaslServer(Protocol):
    """One exchange of one mechanism on one connection."""

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """Who logged in (the principal is ``User:`` + this); valid once ``complete``."""

    @property
    def user(self) -> str:
        """The user name the client gave so far ("" before it did), for the log and the events."""

    @property
    def credential_expiry_ms(self) -> int | None:
        """When the credential itself ends (an OAUTHBEARER token's ``exp``), epoch ms; None: it does not."""

    def evaluate(self, token: bytes) -> bytes:
        """The server's answer to ``token``; raises SaslFailure."""
