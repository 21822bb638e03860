"""What the server needs of a request before its handler sees it: who it names, and its error answer.

Each API declares both beside its handler (``ROUTES`` of its family module, ``broker.api.base.Route``), as every
Kafka request class carries its ``getErrorResponse``; this module looks them up through ``api/dispatch.py``, which
imports a family on its first use. Fault rules (``server/faults.py``) are their first user; the gates that come
with authentication and ACLs (an authorization error in each API's own shape) are the next.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.api.base import RequestIdentity, named_identity
from broker.api.dispatch import FAMILIES, HANDLERS

__all__ = ["FAULTABLE_APIS", "RequestIdentity", "error_answer", "request_identity", "unsupported_version_answer"]

# Every advertised API but ApiVersions, which is answered by hand before any family loads and which a client must
# be able to send whatever else fails (it is how it learns what to send).
FAULTABLE_APIS: frozenset[int] = frozenset(FAMILIES)


def request_identity(api_key: int, body: Any) -> RequestIdentity:
    """(group id, member id, group instance id, transactional id) as far as the request names them. ApiVersions has
    no family route (it is answered before any loads) but close and delay rules still match it: it names nobody."""
    if api_key not in FAMILIES:
        return named_identity(body)
    return HANDLERS.route(api_key).identity(body)


def error_answer(api_key: int, version: int, body: Any, error: ErrorCode) -> Any:
    """The answer that is nothing but ``error``, shaped as Kafka's ``getErrorResponse`` for that API and version:
    a kio response, or ``CloseConnection`` for a Produce with acks=0 (which Kafka answers by closing)."""
    return HANDLERS.route(api_key).error_answer(version, body, error)


def unsupported_version_answer(api_key: int, version: int, body: Any) -> Any:
    """An API this broker lists but has switched off (the share APIs under share.version 0), as KafkaApis answers
    it: UNSUPPORTED_VERSION in the API's own error shape."""
    return error_answer(api_key, version, body, ErrorCode.unsupported_version)
