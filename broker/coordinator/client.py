"""Who sent a request, in its own module: every connection makes one before the broker's first answer, while the
rest of the coordinator's messages (broker/coordinator/messages.py, two dozen dataclasses) load with the state
after it (issue 17: start-up)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class Client:
    """Who sent a request: from the request header and the socket."""

    client_id: str = ""
    host: str = "/127.0.0.1"  # rendered like Java's InetAddress.toString()


#: The client of a request built without one (tests, the control API's verbs).
LOCAL_CLIENT = Client()
