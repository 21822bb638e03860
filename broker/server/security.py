"""The broker's side of SASL (issue 30): the users, made on first use, and each SASL listener's shared state.

A broker without a SASL listener and without SCRAM calls never imports broker/security/sasl/ (hashlib's SCRAM work,
json, kio's SASL schemas): ``serve``'s first answer stays as cheap as before (tests/cli/test_serve_imports.py), and
a plaintext connection has no authenticator (broker/server/pipeline.py pays nothing for SASL then).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.config.settings import Endpoint, Settings
from broker.events.hub import EventHub
from broker.timing.clock import Clock

if TYPE_CHECKING:
    from broker.security.sasl.authenticator import SaslListener
    from broker.security.users import UserStore

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


class BrokerSecurity:
    def __init__(self, settings: Settings, clock: Clock, events: EventHub) -> None:
        self._settings = settings
        self._clock = clock
        self._events = events
        self._users: UserStore | None = None

    def users(self) -> UserStore:
        """The SASL users of ``--sasl-users`` (and, with a data directory, the SCRAM changes kept there)."""
        if self._users is None:
            from broker.security.users import UserStore

            self._users = UserStore(self._settings.sasl.users, self._settings.data_dir)
        return self._users

    def listener(self, endpoint: Endpoint) -> SaslListener | None:
        """What the connections of ``endpoint`` authenticate with; None for a listener without SASL."""
        # The protocol as --listener-security-protocol-map names it, not only the endpoint's own prefix.
        if self._settings.security_protocol(endpoint) not in SASL_PROTOCOLS:
            return None
        from broker.security.sasl.authenticator import SaslListener

        sasl = self._settings.sasl
        if not sasl.users and "OAUTHBEARER" not in sasl.enabled_mechanisms:
            from broker.log import get_logger

            get_logger("server").warning(
                "SASL listener without users: nobody can log in",
                listener=endpoint.name,
                reason="no --sasl-users and OAUTHBEARER not enabled (AlterUserScramCredentials can add SCRAM users)",
            )
        return SaslListener(endpoint.name, self._settings.sasl, self.users(), self._clock.now_ms, self._emit)

    def _emit(self, event: str, fields: dict[str, Any]) -> None:
        self._events.emit(event, "", fields)
