"""A client of the broker's HTTP control API (``broker/admin``), standard library only.

The command line imports this for every sub-command but ``serve``, so it must stay cheap to import: urllib, json,
nothing else. Every method maps one endpoint of the contract; an answer that is not a success raises
``ControlError`` carrying the server's ``{"error": ...}`` message, and a broker that cannot be reached raises
``ControlError`` with status 0.

Proxies: the client talks to the broker directly and ignores ``http_proxy`` and friends — a control API is a local
(or same-network) service, and CI machines commonly set a proxy that cannot reach it.
"""

from __future__ import annotations

import http.client
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

#: The control API's address when nothing else names one: ``serve``'s default admin port on this machine.
DEFAULT_URL = "http://127.0.0.1:9644"
#: The environment variable naming the control API, read by the command line and the chaos runner.
URL_ENV = "GROUP_BROKER_ADMIN_URL"

JSON = dict[str, Any]


class ControlError(Exception):
    """The control API answered an error (``status`` is its HTTP status), or could not be reached (status 0)."""

    def __init__(self, status: int, message: str, payload: JSON | None = None, *, refused: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        # The whole JSON error body when there was one: a timed-out wait carries the group as it was ("group").
        self.payload: JSON = payload if payload is not None else {}
        # Nothing listens at the address (yet): what a broker that is starting looks like (broker/control/grace.py).
        self.refused = refused

    def __str__(self) -> str:
        return self.message


def configured_url() -> str:
    """The control API's address from the environment (``URL_ENV``), else ``DEFAULT_URL``."""
    return os.environ.get(URL_ENV) or DEFAULT_URL


def quote(segment: str) -> str:
    """One path segment, every reserved character escaped ("/" too: ids may contain anything).

    A segment of dots only ("." or "..") is escaped as well, or it would be read as a relative path step."""
    if segment and segment.strip(".") == "":
        return "%2E" * len(segment)
    return urllib.parse.quote(segment, safe="")


def normalize_url(base_url: str) -> str:
    url = base_url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    return url


class ControlClient:
    """``grace_s``: until the API first answers, a refused connection is tried again for this long (a broker
    that is starting, ``broker/control/grace.py``); once it has answered, every failure is raised at once."""

    def __init__(self, base_url: str = DEFAULT_URL, timeout: float = 10.0, grace_s: float = 0.0) -> None:
        self.base_url = normalize_url(base_url)
        self.timeout = timeout
        self.grace_s = grace_s
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def __repr__(self) -> str:
        return f"ControlClient({self.base_url!r})"

    # -- health and metrics -------------------------------------------------------------------------------

    def health(self) -> JSON:
        return self._json("GET", "/healthz")

    def ready(self) -> JSON:
        """``{"status": "ready"}``; a broker still starting or stopping raises ControlError(503)."""
        return self._json("GET", "/readyz")

    def metrics(self) -> str:
        with self._open("GET", "/metrics") as response:
            return _read(response).decode("utf-8", errors="replace")

    # -- groups ---------------------------------------------------------------------------------------------

    def groups(self, group_type: str | None = None) -> list[JSON]:
        """Every group, or only those of one ``group_type`` ("classic", "consumer" or "share")."""
        return _list(self._json("GET", f"/v1/groups{_query(type=group_type)}"), "groups")

    def group(self, group_id: str) -> JSON:
        return self._json("GET", f"/v1/groups/{quote(group_id)}")

    def share_partitions(self, group_id: str) -> JSON:
        """A share group's share-partitions with their in-flight records (``GET /v1/groups/{g}/share-partitions``):
        ``group_id``, ``now_ms`` and ``partitions``; ControlError(404) for no such group or another type of group."""
        return self._json("GET", f"/v1/groups/{quote(group_id)}/share-partitions")

    def events(self, group_id: str, limit: int | None = None, since_seq: int | None = None) -> list[JSON]:
        """The group's recent events from the broker's ring buffer, oldest first."""
        query = _query(limit=limit, since_seq=since_seq)
        return _list(self._json("GET", f"/v1/groups/{quote(group_id)}/events{query}"), "events")

    def stream_events(
        self, group_id: str | None = None, since_seq: int | None = None, timeout: float | None = None
    ) -> Iterator[JSON]:
        """Follow the Server-Sent Events stream: every event of one group (or of all) as it happens.

        The iterator ends when the broker closes the stream; closing the iterator (or leaving a ``for`` loop over
        it) closes the connection. Keep-alive comments are skipped. ``since_seq``: the buffered events after it
        come first (0: all of them, the broker's own ``broker_started`` among them). ``timeout``: none by default,
        the stream may be idle; with one, a read that waits longer raises ControlError.
        """
        response = self._open("GET", f"/v1/events{_query(group=group_id, since_seq=since_seq)}", timeout=timeout)
        return _sse_events(response)

    def wait(
        self,
        group_id: str,
        state: str | None = None,
        members: int | None = None,
        min_generation: int | None = None,
        timeout_ms: int = 30000,
    ) -> JSON:
        """The group's detail once every given condition holds; ControlError(408) when ``timeout_ms`` runs out.

        ``state`` is a classic group's (Empty, PreparingRebalance, CompletingRebalance, Stable) or a consumer
        group's (Empty, Assigning, Reconciling, Stable); ``min_generation`` is a consumer group's group epoch.
        The 408 error's ``payload["group"]`` is the group as it was at the deadline (None if it never existed).
        """
        query = _query(state=state, members=members, min_generation=min_generation, timeout_ms=timeout_ms)
        # The server holds the request up to timeout_ms: the socket must wait longer than that.
        timeout = max(self.timeout, timeout_ms / 1000 + self.timeout)
        return self._json("GET", f"/v1/groups/{quote(group_id)}/wait{query}", timeout=timeout)

    # -- transactions ---------------------------------------------------------------------------------------

    def transactions(self, state: str | None = None) -> list[JSON]:
        """Every transactional id the broker holds, by id; ``state`` "open" (Ongoing or Prepare*) or one state."""
        return _list(self._json("GET", f"/v1/transactions{_query(state=state)}"), "transactions")

    # -- chaos verbs ----------------------------------------------------------------------------------------

    def kick(self, group_id: str, member_id: str) -> JSON:
        return self._json("POST", f"/v1/groups/{quote(group_id)}/members/{quote(member_id)}/kick")

    def fence(self, group_id: str, instance_id: str) -> JSON:
        return self._json("POST", f"/v1/groups/{quote(group_id)}/instances/{quote(instance_id)}/fence")

    def rebalance(self, group_id: str) -> JSON:
        return self._json("POST", f"/v1/groups/{quote(group_id)}/rebalance")

    # -- offsets (kafka-consumer-groups.sh --reset-offsets, --delete-offsets, --delete) ----------------------

    def reset_offsets(self, group_id: str, body: Mapping[str, Any]) -> JSON:
        """The plan (committed when ``body["execute"]``): docs/control-api.yaml, ResetRequest and ResetPlan."""
        return self._json("POST", f"/v1/groups/{quote(group_id)}/offsets/reset", body)

    def delete_offsets(self, group_id: str, topic: str, partitions: Iterable[int] = ()) -> JSON:
        query = urllib.parse.urlencode([("topic", topic), *(("partition", str(p)) for p in partitions)])
        return self._json("DELETE", f"/v1/groups/{quote(group_id)}/offsets?{query}")

    def delete_group(self, group_id: str) -> JSON:
        return self._json("DELETE", f"/v1/groups/{quote(group_id)}")

    # -- fault rules ----------------------------------------------------------------------------------------

    def faults(self) -> list[JSON]:
        return _list(self._json("GET", "/v1/faults"), "faults")

    def add_fault(self, **fields: Any) -> JSON:
        """Create a fault rule from the contract's fields (``api=``, ``action=``, ...); None values are left out."""
        body = {name: value for name, value in fields.items() if value is not None}
        return self._json("POST", "/v1/faults", body)

    def delete_fault(self, rule_id: str) -> None:
        with self._open("DELETE", f"/v1/faults/{quote(rule_id)}") as response:
            _read(response)

    def clear_faults(self) -> int:
        """Delete every fault rule; the number deleted."""
        deleted = self._json("DELETE", "/v1/faults").get("deleted")
        if not isinstance(deleted, int):
            raise ControlError(0, f"unexpected answer from {self.base_url}/v1/faults: no 'deleted' count")
        return deleted

    # -- disturbances ---------------------------------------------------------------------------------------

    def chaos_action(self, group_id: str, action: str, **fields: Any) -> JSON:
        """Record a ``chaos_action`` event (``POST /v1/events``): what is about to be done to a member the broker
        cannot see (``signal=``, ``client_id=``, ``member_id=``, ``pid=``, ``note=``, ...); None values are left
        out. The record as the broker stamped it."""
        body = {"event": "chaos_action", "group_id": group_id, "action": action}
        body.update({name: value for name, value in fields.items() if value is not None})
        return self._json("POST", "/v1/events", body)

    # -- the nodes of a multi-node broker (issue 29) -----------------------------------------------------------

    def cluster(self) -> JSON:
        """``GET /v1/cluster``: ``cluster_id``, ``controller``, ``nodes`` (``node_id``, ``host``, ``port``,
        ``up``), ``load_delay_ms`` and ``internal``: per internal topic, each partition's leader, epoch and state."""
        return self._json("GET", "/v1/cluster")

    def stop_node(self, node_id: int, mode: str = "kill") -> JSON:
        """Stop a node (``kill`` or ``graceful``): what moved. ControlError(409) for the last running node."""
        return self._json("POST", f"/v1/cluster/nodes/{int(node_id)}/stop", {"mode": mode})

    def start_node(self, node_id: int) -> JSON:
        return self._json("POST", f"/v1/cluster/nodes/{int(node_id)}/start")

    def coordinator(self, key: str, key_type: str = "group") -> JSON:
        """Who coordinates a group (``key_type`` "group") or a transactional id ("transaction"): ``topic``,
        ``partition``, ``node``, ``epoch``."""
        return self._json("GET", f"/v1/cluster/coordinators{_query(type=key_type, key=key)}")

    def move_coordinator(self, key: str, node_id: int, key_type: str = "group") -> JSON:
        return self._json("POST", "/v1/cluster/coordinators", {"type": key_type, "key": key, "node": node_id})

    def move_leader(self, topic: str, partition: int, node_id: int | None = None) -> JSON:
        """Move a partition's leader to ``node_id``, or back to its preferred replica (None): ``leader``, ``epoch``."""
        body: JSON = {"preferred": True} if node_id is None else {"node": node_id}
        return self._json("POST", f"/v1/cluster/partitions/{quote(topic)}/{int(partition)}/leader", body)

    def set_load_delay(self, ms: int) -> JSON:
        return self._json("POST", "/v1/cluster/coordinators/load-delay", {"ms": ms})

    # -- plumbing -------------------------------------------------------------------------------------------

    def _json(
        self, method: str, path: str, body: Mapping[str, Any] | None = None, timeout: float | None = -1.0
    ) -> JSON:
        with self._open(method, path, body, timeout) as response:
            raw = _read(response)
        try:
            decoded = json.loads(raw) if raw else {}
        except ValueError as error:
            raise ControlError(response.status, f"{method} {path}: the answer is not JSON: {error}") from None
        if not isinstance(decoded, dict):
            kind = type(decoded).__name__
            raise ControlError(response.status, f"{method} {path}: expected a JSON object, got {kind}")
        return decoded

    def _open(
        self, method: str, path: str, body: Mapping[str, Any] | None = None, timeout: float | None = -1.0
    ) -> http.client.HTTPResponse:
        """Send one request; the open response of a 2xx answer, else ControlError. ``timeout=-1``: the default."""
        url = self.base_url + path
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        seconds = self.timeout if timeout == -1.0 else timeout
        if self.grace_s <= 0:
            return self._send(request, seconds)
        from broker.control.grace import with_grace

        try:
            return with_grace(lambda: self._send(request, seconds), target=self.base_url, grace_s=self.grace_s)
        finally:
            self.grace_s = 0.0  # it answered (or the grace ran out): a broker that goes away later is not starting

    def _send(self, request: urllib.request.Request, seconds: float | None) -> http.client.HTTPResponse:
        try:
            response = self._opener.open(request, timeout=seconds)
        except urllib.error.HTTPError as error:
            with error:
                raise _http_error(error) from None
        except urllib.error.URLError as error:
            raise ControlError(
                0, f"cannot reach the control API at {self.base_url}: {_reason(error.reason)}",
                refused=isinstance(error.reason, ConnectionRefusedError),
            ) from None
        except TimeoutError:
            raise ControlError(0, f"no answer from the control API at {self.base_url} within {seconds}s") from None
        except (ConnectionError, http.client.HTTPException) as error:
            raise ControlError(
                0, f"cannot reach the control API at {self.base_url}: {_reason(error)}",
                refused=isinstance(error, ConnectionRefusedError),
            ) from None
        assert isinstance(response, http.client.HTTPResponse)
        return response


def _read(response: http.client.HTTPResponse) -> bytes:
    try:
        return response.read()
    except (TimeoutError, ConnectionError, http.client.HTTPException) as error:
        raise ControlError(0, f"the control API hung up mid-answer: {_reason(error)}") from None


def _reason(reason: object) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, BaseException):
        text = getattr(reason, "strerror", None) or str(reason) or type(reason).__name__
        return str(text)
    return str(reason)


def _http_error(error: urllib.error.HTTPError) -> ControlError:
    status = error.code
    try:
        raw = error.read()
    except (OSError, http.client.HTTPException):
        raw = b""
    payload: JSON | None = None
    try:
        decoded = json.loads(raw)
        if isinstance(decoded, dict):
            payload = decoded
    except ValueError:
        pass
    if payload is not None and isinstance(payload.get("error"), str):
        return ControlError(status, payload["error"], payload)
    text = raw.decode("utf-8", errors="replace").strip()
    detail = f": {text[:500]}" if text else ""
    return ControlError(status, f"HTTP {status} {error.reason}{detail}", payload)


def _query(**values: object) -> str:
    present = {name: str(value) for name, value in values.items() if value is not None}
    return "?" + urllib.parse.urlencode(present) if present else ""


def _list(answer: JSON, key: str) -> list[JSON]:
    value = answer.get(key)
    if not isinstance(value, list):
        raise ControlError(0, f"unexpected answer from the control API: no {key!r} list")
    return value


def _sse_events(response: http.client.HTTPResponse) -> Iterator[JSON]:
    """Parse ``text/event-stream`` line by line; one dict per event whose data is a JSON object."""
    try:
        data: list[str] = []
        while True:
            try:
                raw = response.readline()
            except (TimeoutError, ConnectionError, http.client.HTTPException) as error:
                raise ControlError(0, f"the event stream broke off: {_reason(error)}") from None
            if not raw:
                return  # the server closed the stream (an event not ended by a blank line is dropped, as SSE says)
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if not line:
                if data:
                    try:
                        event = json.loads("\n".join(data))
                    except ValueError:
                        event = None
                    if isinstance(event, dict):
                        yield event
                data = []
                continue
            if line.startswith(":"):
                continue  # a comment: ": keep-alive"
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "data":
                data.append(value)
            # "id", "event" and "retry" repeat what the event's JSON already says (seq, event): nothing to keep.
    finally:
        response.close()
