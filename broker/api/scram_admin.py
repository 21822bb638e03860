"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), v0, as Kafka's ``KafkaApis`` and the
controller's ``ScramControlManager`` answer them (docs/spec/security.md section 12).

Both work on the broker's SASL users (broker/security/users.py), the ones ``--sasl-users`` filled: an upserted
credential is what the next SCRAM login checks, a deleted one fails it, open sessions are not touched. The client
sends the salted password (Hi(password, salt, iterations)), never the password; the broker derives StoredKey and
ServerKey from it. Salts and keys are never answered. With ACLs on, DESCRIBE (50) and ALTER (51) on the cluster are
checked before the handler (broker/server/acl_gate.py): CLUSTER_AUTHORIZATION_FAILED for the whole request.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from broker.api.base import NO_THROTTLE, ApiContext, Call, Route
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

_DESCRIBE, _ALTER = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS


def _describe_error(version: int, body: Any, error: ErrorCode) -> Any:
    return build(
        response_schema(_DESCRIBE, version), throttle_time=NO_THROTTLE, error_code=error, error_message=None, results=()
    )


def _alter_error(version: int, body: Any, error: ErrorCode) -> Any:
    cls = response_schema(_ALTER, version)
    users = dict.fromkeys(item.name for item in (*body.deletions, *body.upsertions))
    result = nested(cls, "AlterUserScramCredentialsResult")
    results = tuple(build(result, user=user, error_code=error, error_message=None) for user in users)
    return build(cls, throttle_time=NO_THROTTLE, results=results)


def describe_user_scram_credentials(ctx: ApiContext, call: Call, body: Any) -> Any:
    from broker.security.sasl.scram import MECHANISM_CODES

    cls = response_schema(_DESCRIBE, call.api_version)
    result_cls, info_cls = nested(cls, "DescribeUserScramCredentialsResult"), nested(cls, "CredentialInfo")
    known = ctx.user_store().scram_users() if ctx.user_store is not None else {}
    asked = [user.name for user in body.users] if body.users else list(known)
    counts = Counter(asked)
    results = []
    for user in dict.fromkeys(asked):
        error, message, infos = ErrorCode.none, None, ()
        if counts[user] > 1:
            error = ErrorCode.duplicate_resource
            message = f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
        elif user not in known:
            error = ErrorCode.resource_not_found
            message = f"Attempt to describe a user credential that does not exist: {user}"
        else:
            infos = tuple(
                build(info_cls, mechanism=i8(MECHANISM_CODES[mechanism]), iterations=i32(credential.iterations))
                for mechanism, credential in sorted(known[user].items(), key=lambda item: MECHANISM_CODES[item[0]])
            )
        results.append(build(result_cls, user=user, error_code=error, error_message=message, credential_infos=infos))
    return build(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None, results=tuple(results))


def alter_user_scram_credentials(ctx: ApiContext, call: Call, body: Any) -> Any:
    from broker.security.sasl import scram

    if ctx.user_store is None:
        return _alter_error(call.api_version, body, ErrorCode.unknown_server_error)
    store = ctx.user_store()
    cls = response_schema(_ALTER, call.api_version)
    result_cls = nested(cls, "AlterUserScramCredentialsResult")
    counts = Counter(item.name for item in (*body.deletions, *body.upsertions))
    outcome: dict[str, tuple[ErrorCode, str | None]] = {}
    for deletion in body.deletions:
        user, mechanism = deletion.name, scram.MECHANISMS_BY_CODE.get(int(deletion.mechanism))
        refused = _refusal(user, mechanism, counts)
        if refused is None and mechanism is not None and not store.delete(user, mechanism):
            refused = ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"
        outcome[user] = refused or (ErrorCode.none, None)
    for upsertion in body.upsertions:
        user, mechanism = upsertion.name, scram.MECHANISMS_BY_CODE.get(int(upsertion.mechanism))
        refused = _refusal(user, mechanism, counts)
        if refused is None and upsertion.iterations < scram.MIN_ITERATIONS:
            refused = ErrorCode.unacceptable_credential, "Too few iterations"
        elif refused is None and upsertion.iterations > scram.MAX_ITERATIONS:
            refused = ErrorCode.unacceptable_credential, "Too many iterations"
        if refused is None and mechanism is not None:
            store.upsert(
                user,
                mechanism,
                scram.credential_from_salted(
                    mechanism, upsertion.salted_password, upsertion.salt, int(upsertion.iterations)
                ),
            )
        outcome[user] = refused or (ErrorCode.none, None)
    store.save()
    results = tuple(
        build(result_cls, user=user, error_code=error, error_message=message)
        for user, (error, message) in outcome.items()
    )
    return build(cls, throttle_time=NO_THROTTLE, results=results)


def _refusal(user: str, mechanism: str | None, counts: Counter[str]) -> tuple[ErrorCode, str] | None:
    """ScramControlManager's per-user checks before any change, in its order."""
    if counts[user] > 1:
        return ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"
    if not user:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism is None:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


ROUTES = {
    _DESCRIBE: Route(describe_user_scram_credentials, _describe_error),
    _ALTER: Route(alter_user_scram_credentials, _alter_error),
}
