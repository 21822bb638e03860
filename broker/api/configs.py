"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44), as Kafka 4 answers them.

Versions: Kafka 4.0 serves DescribeConfigs 1-4 (KIP-896 removed v0), AlterConfigs 0-2 and IncrementalAlterConfigs
0-1; kio carries those schemas. Clients seen on the wire: DescribeConfigs v1 (librdkafka), v4 (kafka-python), v2
(aiokafka); AlterConfigs v2/v2/v1; IncrementalAlterConfigs v1. v1+ DescribeConfigs carries ConfigSource and
synonyms, v3+ ConfigType and documentation; v4 is flexible.

Behaviour follows Kafka's ConfigHelper (describe), ConfigAdminManager (the broker's checks before a change) and
ConfigurationControlManager (the controller applying it):
- Resource types TOPIC (2) and BROKER (4). BROKER_LOGGER (8) is refused with INVALID_REQUEST (this broker has no
  log4j loggers to list or change); any other type is INVALID_REQUEST "Unsupported resource type".
- A topic: an illegal name is INVALID_TOPIC_EXCEPTION, an unknown one UNKNOWN_TOPIC_OR_PARTITION. Every topic config
  Kafka 4 knows is listed with its effective value: the topic's override (TOPIC_CONFIG, 1), else the broker's
  setting of its synonym (STATIC_BROKER_CONFIG, 4, when set away from Kafka's default), else Kafka's default
  (DEFAULT_CONFIG, 5).
- A broker: empty name = the cluster-wide dynamic defaults (none here: an empty list), our node id = every setting
  under Kafka's name, any other id INVALID_REQUEST "Unexpected broker id". Broker configs are read-only here: a
  change is refused as Kafka's DynamicBrokerConfig refuses a non-dynamic one (INVALID_REQUEST, KAFKA-13609).
  Beside Kafka's names, one of ours: ``group.broker.control.url`` (``CONTROL_URL_CONFIG``), the control API's URL
  as this listener's clients reach it (null when it is off), read-only, so that any Kafka tool, and
  ``group-broker watch --bootstrap HOST:PORT`` (broker/cli/discover.py), finds the API from the Kafka address
  (issue 18: the default admin port may have given way to a free one).
- AlterConfigs replaces a topic's whole set of overrides; IncrementalAlterConfigs applies SET/DELETE/APPEND/SUBTRACT,
  APPEND and SUBTRACT only on LIST configs. Configs are checked with CreateTopics' check (storage/topics.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from broker.api.authorization import check_config_access
from broker.api.base import NO_THROTTLE, ApiContext, Call, ErrorAnswer, Refused, Route, error_message
from broker.config.settings import OPTIONS, Endpoint, Settings
from broker.security.acls import Operation
from broker.storage.topics import KNOWN_TOPIC_CONFIGS, InvalidConfig, check_configs, shown, topic_name_problem
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

# ConfigResource.Type ids and the names Kafka's messages print.
TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
_TYPE_NAMES = {2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS", 32: "GROUP"}
# DescribeConfigsResponse.ConfigSource.
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 1, 4, 5, 8
# DescribeConfigsResponse.ConfigType.
_BOOLEAN, _STRING, _INT, _LONG, _DOUBLE, _LIST = 1, 2, 3, 5, 6, 7
# AlterConfigOp.OpType.
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
_LONG_MAX = "9223372036854775807"

# Every topic config of KNOWN_TOPIC_CONFIGS: Kafka 4's default, its type, and the broker setting it falls back to
# (ServerTopicConfigSynonyms), as LogConfig declares them.
_TOPIC_CONFIGS: dict[str, tuple[str, int, str | None]] = {
    "cleanup.policy": ("delete", _LIST, "log.cleanup.policy"),
    "compression.gzip.level": ("-1", _INT, "compression.gzip.level"),
    "compression.lz4.level": ("9", _INT, "compression.lz4.level"),
    "compression.type": ("producer", _STRING, "compression.type"),
    "compression.zstd.level": ("3", _INT, "compression.zstd.level"),
    "delete.retention.ms": ("86400000", _LONG, "log.cleaner.delete.retention.ms"),
    "file.delete.delay.ms": ("60000", _LONG, "log.segment.delete.delay.ms"),
    "flush.messages": (_LONG_MAX, _LONG, "log.flush.interval.messages"),
    "flush.ms": (_LONG_MAX, _LONG, "log.flush.interval.ms"),
    "follower.replication.throttled.replicas": ("", _LIST, None),
    "index.interval.bytes": ("4096", _INT, "log.index.interval.bytes"),
    "leader.replication.throttled.replicas": ("", _LIST, None),
    "local.retention.bytes": ("-2", _LONG, "log.local.retention.bytes"),
    "local.retention.ms": ("-2", _LONG, "log.local.retention.ms"),
    "max.compaction.lag.ms": (_LONG_MAX, _LONG, "log.cleaner.max.compaction.lag.ms"),
    "max.message.bytes": ("1048588", _INT, "message.max.bytes"),
    "message.timestamp.after.max.ms": ("3600000", _LONG, "log.message.timestamp.after.max.ms"),
    "message.timestamp.before.max.ms": (_LONG_MAX, _LONG, "log.message.timestamp.before.max.ms"),
    "message.timestamp.type": ("CreateTime", _STRING, "log.message.timestamp.type"),
    "min.cleanable.dirty.ratio": ("0.5", _DOUBLE, "log.cleaner.min.cleanable.ratio"),
    "min.compaction.lag.ms": ("0", _LONG, "log.cleaner.min.compaction.lag.ms"),
    "min.insync.replicas": ("1", _INT, "min.insync.replicas"),
    "preallocate": ("false", _BOOLEAN, "log.preallocate"),
    "remote.log.copy.disable": ("false", _BOOLEAN, None),
    "remote.log.delete.on.disable": ("false", _BOOLEAN, None),
    "remote.storage.enable": ("false", _BOOLEAN, None),
    "retention.bytes": ("-1", _LONG, "log.retention.bytes"),
    "retention.ms": ("604800000", _LONG, "log.retention.ms"),
    "segment.bytes": ("1073741824", _INT, "log.segment.bytes"),
    "segment.index.bytes": ("10485760", _INT, "log.index.size.max.bytes"),
    "segment.jitter.ms": ("0", _LONG, "log.roll.jitter.ms"),
    "segment.ms": ("604800000", _LONG, "log.roll.ms"),
    "unclean.leader.election.enable": ("false", _BOOLEAN, "unclean.leader.election.enable"),
}
assert set(_TOPIC_CONFIGS) == KNOWN_TOPIC_CONFIGS, "every known topic config needs a default"
_TOPIC_DOCS = {
    "retention.ms": "How long a partition keeps a record batch before retention drops it (-1: no limit).",
    "retention.bytes": "How large a partition may grow before retention drops its oldest batches (-1: no limit).",
    "max.message.bytes": "The largest record batch a producer may append to this topic.",
}
# Ours, not Kafka's: where the control API listens. Its source is DEFAULT_CONFIG while --admin-host and
# --admin-port keep their defaults (the default port that gave way to a free one included), else
# STATIC_BROKER_CONFIG, as for Kafka's own settings here.
CONTROL_URL_CONFIG = "group.broker.control.url"
_CONTROL_URL_DOC = (
    "The URL of this broker's HTTP control API (group-broker's own config, not Kafka's; null when it is off)."
)
_DYNAMIC_ONLY = "This broker keeps the value for clients that read it; it does not act on it."

# Broker settings clients commonly read that this broker has no setting for, with the value it behaves as
# (one broker: every replication factor and ISR is 1) and Kafka's default, to tell the source.
_FIXED_BROKER_CONFIGS: dict[str, tuple[str, str, int]] = {
    "default.replication.factor": ("1", "1", _INT),
    "min.insync.replicas": ("1", "1", _INT),
    "offsets.topic.replication.factor": ("1", "3", _INT),
    "transaction.state.log.replication.factor": ("1", "3", _INT),
    "transaction.state.log.min.isr": ("1", "2", _INT),
}
_LONG_BROKER_CONFIGS = frozenset(
    {
        "log.retention.ms",
        "log.retention.bytes",
        "log.retention.check.interval.ms",
        "offsets.retention.check.interval.ms",
    }
)


def _type_name(resource_type: int) -> str:
    return _TYPE_NAMES.get(resource_type, "UNKNOWN")


def _check_broker_name(ctx: ApiContext, name: str) -> None:
    """ConfigHelper.resourceNameToBrokerId and its comparison with this node's id."""
    try:
        broker_id = int(name)
    except ValueError:
        raise Refused(ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {shown(name)}") from None
    if broker_id != ctx.identity.node_id:
        raise Refused(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {ctx.identity.node_id} or empty string, but received {shown(name)}",
        )


# -- DescribeConfigs ------------------------------------------------------------------------------


def describe_configs(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    cls = response_schema(ApiKey.DESCRIBE_CONFIGS, version)
    result_cls = nested(cls, "DescribeConfigsResult")
    entry_cls = nested(cls, "DescribeConfigsResourceResult")
    synonym_cls = nested(cls, "DescribeConfigsSynonym") if version >= 1 else None
    synonyms_wanted = bool(getattr(body, "include_synonyms", False))
    docs_wanted = bool(getattr(body, "include_documentation", False))
    results = []
    for resource in body.resources:
        try:
            check_config_access(  # issue 30
                ctx, call, "DescribeConfigs", Operation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name
            )
            entries = _describe(ctx, resource.resource_type, resource.resource_name)
            error, message = ErrorCode.none, None
        except Refused as refusal:
            entries, error, message = [], refusal.error, refusal.message
        keys = resource.configuration_keys
        if keys:  # null or empty: every config (ConfigHelper.createResponseConfig)
            entries = [e for e in entries if e[0] in keys]
        configs = tuple(
            build(
                entry_cls,
                name=name,
                value=value,
                read_only=read_only,
                config_source=i8(synonyms[0][2] if synonyms else DEFAULT_CONFIG),
                is_sensitive=False,
                synonyms=tuple(build(synonym_cls, name=n, value=v, source=i8(s)) for n, v, s in synonyms)
                if synonyms_wanted and synonym_cls is not None
                else (),
                config_type=i8(config_type),
                documentation=doc if docs_wanted else None,
            )
            for name, value, read_only, synonyms, config_type, doc in entries
        )
        results.append(
            build(
                result_cls,
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=configs,
            )
        )
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(results))


# name, value, read-only, synonyms (name, value, source; the first is the entry's source), type, documentation
_Entry = tuple[str, str | None, bool, list[tuple[str, str | None, int]], int, str | None]


def _describe(ctx: ApiContext, resource_type: int, name: str) -> list[_Entry]:
    if resource_type == TOPIC:
        problem = topic_name_problem(name)
        if problem is not None:
            raise Refused(ErrorCode.invalid_topic_exception, problem)
        topic = ctx.topics.get(name)
        if topic is None:
            raise Refused(ErrorCode.unknown_topic_or_partition, None)  # ConfigHelper sets no message here
        return _topic_entries(ctx, topic.configs)
    if resource_type == BROKER:
        if not name:
            return []  # the cluster-wide dynamic defaults: none can be set on this broker
        _check_broker_name(ctx, name)
        return _broker_entries(ctx)
    if resource_type == GROUP:
        return _group_entries(ctx, name)
    if resource_type == BROKER_LOGGER and name:
        _check_broker_name(ctx, name)
    raise Refused(ErrorCode.invalid_request, f"Unsupported resource type: {_type_name(resource_type)}")


def _group_entries(ctx: ApiContext, group_id: str) -> list[_Entry]:
    """A group id's configs (share groups' ones, docs/spec/share-groups.md 11.2): its own (GROUP_CONFIG) or the
    broker's setting they fall back to; the group need not exist."""
    if not group_id:
        raise Refused(ErrorCode.invalid_request, "Group name can't be empty.")
    entries: list[_Entry] = []
    for shown_config in ctx.coordinator.group_configs.shown(group_id):
        name, value = shown_config.name, shown_config.value
        broker_name = "group." + name if name.endswith(".ms") else None
        synonyms: list[tuple[str, str | None, int]] = [] if shown_config.is_default else [(name, value, GROUP_CONFIG)]
        default = ctx.coordinator.group_configs.defaults()[name]
        synonyms.append((broker_name or name, default, DEFAULT_CONFIG))
        kind = _STRING if shown_config.kind == "string" else _INT
        entries.append((name, value, False, synonyms, kind, shown_config.doc))
    return entries


def _broker_values(ctx: ApiContext) -> dict[str, str]:
    """The broker's settings its topics fall back to, by Kafka's names."""
    defaults = ctx.topics.defaults
    return {
        "log.retention.ms": str(defaults.retention_ms),
        "log.retention.bytes": str(defaults.retention_bytes),
        "message.max.bytes": str(defaults.max_message_bytes),
    }


def _topic_entries(ctx: ApiContext, overrides: Mapping[str, str]) -> list[_Entry]:
    broker = _broker_values(ctx)
    entries: list[_Entry] = []
    for name, (default, config_type, synonym) in sorted(_TOPIC_CONFIGS.items()):
        synonyms: list[tuple[str, str | None, int]] = []
        if name in overrides:
            synonyms.append((name, overrides[name], TOPIC_CONFIG))
        if synonym is not None:
            value = broker.get(synonym, default)
            if value != default:
                synonyms.append((synonym, value, STATIC_BROKER_CONFIG))
            synonyms.append((synonym, default, DEFAULT_CONFIG))
        effective = synonyms[0][1] if synonyms else default
        entries.append((name, effective, False, synonyms, config_type, _TOPIC_DOCS.get(name, _DYNAMIC_ONLY)))
    return entries


def _text(value: Any) -> str | None:
    """A setting's value as Kafka prints it: booleans in lower case, lists comma-separated."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(f"{v[0]}:{v[1]}" if isinstance(v, tuple) else str(v) for v in value)
    return str(value)


def _config_type(name: str, value: Any) -> int:
    if isinstance(value, bool):
        return _BOOLEAN
    if isinstance(value, int):
        return _LONG if name in _LONG_BROKER_CONFIGS else _INT
    return _LIST if isinstance(value, tuple) else _STRING


def _setting(settings: Settings, path: str) -> Any:
    holder: Any = settings
    for part in path.split("."):
        holder = getattr(holder, part)
    return holder


def _broker_entries(ctx: ApiContext) -> list[_Entry]:
    settings = ctx.settings if ctx.settings is not None else Settings(node_id=ctx.identity.node_id)
    found: dict[str, _Entry] = {}
    for option in OPTIONS:
        if option.kafka is None or not option.setting:
            continue
        value = _setting(settings, option.path)
        if isinstance(value, tuple) and value and isinstance(value[0], Endpoint) and option.kafka == "listeners":
            value = tuple(str(e) for e in value)
        text = _text(value)
        source = DEFAULT_CONFIG if value == option.default else STATIC_BROKER_CONFIG
        synonyms: list[tuple[str, str | None, int]] = [(option.kafka, text, source)]
        found[option.kafka] = (option.kafka, text, True, synonyms, _config_type(option.kafka, value), option.help)
    node = str(settings.node_id)
    found["broker.id"] = ("broker.id", node, True, [("broker.id", node, STATIC_BROKER_CONFIG)], _INT, None)
    for name, (value, kafka_default, config_type) in _FIXED_BROKER_CONFIGS.items():
        source = DEFAULT_CONFIG if value == kafka_default else STATIC_BROKER_CONFIG
        found[name] = (name, value, True, [(name, value, source)], config_type, "fixed: this broker is one node")
    if ctx.settings is not None:  # a broker's, not a bare test context's
        url = ctx.control_url if settings.admin_port >= 0 else None
        moved = any(_setting(settings, o.name) != o.default for o in OPTIONS if o.name in ("admin_host", "admin_port"))
        source = STATIC_BROKER_CONFIG if moved else DEFAULT_CONFIG
        synonym = [(CONTROL_URL_CONFIG, url, source)]
        found[CONTROL_URL_CONFIG] = (CONTROL_URL_CONFIG, url, True, synonym, _STRING, _CONTROL_URL_DOC)
    return [found[name] for name in sorted(found)]


# -- AlterConfigs and IncrementalAlterConfigs ----------------------------------------------------------


def alter_configs(ctx: ApiContext, call: Call, body: Any) -> Any:
    """Every entry replaces the topic's whole set of overrides (ConfigurationControlManager.legacyAlterConfigs)."""

    def replace(ctx: ApiContext, current: Mapping[str, str], resource: Any) -> dict[str, str]:
        nulls = [c.name for c in resource.configs if c.value is None]
        if nulls:
            raise Refused(ErrorCode.invalid_request, f"Null value not supported for : {shown(','.join(nulls))}")
        return {c.name: c.value for c in resource.configs}

    return _alter(ctx, call, body, ApiKey.ALTER_CONFIGS, replace)


def incremental_alter_configs(ctx: ApiContext, call: Call, body: Any) -> Any:
    """SET, DELETE, APPEND and SUBTRACT on the topic's current overrides (ConfigurationControlManager)."""
    return _alter(ctx, call, body, ApiKey.INCREMENTAL_ALTER_CONFIGS, _apply_operations)


def _apply_operations(ctx: ApiContext, current: Mapping[str, str], resource: Any) -> dict[str, str]:
    names = Counter(c.name for c in resource.configs)
    duplicated = sorted(name for name, count in names.items() if count > 1)
    if duplicated:
        raise Refused(ErrorCode.invalid_request, f"Error due to duplicate config keys : {shown(','.join(duplicated))}")
    for config in resource.configs:
        if config.config_operation not in _OP_NAMES:
            raise Refused(ErrorCode.invalid_request, f"Unknown alter config operation type {config.config_operation}")
    nulls = [
        f"{_OP_NAMES[c.config_operation]}:{c.name}"
        for c in resource.configs
        if c.value is None and c.config_operation != DELETE
    ]
    if nulls:
        raise Refused(ErrorCode.invalid_request, f"Null value not supported for : {shown(','.join(nulls))}")
    result = dict(current)
    for config in resource.configs:
        name, op = config.name, config.config_operation
        if name not in KNOWN_TOPIC_CONFIGS:
            raise Refused(ErrorCode.invalid_config, f"Unknown topic config name: {shown(name)}")
        if op == SET:
            result[name] = config.value
        elif op == DELETE:
            result.pop(name, None)
        else:
            default, config_type, _ = _TOPIC_CONFIGS[name]
            if config_type != _LIST:
                raise Refused(
                    ErrorCode.invalid_config,
                    f"Can't {_OP_NAMES[op]} to key {name} because its type is not LIST.",
                )
            values = [v for v in result.get(name, default).split(",") if v]
            given = [v.strip() for v in config.value.split(",") if v.strip()]
            if op == APPEND:
                values += [v for v in given if v not in values]
            else:
                values = [v for v in values if v not in given]
            result[name] = ",".join(values)
    return result


_Change = Callable[[ApiContext, Mapping[str, str], Any], dict[str, str]]


def _alter(ctx: ApiContext, call: Call, body: Any, api: ApiKey, change: _Change) -> Any:
    cls = response_schema(api, call.api_version)
    response_cls = nested(cls, "AlterConfigsResourceResponse")
    counts = Counter((r.resource_type, r.resource_name) for r in body.resources)
    planned: list[tuple[Any, ErrorCode, str | None, dict[str, str] | None]] = []
    for resource in body.resources:
        try:
            if counts[(resource.resource_type, resource.resource_name)] > 1:
                # ConfigAdminManager.preprocess: a resource named twice is refused, every time it is named.
                raise Refused(ErrorCode.invalid_request, "Duplicate resource.")
            check_config_access(  # issue 30
                ctx, call, api.name.title().replace("_", ""), Operation.ALTER_CONFIGS, resource.resource_type,
                resource.resource_name,
            )
            planned.append((resource, ErrorCode.none, None, _plan(ctx, resource, change)))
        except Refused as refusal:
            planned.append((resource, refusal.error, refusal.message, None))
    responses = []
    for resource, error, message, configs in planned:
        if configs is not None and not body.validate_only:
            if resource.resource_type == GROUP:
                ctx.coordinator.group_configs.replace(resource.resource_name, configs)
            else:
                topic = ctx.topics.get(resource.resource_name)
                if topic is not None:
                    topic.replace_configs(configs)
        responses.append(
            build(
                response_cls,
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return build(cls, throttle_time=NO_THROTTLE, responses=tuple(responses))


def _plan(ctx: ApiContext, resource: Any, change: _Change) -> dict[str, str] | None:
    """The topic's new overrides (None: nothing to change), or the refusal."""
    kind, name = resource.resource_type, resource.resource_name
    if kind == TOPIC:
        topic = ctx.topics.get(name)
        if topic is None:
            raise Refused(ErrorCode.unknown_topic_or_partition, f"The topic '{shown(name)}' does not exist.")
        configs = change(ctx, topic.configs, resource)
        try:
            check_configs(configs)
        except InvalidConfig as bad:
            raise Refused(ErrorCode.invalid_config, str(bad)) from None
        return configs
    if kind == GROUP:
        return _plan_group(ctx, resource, incremental=change is _apply_operations)
    if kind == BROKER:
        if name:
            _check_broker_name(ctx, name)
        names = sorted({c.name for c in resource.configs})
        if names:
            # DynamicBrokerConfig.validate's ConfigException, made INVALID_REQUEST by ConfigAdminManager
            # (KAFKA-13609): here no broker config can change while the broker runs.
            raise Refused(
                ErrorCode.invalid_request, f"Cannot update these configs dynamically: Set({shown(', '.join(names))})"
            )
        return None
    raise Refused(
        ErrorCode.invalid_request,
        f"AlterConfigs is only supported for topics and brokers, but resource type is {_type_name(kind)}",
    )


def _plan_group(ctx: ApiContext, resource: Any, *, incremental: bool) -> dict[str, str]:
    """A group's new overrides: SET and DELETE (no group config is a LIST), checked as GroupConfig.validate."""
    if not resource.resource_name:
        raise Refused(ErrorCode.invalid_request, "Group name can't be empty.")
    configs = ctx.coordinator.group_configs
    result = configs.own(resource.resource_name) if incremental else {}
    asked: dict[str, str | None] = {}
    for config in resource.configs:
        op = config.config_operation if incremental else SET
        if op == DELETE:
            result.pop(config.name, None)
            asked[config.name] = None
        elif op == SET:
            if config.value is None:
                raise Refused(ErrorCode.invalid_request, f"Null value not supported for : {shown(config.name)}")
            result[config.name] = config.value
            asked[config.name] = config.value
        elif op in (APPEND, SUBTRACT):
            raise Refused(
                ErrorCode.invalid_config, f"Can't {_OP_NAMES[op]} to key {config.name} because its type is not LIST."
            )
        else:
            raise Refused(ErrorCode.invalid_request, f"Unknown alter config operation type {op}")
    try:
        configs.check(asked)
    except ValueError as bad:
        raise Refused(ErrorCode.invalid_config, str(bad)) from None
    return result


def _describe_configs_error(version: int, body: Any, error: ErrorCode) -> Any:
    # DescribeConfigsRequest.getErrorResponse: the error and its message for every resource, no configs.
    cls = response_schema(ApiKey.DESCRIBE_CONFIGS, version)
    result_cls = nested(cls, "DescribeConfigsResult")
    results = tuple(
        build(
            result_cls,
            error_code=error,
            error_message=error_message(error),
            resource_type=r.resource_type,
            resource_name=r.resource_name,
            configs=(),
        )
        for r in body.resources
    )
    return build(cls, throttle_time=NO_THROTTLE, results=results)


def _alter_error(api_key: int) -> ErrorAnswer:
    """(Incremental)AlterConfigsRequest.getErrorResponse: the error and its message for every resource."""

    def answer(version: int, body: Any, error: ErrorCode) -> Any:
        cls = response_schema(api_key, version)
        response_cls = nested(cls, "AlterConfigsResourceResponse")
        responses = tuple(
            build(
                response_cls,
                error_code=error,
                error_message=error_message(error),
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in body.resources
        )
        return build(cls, throttle_time=NO_THROTTLE, responses=responses)

    return answer


ROUTES = {
    ApiKey.DESCRIBE_CONFIGS: Route(describe_configs, _describe_configs_error),
    ApiKey.ALTER_CONFIGS: Route(alter_configs, _alter_error(ApiKey.ALTER_CONFIGS)),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: Route(incremental_alter_configs, _alter_error(ApiKey.INCREMENTAL_ALTER_CONFIGS)),
}
