"""ApiVersions (18): the supported-version table, as Kafka reports it. The usual request is answered by hand
(protocol/api_versions.py); this is the generic path, which owns every error and edge case."""

from __future__ import annotations

from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i16

from broker.api.base import NO_THROTTLE, ApiContext, Call
from protocol.api_versions import SOFTWARE_NAME_VERSION
from protocol.apis import ApiKey, advertised_versions
from protocol.codec import build, nested, response_schema


@cache  # the table is fixed, and every client's first request (and each formed group's leader, in benchmarks) asks
def _api_keys(entry_cls: type, share_groups: bool = True, cluster: bool = False) -> tuple[Any, ...]:
    return tuple(
        entry_cls(api_key=i16(key), min_version=i16(low), max_version=i16(high))
        for key, (low, high) in advertised_versions(share_groups, cluster)
    )


def api_versions(ctx: ApiContext, call: Call, body: Any) -> Any:
    if body is None:
        # A version newer than ours: Kafka answers with a v0 body that lists what it supports.
        return unsupported_version_response(_share_groups(ctx), ctx.route is not None)
    cls = response_schema(ApiKey.API_VERSIONS, call.api_version)
    if call.api_version >= 3 and not (
        SOFTWARE_NAME_VERSION.fullmatch(body.client_software_name)
        and SOFTWARE_NAME_VERSION.fullmatch(body.client_software_version)
    ):
        # Kafka answers INVALID_REQUEST with no api keys (ApiVersionsRequest.isValid / getErrorResponse).
        return build(cls, error_code=ErrorCode.invalid_request, api_keys=(), throttle_time=NO_THROTTLE)
    return build(
        cls,
        error_code=ErrorCode.none,
        api_keys=_api_keys(nested(cls, "ApiVersion"), _share_groups(ctx), ctx.route is not None),
        throttle_time=NO_THROTTLE,
    )


def _share_groups(ctx: ApiContext) -> bool:
    # The settings, when there are any: the coordinator may still be loading (broker/server/broker.py _Pending).
    config = ctx.settings.group if ctx.settings is not None else ctx.coordinator.config
    return config.share_groups_enabled


def unsupported_version_response(share_groups: bool = True, cluster: bool = False) -> Any:
    cls = response_schema(ApiKey.API_VERSIONS, 0)
    keys = _api_keys(nested(cls, "ApiVersion"), share_groups, cluster)
    return build(cls, error_code=ErrorCode.unsupported_version, api_keys=keys)
