"""SASL on a SASL_PLAINTEXT listener, raw frames over TCP (docs/spec/security.md sections 2-7, checklist items 2-30).

Each test is named after the checklist item it proves. The broker runs in the test's loop on a manual clock (session
lifetimes and token expiry move with ``clock.advance``); the failed-login delay and linger are real time.
"""

from __future__ import annotations

import asyncio
import struct
import time
import uuid

from kio.schema.errors import ErrorCode

from protocol.apis import ApiKey
from tests.wire.client import WireClient, part, request
from tests.wire.sasl_client import (
    ScramClient,
    StartBroker,
    authenticate,
    handshake,
    login_plain,
    metadata,
)
from tests.wire.sasl_client import sasl_broker as sasl_broker  # the fixture

E = ErrorCode
ENABLED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


def listed(answer: object) -> dict[int, tuple[int, int]]:
    return {int(key.api_key): (int(key.min_version), int(key.max_version)) for key in answer.api_keys}  # type: ignore[attr-defined]


async def closed_without_answer(client: WireClient) -> bool:
    return await client.closed_by_peer(timeout=3)


# -- listeners and wire basics -----------------------------------------------------------------------------------


async def test_2_api_versions_v0_v3_v4_answered_before_authentication_and_list_the_sasl_apis(
    sasl_broker: StartBroker,
) -> None:
    broker = await sasl_broker()
    for port in (broker.sasl_port, broker.plain_port):
        for version in (0, 3, 4):
            client = await broker.connect(port)
            body = {"client_software_name": "wire-test", "client_software_version": "1.0"} if version >= 3 else {}
            answer = await client.call(request(18, version, **body))
            assert answer.error_code == E.none
            keys = listed(answer)
            assert keys[ApiKey.SASL_HANDSHAKE] == (0, 1)
            assert keys[ApiKey.SASL_AUTHENTICATE] == (0, 2)
            assert keys[ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS] == keys[ApiKey.ALTER_USER_SCRAM_CREDENTIALS] == (0, 0)


async def test_3_metadata_as_the_first_request_closes_without_an_answer(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker()
    client = await broker.connect()
    await client.send_raw(client.encode(metadata()))
    assert await closed_without_answer(client)


async def test_4_api_versions_twice_before_the_handshake_closes(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker()
    client = await broker.connect()
    await client.call(request(18, 0))
    await client.send_raw(client.encode(request(18, 0)))
    assert await closed_without_answer(client)


async def test_5_handshake_plain_lists_every_enabled_mechanism(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker()
    client = await broker.connect()
    answer = await handshake(client, "PLAIN")
    assert (answer.error_code, answer.mechanisms) == (E.none, ENABLED)


async def test_6_unknown_mechanism_answered_unsupported_with_the_list_then_closed(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker()
    client = await broker.connect()
    answer = await handshake(client, "NOT-A-MECHANISM")
    assert (answer.error_code, answer.mechanisms) == (E.unsupported_sasl_mechanism, ENABLED)
    assert await closed_without_answer(client)


async def test_7_metadata_instead_of_sasl_authenticate_answered_illegal_sasl_state_then_closed(
    sasl_broker: StartBroker,
) -> None:
    broker = await sasl_broker()
    client = await broker.connect()
    await handshake(client, "PLAIN")
    topic = part(3, 12, "MetadataRequestTopic", name="topic", topic_id=uuid.UUID(int=0))
    answer = await client.call(
        request(3, 12, topics=(topic,), allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    )
    assert [(t.name, t.error_code) for t in answer.topics] == [("topic", E.illegal_sasl_state)]
    assert await closed_without_answer(client)


async def test_8_sasl_on_a_plaintext_listener_answered_illegal_sasl_state_connection_open(
    sasl_broker: StartBroker,
) -> None:
    broker = await sasl_broker()
    client = await broker.connect(broker.plain_port)
    answer = await handshake(client, "PLAIN")
    assert (answer.error_code, answer.mechanisms) == (E.illegal_sasl_state, ())
    answer = await authenticate(client, b"\0alice\0secret")
    assert answer.error_code == E.illegal_sasl_state
    assert (await client.call(metadata())).brokers


async def test_9_handshake_v0_then_a_raw_plain_token_answered_with_an_empty_frame(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker()
    client = await broker.connect()
    assert (await handshake(client, "PLAIN", version=0)).error_code == E.none
    token = b"\0alice\0secret"
    await client.send_raw(struct.pack(">i", len(token)) + token)
    assert await asyncio.wait_for(client.reader.readexactly(4), 3) == b"\x00\x00\x00\x00"
    assert (await client.call(metadata())).brokers
    assert broker.events("authentication_succeeded")[-1]["principal"] == "User:alice"


async def test_9_a_wrong_raw_token_closes_without_an_answer(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker()
    client = await broker.connect()
    await handshake(client, "PLAIN", version=0)
    token = b"\0alice\0wrong"
    await client.send_raw(struct.pack(">i", len(token)) + token)
    assert await closed_without_answer(client)


async def test_10_sasl_authenticate_v0_v1_v2_each_authenticate_v1_plus_carry_the_lifetime(
    sasl_broker: StartBroker,
) -> None:
    broker = await sasl_broker(connections_max_reauth_ms=5000)
    for version in (0, 1, 2):
        client = await broker.connect()
        answer = await login_plain(client, version=version)
        assert (answer.error_code, answer.error_message, answer.auth_bytes) == (E.none, None, b"")
        if version >= 1:
            assert answer.session_lifetime.total_seconds() == 5.0
        assert (await client.call(metadata())).brokers


async def test_11_sasl_requests_after_authentication_without_expiry_are_illegal(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker()
    client = await broker.connect()
    await login_plain(client)
    answer = await handshake(client, "PLAIN")
    assert answer.error_code == E.illegal_sasl_state
    answer = await authenticate(client, b"\0alice\0secret")
    assert answer.error_code == E.illegal_sasl_state
    assert answer.error_message == "SaslAuthenticate request received after successful authentication"
    assert (await client.call(metadata())).brokers


async def test_a_frame_over_sasl_server_max_receive_size_closes(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker(max_receive_size=1024)
    client = await broker.connect()
    await handshake(client, "PLAIN")
    await client.send_raw(client.encode(request(36, 2, auth_bytes=b"x" * 2048)))
    assert await closed_without_answer(client)


# -- PLAIN --------------------------------------------------------------------------------------------------------


async def test_12_plain_right_password_principal_user_alice(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker()
    client = await broker.connect()
    answer = await login_plain(client)
    assert (answer.error_code, answer.auth_bytes, answer.session_lifetime.total_seconds()) == (E.none, b"", 0)
    (event,) = broker.events("authentication_succeeded")
    assert (event["principal"], event["mechanism"], event["listener"]) == ("User:alice", "PLAIN", "SASL_PLAINTEXT")


async def test_13_plain_wrong_password_or_unknown_user_after_the_delay_then_closed_after_the_linger(
    sasl_broker: StartBroker,
) -> None:
    broker = await sasl_broker()
    for user, password in (("alice", "wrong"), ("nobody", "secret")):
        client = await broker.connect()
        await handshake(client, "PLAIN")
        started = time.monotonic()
        answer = await authenticate(client, f"\0{user}\0{password}".encode())
        answered = time.monotonic() - started
        assert answer.error_code == E.sasl_authentication_failed
        assert answer.error_message == "Authentication failed: Invalid username or password"
        assert answered >= 0.09  # connection.failed.authentication.delay.ms, 100 by default
        assert await closed_without_answer(client)
        assert time.monotonic() - started >= answered + 0.08  # the linger: kafka-python reads the answer first
    failed = broker.events("authentication_failed")
    assert [event["user"] for event in failed] == ["alice", "nobody"]
    assert all("wrong" not in str(event) and "secret" not in str(event) for event in failed)


async def test_14_plain_authzid_of_another_user_refused(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker()
    client = await broker.connect()
    await handshake(client, "PLAIN")
    answer = await authenticate(client, b"bob\0alice\0secret")
    assert answer.error_code == E.sasl_authentication_failed
    assert answer.error_message == (
        "Authentication failed: Client requested an authorization id that is different from username"
    )
    client = await broker.connect()
    await handshake(client, "PLAIN")
    assert (await authenticate(client, b"alice\0alice\0secret")).error_code == E.none  # kafka-python's form


async def test_15_plain_empty_password_and_two_parts_have_their_own_messages(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker(failed_authentication_delay_ms=0)
    for token, message in (
        (b"\0alice\0", "Authentication failed: password not specified"),
        (b"\0\0secret", "Authentication failed: username not specified"),
        (b"alice\0secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    ):
        client = await broker.connect()
        await handshake(client, "PLAIN")
        answer = await authenticate(client, token)
        assert (answer.error_code, answer.error_message) == (E.sasl_authentication_failed, message)


# -- SCRAM --------------------------------------------------------------------------------------------------------


async def scram_login(
    broker: object, client: WireClient, scram: ScramClient, mechanism: str, **final: str
) -> tuple[object, object]:
    assert (await handshake(client, mechanism)).error_code == E.none
    first = await authenticate(client, scram.first())
    assert first.error_code == E.none, first.error_message
    return first, await authenticate(client, scram.final(first.auth_bytes, **final))


async def test_16_scram_256_and_512_exchanges_nonce_iterations_server_signature(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker()
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        client = await broker.connect()
        scram = ScramClient(mechanism, "alice", "secret")
        first, final = await scram_login(broker, client, scram, mechanism)
        fields = dict(item.split("=", 1) for item in first.auth_bytes.decode().split(","))  # type: ignore[attr-defined]
        assert fields["r"].startswith(scram.nonce) and len(fields["r"]) > len(scram.nonce)
        assert int(fields["i"]) >= 4096
        assert final.error_code == E.none  # type: ignore[attr-defined]
        assert scram.server_signature_ok(final.auth_bytes)  # type: ignore[attr-defined]
        assert (await client.call(metadata())).brokers
    assert [e["mechanism"] for e in broker.events("authentication_succeeded")] == ["SCRAM-SHA-256", "SCRAM-SHA-512"]


GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


async def test_17_scram_wrong_password_unknown_user_malformed_first_get_the_generic_message(
    sasl_broker: StartBroker,
) -> None:
    broker = await sasl_broker(failed_authentication_delay_ms=0)
    mechanism = "SCRAM-SHA-256"
    client = await broker.connect()
    _, final = await scram_login(broker, client, ScramClient(mechanism, "alice", "wrong"), mechanism)
    assert (final.error_code, final.error_message) == (E.sasl_authentication_failed, GENERIC.format(mechanism))  # type: ignore[attr-defined]
    for first in (ScramClient(mechanism, "nobody", "x").first(), b"y,,n=alice,r=abc", b"n,,n=al=ice,r=abc"):
        client = await broker.connect()
        await handshake(client, mechanism)
        answer = await authenticate(client, first)
        assert (answer.error_code, answer.error_message) == (E.sasl_authentication_failed, GENERIC.format(mechanism))
        assert await closed_without_answer(client)


async def test_18_scram_final_nonce_with_one_character_appended_fails(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker(failed_authentication_delay_ms=0)
    client = await broker.connect()
    scram = ScramClient("SCRAM-SHA-512", "alice", "secret")
    _, final = await scram_login(broker, client, scram, "SCRAM-SHA-512", nonce_suffix="x")
    assert final.error_code == E.sasl_authentication_failed  # type: ignore[attr-defined]
    assert final.error_message == GENERIC.format("SCRAM-SHA-512")  # type: ignore[attr-defined]


async def test_19_gs2_authzid_alice_with_biws_or_its_own_binding_accepted(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker()
    for channel in ("biws", None):  # None: the base64 of "n,a=alice,"
        client = await broker.connect()
        scram = ScramClient("SCRAM-SHA-256", "alice", "secret", authzid="alice")
        binding = {"channel": channel} if channel else {}
        _, final = await scram_login(broker, client, scram, "SCRAM-SHA-256", **binding)
        assert final.error_code == E.none  # type: ignore[attr-defined]
    client = await broker.connect()
    await handshake(client, "SCRAM-SHA-256")
    answer = await authenticate(client, ScramClient("SCRAM-SHA-256", "alice", "secret", authzid="bob").first())
    assert answer.error_message == (
        "Authentication failed: Client requested an authorization id that is different from username"
    )


async def test_20_a_user_with_only_scram_512_fails_scram_256_and_plain(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker(failed_authentication_delay_ms=0)
    client = await broker.connect()
    await handshake(client, "SCRAM-SHA-256")
    answer = await authenticate(client, ScramClient("SCRAM-SHA-256", "carol", "carol-secret").first())
    assert (answer.error_code, answer.error_message) == (E.sasl_authentication_failed, GENERIC.format("SCRAM-SHA-256"))
    client = await broker.connect()
    assert (await login_plain(client, "carol", "carol-secret")).error_code == E.sasl_authentication_failed
    client = await broker.connect()
    _, final = await scram_login(
        broker, client, ScramClient("SCRAM-SHA-512", "carol", "carol-secret"), "SCRAM-SHA-512"
    )
    assert final.error_code == E.none  # type: ignore[attr-defined]


async def test_an_authenticated_connection_goes_back_to_the_fast_paths(sasl_broker: StartBroker) -> None:
    """Before login the authenticator arms the connection's gate (every frame takes the generic path to it); after
    it, nothing is armed: Heartbeat and ApiVersions take their fast paths again, and the session check is the one
    cost left (none here: no expiry)."""
    broker = await sasl_broker()
    client = await broker.connect()
    await login_plain(client)
    await client.call(request(18, 3, client_software_name="wire-test", client_software_version="1.0"))
    (connection,) = broker.server.connections
    authenticator = connection.pipeline._sasl  # type: ignore[attr-defined]
    assert not authenticator.pending and authenticator.expires_at_ms is None
    plain = await broker.connect(broker.plain_port)
    await plain.call(metadata())
    assert [c.pipeline._sasl for c in broker.server.connections if c is not connection] == [None]  # type: ignore[attr-defined]


async def test_2_an_api_versions_newer_than_ours_is_answered_and_may_be_retried_before_the_handshake(
    sasl_broker: StartBroker,
) -> None:
    """SSA handleApiVersionsRequest: UNSUPPORTED_VERSION (a v0 body) leaves the state as it was, so the client's
    retry at a version we list is answered too, and the handshake follows."""
    broker = await sasl_broker()
    client = await broker.connect()
    payload = struct.pack(">hhih", ApiKey.API_VERSIONS, 9, 7, 1) + b"x\x00\x00"
    await client.send_raw(struct.pack(">i", len(payload)) + payload)
    _, answer = client.decode(ApiKey.API_VERSIONS, 0, await client.read_frame())
    assert answer.error_code == E.unsupported_version
    assert (await client.call(request(18, 0))).error_code == E.none
    assert (await login_plain(client)).error_code == E.none
