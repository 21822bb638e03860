"""ApiVersions (18): the supported-version table, as Kafka reports it."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i16

from broker.api.base import NO_THROTTLE, ApiContext, Call
from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from protocol.codec import build, nested, response_schema


def _api_keys(entry_cls: type) -> tuple[Any, ...]:
    return tuple(
        entry_cls(api_key=i16(key), min_version=i16(low), max_version=i16(high))
        for key, (low, high) in sorted(SUPPORTED_VERSIONS.items())
    )


def api_versions(ctx: ApiContext, call: Call, body: Any) -> Any:
    if body is None:
        # A version newer than ours: Kafka answers with a v0 body that lists what it supports.
        return unsupported_version_response()
    cls = response_schema(ApiKey.API_VERSIONS, call.api_version)
    return build(
        cls,
        error_code=ErrorCode.none,
        api_keys=_api_keys(nested(cls, "ApiVersion")),
        throttle_time=NO_THROTTLE,
    )


def unsupported_version_response() -> Any:
    cls = response_schema(ApiKey.API_VERSIONS, 0)
    return build(cls, error_code=ErrorCode.unsupported_version, api_keys=_api_keys(nested(cls, "ApiVersion")))
