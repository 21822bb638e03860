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
    # The connection it came on, numbered by the server: a share session ends with the connection that opened it
    # (KIP-932, docs/spec/share-groups.md section 7). 0 for a request made without one.
    connection: int = 0
    # Who the connection authenticated as (issue 30: Kafka's KafkaPrincipal, "User:name"), set by the TLS
    # handshake's certificate or a SASL login; ACLs are decided on it. ANONYMOUS on a PLAINTEXT listener.
    principal: str = "User:ANONYMOUS"


#: The client of a request built without one (tests, the control API's verbs).
LOCAL_CLIENT = Client()
