"""Why a request cannot be answered; each one closes the connection."""

from __future__ import annotations


class ProtocolError(Exception):
    """A request that cannot be answered: the connection is closed with this reason."""


class UnknownApiKey(ProtocolError):
    pass


class UnsupportedApiVersion(ProtocolError):
    pass


class MalformedRequest(ProtocolError):
    pass


__all__ = ["MalformedRequest", "ProtocolError", "UnknownApiKey", "UnsupportedApiVersion"]
