"""OAUTHBEARER with the unsecured validator, KIP-368 sessions and re-authentication, and the SCRAM credential APIs,
raw frames over TCP (docs/spec/security.md sections 6, 7 and 12; checklist items 22-30 and 63-65). The broker runs
on a manual clock: session lifetimes and token expiry move with ``clock.advance``."""

from __future__ import annotations

import hashlib
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from broker.server.broker import BrokerServer
from tests.conftest import broker_settings
from tests.wire.client import WireClient, part, request
from tests.wire.sasl_client import (
    ScramClient,
    StartBroker,
    authenticate,
    handshake,
    jwt,
    login_plain,
    metadata,
    oauth_token,
)
from tests.wire.sasl_client import sasl_broker as sasl_broker  # the fixture

E = ErrorCode
INVALID = b'{"status":"invalid_token"}'


def claims(broker: Any, **values: Any) -> dict[str, Any]:
    now = broker.clock.now_ms() / 1000
    return {"sub": "alice", "iat": now, "exp": now + 3600, **values}


async def oauth(client: WireClient, token: str, version: int = 1) -> Any:
    assert (await handshake(client, "OAUTHBEARER")).error_code == E.none
    return await authenticate(client, oauth_token(token), version)


# -- OAUTHBEARER --------------------------------------------------------------------------------------------------


async def test_21_a_valid_unsecured_token_authenticates_principal_from_sub(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker()
    client = await broker.connect()
    answer = await oauth(client, jwt(claims(broker)))
    assert (answer.error_code, answer.auth_bytes) == (E.none, b"")
    assert broker.events("authentication_succeeded")[-1]["principal"] == "User:alice"
    assert (await client.call(metadata())).brokers


async def test_22_expired_token_gets_the_json_challenge_then_fails_after_0x01(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker(failed_authentication_delay_ms=0)
    client = await broker.connect()
    now = broker.clock.now_ms() / 1000
    answer = await oauth(client, jwt(claims(broker, iat=now - 120, exp=now - 60)))
    assert (answer.error_code, answer.auth_bytes) == (E.none, INVALID)
    answer = await authenticate(client, b"\x01")
    assert (answer.error_code, answer.error_message) == (E.sasl_authentication_failed, INVALID.decode())
    assert await client.closed_by_peer(3)


async def test_23_each_malformed_token_rejected_with_the_challenge(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker()
    now = broker.clock.now_ms() / 1000
    good = claims(broker)
    without_exp = {key: value for key, value in good.items() if key != "exp"}
    for token in (
        jwt(good, header={"alg": "HS256"}),
        jwt(good, signature="c2ln"),
        jwt(good).rsplit(".", 1)[0],  # two parts
        jwt(without_exp),
        jwt({**good, "sub": "  "}),
        jwt({**good, "iat": now + 600, "exp": now + 3600}),
        jwt({**good, "iat": now + 10, "exp": now + 5}),
    ):
        client = await broker.connect()
        answer = await oauth(client, token)
        assert (answer.error_code, answer.auth_bytes) == (E.none, INVALID), token


async def test_24_missing_required_scope_is_insufficient_scope_with_the_scope(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker(oauthbearer_required_scope=("orders",))
    client = await broker.connect()
    answer = await oauth(client, jwt(claims(broker, scope="billing")))
    assert answer.auth_bytes == b'{"status":"insufficient_scope", "scope":"orders"}'
    client = await broker.connect()
    assert (await oauth(client, jwt(claims(broker, scope=["billing", "orders"])))).auth_bytes == b""


async def test_25_token_exp_in_30_s_is_the_session_lifetime_and_a_later_request_closes(
    sasl_broker: StartBroker,
) -> None:
    broker = await sasl_broker()  # connections.max.reauth.ms 0
    client = await broker.connect()
    now = broker.clock.now_ms() / 1000
    answer = await oauth(client, jwt(claims(broker, exp=now + 30)))
    assert answer.session_lifetime.total_seconds() == 30
    broker.clock.advance(29_000)
    assert (await client.call(metadata())).brokers
    broker.clock.advance(1_001)
    await client.send_raw(client.encode(metadata()))
    assert await client.closed_by_peer(3)
    assert broker.events("session_expired")[-1]["principal"] == "User:alice"


# -- re-authentication (KIP-368) ----------------------------------------------------------------------------------


async def test_26_connections_max_reauth_ms_3000_is_returned_by_sasl_authenticate_v1(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker(connections_max_reauth_ms=3000)
    client = await broker.connect()
    answer = await login_plain(client, version=1)
    assert answer.session_lifetime.total_seconds() == 3


async def test_27_a_request_3_7_s_after_login_without_reauthentication_closes_unanswered(
    sasl_broker: StartBroker,
) -> None:
    broker = await sasl_broker(connections_max_reauth_ms=3000)
    client = await broker.connect()
    await login_plain(client)
    broker.clock.advance(3700)
    await client.send_raw(client.encode(metadata()))
    assert await client.closed_by_peer(3)
    (expired,) = broker.events("session_expired")
    assert (expired["principal"], expired["mechanism"]) == ("User:alice", "PLAIN")


async def test_a_v0_client_is_not_told_the_lifetime_and_is_closed_after_it_all_the_same(
    sasl_broker: StartBroker,
) -> None:
    """SSA computes the session's expiry at every completion (calcCompletionTimesAndReturnSessionLifetimeMs): a
    client on SaslAuthenticate v0 or raw tokens is not told (v0 has no SessionLifetimeMs) and cannot re-authenticate,
    but its session ends as any other."""
    broker = await sasl_broker(connections_max_reauth_ms=3000)
    for raw in (False, True):
        client = await broker.connect()
        if raw:
            await handshake(client, "PLAIN", version=0)
            token = b"\0alice\0secret"
            await client.send_raw(len(token).to_bytes(4, "big") + token)
            assert await client.reader.readexactly(4) == b"\x00\x00\x00\x00"
        else:
            await login_plain(client, version=0)
        broker.clock.advance(2900)
        assert (await client.call(metadata())).brokers
        broker.clock.advance(200)
        await client.send_raw(client.encode(metadata()))
        assert await client.closed_by_peer(3)


async def test_28_reauthentication_after_1_5_s_gives_a_new_lifetime_and_requests_work_past_the_first_expiry(
    sasl_broker: StartBroker,
) -> None:
    broker = await sasl_broker(connections_max_reauth_ms=3000)
    client = await broker.connect()
    await login_plain(client)
    broker.clock.advance(1500)
    answer = await login_plain(client)
    assert (answer.error_code, answer.session_lifetime.total_seconds()) == (E.none, 3)
    broker.clock.advance(2500)  # 4 s after the first login, 2.5 s after the second
    assert (await client.call(metadata())).brokers
    (again,) = broker.events("reauthenticated")
    assert again["principal"] == "User:alice"
    scram = ScramClient("SCRAM-SHA-256", "alice", "secret")  # and by SCRAM on another connection
    other = await broker.connect()
    await handshake(other, "SCRAM-SHA-256")
    first = await authenticate(other, scram.first())
    await authenticate(other, scram.final(first.auth_bytes))
    broker.clock.advance(1500)
    await handshake(other, "SCRAM-SHA-256")
    scram = ScramClient("SCRAM-SHA-256", "alice", "secret")
    first = await authenticate(other, scram.first())
    assert (await authenticate(other, scram.final(first.auth_bytes))).error_code == E.none


async def test_29_a_second_reauthentication_within_1_s_of_the_previous_start_is_illegal(
    sasl_broker: StartBroker,
) -> None:
    broker = await sasl_broker(connections_max_reauth_ms=3000)
    client = await broker.connect()
    await login_plain(client)
    await login_plain(client)  # the first re-authentication start: allowed at once
    broker.clock.advance(500)
    answer = await handshake(client, "PLAIN")
    assert answer.error_code == E.illegal_sasl_state
    assert (await client.call(metadata())).brokers


async def test_30_reauthentication_with_another_mechanism_or_user_fails(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker(connections_max_reauth_ms=3000, failed_authentication_delay_ms=0)
    client = await broker.connect()
    await login_plain(client)
    broker.clock.advance(1500)
    # SSA's REAUTH_BAD_MECHANISM: the handshake is answered, the next token is not: the connection closes.
    assert (await handshake(client, "SCRAM-SHA-256")).error_code == E.none
    await client.send_raw(client.encode(request(36, 2, auth_bytes=ScramClient("SCRAM-SHA-256", "a", "b").first())))
    assert await client.closed_by_peer(3)
    (refused,) = [e for e in broker.events("authentication_failed") if e["reauthentication"]]
    assert refused["reason"] == (
        "SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for re-authentication of mechanism "
        "'PLAIN'"
    )
    client = await broker.connect()
    await login_plain(client)
    broker.clock.advance(1500)
    answer = await login_plain(client, "bob", "bob-secret")
    assert (answer.error_code, answer.error_message) == (
        E.sasl_authentication_failed,
        "Cannot change principals during re-authentication from User.alice: User.bob",
    )
    assert await client.closed_by_peer(3)
    client = await broker.connect()
    await login_plain(client)
    broker.clock.advance(1500)
    answer = await login_plain(client, "alice", "wrong")
    assert answer.error_message == "Authentication failed: Invalid username or password"


# -- SCRAM credential APIs ----------------------------------------------------------------------------------------


def upsertion(name: str, password: str, mechanism: int = 1, iterations: int = 4096) -> Any:
    salt = b"a-salt-of-sixteen-bytes"
    salted = hashlib.pbkdf2_hmac("sha256" if mechanism == 1 else "sha512", password.encode(), salt, iterations)
    return part(
        51, 0, "ScramCredentialUpsertion", name=name, mechanism=i8(mechanism), iterations=i32(iterations),
        salt=salt, salted_password=salted,
    )


def alter(upsertions: tuple[Any, ...] = (), deletions: tuple[Any, ...] = ()) -> Any:
    return request(51, 0, upsertions=upsertions, deletions=deletions)


def describe(*users: str | None) -> Any:
    named = None if users == (None,) else tuple(part(50, 0, "UserName", name=user) for user in users)
    return request(50, 0, users=named)


async def scram_ok(broker: Any, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> bool:
    client = await broker.connect()
    await handshake(client, mechanism)
    scram = ScramClient(mechanism, user, password)
    first = await authenticate(client, scram.first())
    if first.error_code:
        return False
    return (await authenticate(client, scram.final(first.auth_bytes))).error_code == E.none


async def test_63_upsert_then_login_describe_shows_4096_delete_then_login_fails(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker(failed_authentication_delay_ms=0)
    admin = await broker.connect(broker.plain_port)
    answer = await admin.call(alter(upsertions=(upsertion("dave", "dave-pw"),)))
    assert [(r.user, r.error_code) for r in answer.results] == [("dave", E.none)]
    assert await scram_ok(broker, "dave", "dave-pw")
    (result,) = (await admin.call(describe("dave"))).results
    assert [(int(c.mechanism), int(c.iterations)) for c in result.credential_infos] == [(1, 4096)]
    deletion = part(51, 0, "ScramCredentialDeletion", name="dave", mechanism=i8(1))
    assert (await admin.call(alter(deletions=(deletion,)))).results[0].error_code == E.none
    assert not await scram_ok(broker, "dave", "dave-pw")


async def test_64_iterations_out_of_range_duplicates_and_missing_deletions_refused(sasl_broker: StartBroker) -> None:
    broker = await sasl_broker()
    admin = await broker.connect(broker.plain_port)
    answer = await admin.call(alter(upsertions=(upsertion("erin", "x", iterations=4095),)))
    refused = [(r.error_code, r.error_message) for r in answer.results]
    assert refused == [(E.unacceptable_credential, "Too few iterations")]
    answer = await admin.call(alter(upsertions=(upsertion("erin", "x", iterations=16385),)))
    assert answer.results[0].error_message == "Too many iterations"
    answer = await admin.call(alter(upsertions=(upsertion("erin", "x"), upsertion("erin", "y", mechanism=2))))
    assert [(r.user, r.error_code) for r in answer.results] == [("erin", E.duplicate_resource)]
    assert answer.results[0].error_message == "A user credential cannot be altered twice in the same request"
    deletion = part(51, 0, "ScramCredentialDeletion", name="nobody", mechanism=i8(1))
    answer = await admin.call(alter(deletions=(deletion,)))
    assert answer.results[0].error_code == E.resource_not_found
    answer = await admin.call(alter(upsertions=(upsertion("", "x"), upsertion("frank", "x", mechanism=0))))
    assert [r.error_code for r in answer.results] == [E.unacceptable_credential, E.unsupported_sasl_mechanism]
    assert (await admin.call(describe(None))).results[-1].user != "erin"


async def test_65_describe_unknown_user_not_found_and_null_lists_every_user_with_credentials(
    sasl_broker: StartBroker,
) -> None:
    broker = await sasl_broker()
    admin = await broker.connect(broker.plain_port)
    (result,) = (await admin.call(describe("nobody"))).results
    assert (result.error_code, result.error_message) == (
        E.resource_not_found,
        "Attempt to describe a user credential that does not exist: nobody",
    )
    everyone = (await admin.call(describe(None))).results
    assert {r.user: [int(c.mechanism) for c in r.credential_infos] for r in everyone} == {
        "alice": [1, 2], "bob": [1, 2], "carol": [2],
    }
    (twice,) = (await admin.call(describe("alice", "alice"))).results
    assert twice.error_code == E.duplicate_resource


async def test_credentials_altered_over_the_wire_survive_a_restart_of_the_data_directory(tmp_path: Any) -> None:
    from broker.config.settings import parse_endpoints

    settings = broker_settings(listeners=parse_endpoints("PLAINTEXT://127.0.0.1:0"), data_dir=str(tmp_path))
    server = BrokerServer(settings)
    await server.start()
    admin = await WireClient.connect(server.listeners[0].port)
    await admin.call(alter(upsertions=(upsertion("gina", "gina-pw", mechanism=2),)))
    await admin.close()
    await server.stop()
    server = BrokerServer(settings)
    await server.start()
    admin = await WireClient.connect(server.listeners[0].port)
    (result,) = (await admin.call(describe("gina"))).results
    assert [(int(c.mechanism), int(c.iterations)) for c in result.credential_infos] == [(2, 4096)]
    await admin.close()
    await server.stop()


async def test_a_request_pipelined_behind_a_reauthentication_handshake_is_the_authenticators(
    sasl_broker: StartBroker,
) -> None:
    """A Heartbeat sent right behind the SaslHandshake that starts a re-authentication does not take the fast path:
    SSA answers it ILLEGAL_SASL_STATE during the exchange, then closes."""
    broker = await sasl_broker(connections_max_reauth_ms=3000, failed_authentication_delay_ms=0)
    client = await broker.connect()
    await login_plain(client)
    beat = request(12, 4, group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    await client.send_raw(client.encode(request(17, 1, mechanism="PLAIN"), 50) + client.encode(beat, 51))
    _, answer = client.decode(17, 1, await client.read_frame())
    assert answer.error_code == E.none
    _, answer = client.decode(12, 4, await client.read_frame())
    assert answer.error_code == E.illegal_sasl_state
    assert await client.closed_by_peer(3)
