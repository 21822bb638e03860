"""The APIs this broker speaks and the version range of each.

ApiVersions is built from this table, and the connection layer refuses anything
outside it, so this is the one place that says what the broker supports.
"""

from __future__ import annotations

import enum
from types import MappingProxyType


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


# Minimums follow Kafka 4.0 (KIP-896 removed OffsetCommit v0-1, OffsetFetch v0, Produce v0-2,
# Fetch v0-3, ListOffsets v0, CreateTopics v0-1 and DeleteTopics v0).
# Produce stays advertised even for consumers: librdkafka will not fetch otherwise (docs/spec/client-traps.md G1).
# ListOffsets stops at 10 so kafka-python infers Kafka 4.0 (G4).
# DescribeGroups v6 is Kafka 4.0's (KIP-1043). ConsumerGroupHeartbeat and ConsumerGroupDescribe are listed 0-1
# whether or not the consumer protocol is enabled, as Kafka lists them (docs/spec/consumer-groups.md section 2.4):
# disabled, they answer UNSUPPORTED_VERSION (section 4.1).
SUPPORTED_VERSIONS: MappingProxyType[int, tuple[int, int]] = MappingProxyType(
    {
        ApiKey.PRODUCE: (3, 11),
        ApiKey.FETCH: (4, 16),
        ApiKey.LIST_OFFSETS: (1, 10),
        ApiKey.METADATA: (0, 13),
        ApiKey.OFFSET_COMMIT: (2, 9),
        ApiKey.OFFSET_FETCH: (1, 9),
        ApiKey.FIND_COORDINATOR: (0, 6),
        ApiKey.JOIN_GROUP: (0, 9),
        ApiKey.HEARTBEAT: (0, 4),
        ApiKey.LEAVE_GROUP: (0, 5),
        ApiKey.SYNC_GROUP: (0, 5),
        ApiKey.DESCRIBE_GROUPS: (0, 6),
        ApiKey.LIST_GROUPS: (0, 5),
        ApiKey.API_VERSIONS: (0, 4),
        # SASL (issue 30, docs/spec/security.md 2): listed on every listener, PLAINTEXT included, as Kafka does;
        # SaslHandshake never went past v1 (KAFKA-9577). On a listener without SASL, or once authenticated, both
        # answer ILLEGAL_SASL_STATE (broker/api/sasl.py); the SCRAM credential APIs are KRaft's (section 12).
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.SASL_AUTHENTICATE: (0, 2),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.CREATE_TOPICS: (2, 7),
        ApiKey.DELETE_TOPICS: (1, 6),
        ApiKey.DELETE_RECORDS: (0, 2),
        ApiKey.INIT_PRODUCER_ID: (0, 5),
        # KIP-320's position validation; v0-1 went with KIP-896. Listed only by several nodes (CLUSTER_APIS).
        ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
        # Transactions, TV1 only (docs/spec/transactions.md 2.3 choice B): AddPartitionsToTxn v4-5 are the
        # broker-to-broker form, EndTxn v5 is TV2.
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
        ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
        ApiKey.END_TXN: (0, 4),
        ApiKey.TXN_OFFSET_COMMIT: (0, 4),  # v5 is transaction version 2, not advertised
        # The admin side (KIP-664, section 6): WriteTxnMarkers only as an admin's abort sends it (v0 is gone since
        # 4.0, v2 is TV2's); ListTransactions v2 is 4.1's pattern filter.
        ApiKey.WRITE_TXN_MARKERS: (1, 1),
        ApiKey.DESCRIBE_PRODUCERS: (0, 0),
        ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
        ApiKey.LIST_TRANSACTIONS: (0, 2),
        ApiKey.DESCRIBE_ACLS: (1, 3),
        ApiKey.CREATE_ACLS: (1, 3),
        ApiKey.DELETE_ACLS: (1, 3),
        ApiKey.CREATE_PARTITIONS: (0, 3),
        ApiKey.DESCRIBE_CONFIGS: (1, 4),  # KIP-896 removed v0
        ApiKey.ALTER_CONFIGS: (0, 2),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
        ApiKey.DELETE_GROUPS: (0, 2),
        ApiKey.OFFSET_DELETE: (0, 0),
        ApiKey.DESCRIBE_CLUSTER: (0, 2),
        ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
        ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
        # KIP-932 share groups, as Kafka 4.2 lists them with share.version=1 (docs/spec/share-groups.md 2.7):
        # 76/77 v1 only (v0 was 4.0's early access), ShareFetch/ShareAcknowledge v1-2, the offsets admin APIs.
        ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
        ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
        ApiKey.SHARE_FETCH: (1, 2),
        ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
        ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
        ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    }
)


# The APIs that share.version gates (Kafka's ApiVersionManager leaves them out of ApiVersions when it is 0).
SHARE_APIS: frozenset[int] = frozenset(
    {
        ApiKey.SHARE_GROUP_HEARTBEAT,
        ApiKey.SHARE_GROUP_DESCRIBE,
        ApiKey.SHARE_FETCH,
        ApiKey.SHARE_ACKNOWLEDGE,
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        ApiKey.ALTER_SHARE_GROUP_OFFSETS,
        ApiKey.DELETE_SHARE_GROUP_OFFSETS,
    }
)


# The APIs only a multi-node broker lists (issue 29). Kafka always lists OffsetForLeaderEpoch, but one node's leader
# epoch never changes, and a client that sees it listed validates positions it never had to (librdkafka does so
# after every committed-offset fetch that carries an epoch): one node keeps answering as it always has.
CLUSTER_APIS: frozenset[int] = frozenset({ApiKey.OFFSET_FOR_LEADER_EPOCH})


def advertised_versions(share_groups: bool, cluster: bool = False) -> list[tuple[int, tuple[int, int]]]:
    """What ApiVersions lists, in key order: every supported API, less the share APIs when share groups are off
    and the cluster APIs on one node."""
    return sorted(
        (key, versions)
        for key, versions in SUPPORTED_VERSIONS.items()
        if (share_groups or key not in SHARE_APIS) and (cluster or key not in CLUSTER_APIS)
    )


def api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"UNKNOWN({api_key})"


def kafka_name(api_key: int) -> str:
    """The name Kafka's docs and ApiKeys use: JoinGroup, OffsetCommit, ApiVersions."""
    return "".join(word.capitalize() for word in api_name(api_key).split("_"))
