"""``POST /v1/events``: what a chaos runner is about to do to a group, recorded as a ``chaos_action`` event.

The broker sees a LeaveGroup or a session running out, never the SIGKILL behind it: the runner says so right before
it sends the signal, and the event hub records it like any event (the event log, ``/v1/events``, the console,
``analyze``'s disturbances). Only ``chaos_action`` may be posted, with the fields below and nothing else (a posted
``seq`` or ``ts_ms`` would otherwise overwrite the broker's own stamps), in at most ``MAX_BODY_BYTES``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from broker.control import bounded_json
from broker.events.names import CHAOS_ACTION

__all__ = ["CHAOS_ACTION", "KNOWN_FIELDS", "MAX_BODY_BYTES", "BadEvent", "parse"]

#: A posted event is one small flat object: anything longer is not a chaos action.
MAX_BODY_BYTES = 4096
MAX_TEXT = 1000  # group, member and client ids, and the note
_ACTION = re.compile(r"[a-z][a-z0-9_]{0,31}")
_SIGNAL = re.compile(r"[A-Z][A-Z0-9]{0,15}")

#: The optional fields besides ``signal``: free text (bounded), and integers with their bounds.
#: ``node_id``, ``from_node``, ``partition`` and ``mode``: an action on the broker's nodes (issue 29, chaos run
#: --stop-node-every / --move-coordinator-every): the node, the coordinator it moved from, the group's
#: __consumer_offsets partition, and how a node was stopped (kill, graceful).
_TEXT_FIELDS = ("member_id", "client_id", "group_instance_id", "note", "mode")
_INT_FIELDS = {
    "pid": (0, 2**31 - 1), "session_timeout_ms": (1, 2**31 - 1),
    "node_id": (0, 2**31 - 1), "from_node": (0, 2**31 - 1), "partition": (0, 2**31 - 1),
}  # fmt: skip
KNOWN_FIELDS = frozenset({"event", "group_id", "action", "signal", *_TEXT_FIELDS, *_INT_FIELDS})


class BadEvent(ValueError):
    """The body is not a chaos action this endpoint records; the message says why."""


def _text(body: Mapping[str, Any], name: str, required: bool = False) -> str | None:
    value = body.get(name)
    if value is None:
        if required:
            raise BadEvent(f"{name} is required")
        return None
    if not isinstance(value, str):
        raise BadEvent(f"{name} must be a string, got {type(value).__name__}")
    if len(value) > MAX_TEXT:
        raise BadEvent(f"{name} must be at most {MAX_TEXT} characters, got {len(value)}")
    return value


def _pattern(body: Mapping[str, Any], name: str, pattern: re.Pattern[str], what: str, required: bool) -> str | None:
    value = _text(body, name, required)
    if value is not None and not pattern.fullmatch(value):
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise BadEvent(f"{name} must be {what}, got {shown!r}")
    return value


def parse(raw: bytes) -> tuple[str, dict[str, Any]]:
    """The group and the fields of the ``chaos_action`` a body describes; ``BadEvent`` otherwise."""
    if len(raw) > MAX_BODY_BYTES:
        raise BadEvent(f"a posted event is at most {MAX_BODY_BYTES} bytes of JSON, got {len(raw)}")
    try:
        body = bounded_json.loads(raw)
    except bounded_json.BadJson as bad:
        raise BadEvent(str(bad)) from None
    if not isinstance(body, dict):
        raise BadEvent("the body must be a JSON object describing one event")
    if body.get("event") != CHAOS_ACTION:
        shown = body.get("event")
        raise BadEvent(f"only {CHAOS_ACTION!r} events can be posted, got event {shown!r}")
    unknown = sorted(set(body) - KNOWN_FIELDS)
    if unknown:
        raise BadEvent(f"unknown field(s) {unknown}; known fields are {sorted(KNOWN_FIELDS)}")
    group_id = _text(body, "group_id", required=True)
    assert group_id is not None
    fields: dict[str, Any] = {
        "action": _pattern(body, "action", _ACTION, "a lower-case word such as 'kill' or 'pause'", True)
    }
    signal = _pattern(body, "signal", _SIGNAL, "a signal's name such as 'SIGKILL'", False)
    if signal is not None:
        fields["signal"] = signal
    for name in _TEXT_FIELDS:
        text = _text(body, name)
        if text is not None:
            fields[name] = text
    for name, (low, high) in _INT_FIELDS.items():
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadEvent(f"{name} must be an integer, got {value!r}")
        if not low <= value <= high:
            raise BadEvent(f"{name} must be between {low} and {high}, got {value}")
        fields[name] = value
    return group_id, fields
