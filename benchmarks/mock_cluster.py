"""librdkafka's mock cluster in a process of its own: prints its bootstrap address, then waits.

It is created with librdkafka's C API through ctypes (a producer handle, then a one-broker mock
cluster on it, or ``--brokers N`` brokers, ids 1..N, whose bootstraps are printed as one comma-separated line),
from the librdkafka that the confluent-kafka wheel bundles. The cluster runs on
librdkafka's own "mock" thread; this process's Python thread only reads commands from stdin:

    delay MS               the classic group initial rebalance delay (rd_kafka_mock_group_initial_rebalance_delay_ms)
    topic NAME PARTITIONS  create a topic (rd_kafka_mock_topic_create, replication factor 1): the mock has no
                           CreateTopics, and its KIP-848 groups assign only partitions of topics that exist
    consumer-session MS    group.consumer.session.timeout.ms of its KIP-848 groups
                           (rd_kafka_mock_set_group_consumer_session_timeout_ms)
    consumer-interval MS   group.consumer.heartbeat.interval.ms (rd_kafka_mock_set_group_consumer_heartbeat_interval_ms)
    stop ID KEY=ID ...     broker ID down (rd_kafka_mock_broker_set_down: its connections close), then each group KEY's
                           coordinator set to broker ID (rd_kafka_mock_coordinator_set: the mock moves none itself)
    move KEY=ID ...        each group KEY's coordinator set to broker ID (rd_kafka_mock_coordinator_set), no broker down
    share-reset N          where its KIP-932 share-partitions start: 0 latest (its default), 1 earliest
                           (rd_kafka_mock_sharegroup_set_auto_offset_reset: the mock has no group configs)

and answers each with "ok", or "unsupported ..." when this librdkafka lacks the function (the two consumer-*
setters and KIP-848 itself came with librdkafka 2.x; 2.16 has them). It exits when stdin closes or on
SIGTERM/SIGINT.
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys
from pathlib import Path
from typing import Any


def find_librdkafka() -> Path:
    """The librdkafka shared object inside the installed confluent_kafka package (not imported)."""
    spec = importlib.util.find_spec("confluent_kafka")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("confluent_kafka is not installed")
    package = Path(next(iter(spec.submodule_search_locations)))
    for folder in (package.parent / "confluent_kafka.libs", package, package / ".libs"):
        found = sorted(folder.glob("librdkafka*.so*")) if folder.is_dir() else []
        if found:
            return found[0]
    raise RuntimeError(f"no librdkafka*.so* beside {package}")


def load(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.restype = ctypes.c_int
    lib.rd_kafka_conf_set.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms.restype = None
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    for name, argtypes in OPTIONAL.items():
        if hasattr(lib, name):  # a missing symbol is an AttributeError, not a crash
            getattr(lib, name).argtypes = argtypes
    return lib


# Functions an older librdkafka may lack: their commands answer "unsupported" instead.
OPTIONAL: dict[str, list[type[ctypes._SimpleCData[Any]]]] = {
    # rd_kafka_resp_err_t rd_kafka_mock_topic_create(mcluster, topic, partition_cnt, replication_factor)
    "rd_kafka_mock_topic_create": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int],
    "rd_kafka_mock_set_group_consumer_session_timeout_ms": [ctypes.c_void_p, ctypes.c_int],
    "rd_kafka_mock_set_group_consumer_heartbeat_interval_ms": [ctypes.c_void_p, ctypes.c_int],
    "rd_kafka_mock_sharegroup_set_auto_offset_reset": [ctypes.c_void_p, ctypes.c_int],
    # Several brokers (issue 29): a broker down (its connections closed, no new ones), a key's explicit coordinator.
    "rd_kafka_mock_broker_set_down": [ctypes.c_void_p, ctypes.c_int32],
    "rd_kafka_mock_coordinator_set": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int32],
}


def command(lib: ctypes.CDLL, cluster: int, words: list[str]) -> str:
    """Run one stdin command; the answer line."""
    match words:
        case ["delay", ms]:
            lib.rd_kafka_mock_group_initial_rebalance_delay_ms(cluster, int(ms))
            return "ok"
        case ["topic", name, partitions]:
            if not hasattr(lib, "rd_kafka_mock_topic_create"):
                return "unsupported rd_kafka_mock_topic_create"
            error = lib.rd_kafka_mock_topic_create(cluster, name.encode(), int(partitions), 1)
            return "ok" if error in (0, TOPIC_ALREADY_EXISTS) else f"error {error}"
        case ["consumer-session" | "consumer-interval" | "share-reset" as which, ms]:
            name = SETTERS[which]
            if not hasattr(lib, name):
                return f"unsupported {name}"
            getattr(lib, name)(cluster, int(ms))
            return "ok"
        case ["stop", broker, *moves]:
            # The broker goes down (the mock moves nothing itself), then each KEY=BROKER given gets that coordinator.
            for name in ("rd_kafka_mock_broker_set_down", "rd_kafka_mock_coordinator_set"):
                if not hasattr(lib, name):
                    return f"unsupported {name}"
            lib.rd_kafka_mock_broker_set_down(cluster, int(broker))
            for move in moves:
                key, _, target = move.rpartition("=")
                lib.rd_kafka_mock_coordinator_set(cluster, b"group", key.encode(), int(target))
            return "ok"
        case ["move", *moves] if moves:
            if not hasattr(lib, "rd_kafka_mock_coordinator_set"):
                return "unsupported rd_kafka_mock_coordinator_set"
            for move in moves:
                key, _, target = move.rpartition("=")
                lib.rd_kafka_mock_coordinator_set(cluster, b"group", key.encode(), int(target))
            return "ok"
    return f"unknown command {' '.join(words)!r}"


TOPIC_ALREADY_EXISTS = 36

SETTERS = {
    "consumer-session": "rd_kafka_mock_set_group_consumer_session_timeout_ms",
    "consumer-interval": "rd_kafka_mock_set_group_consumer_heartbeat_interval_ms",
    "share-reset": "rd_kafka_mock_sharegroup_set_auto_offset_reset",
}


def main() -> int:
    lib = load(find_librdkafka())
    errstr = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    # The producer handle only hosts the cluster; keep it from logging about brokers it never uses.
    lib.rd_kafka_conf_set(conf, b"log_level", b"3", errstr, len(errstr))
    rk = lib.rd_kafka_new(0, conf, errstr, len(errstr))  # 0 = RD_KAFKA_PRODUCER; rk owns conf now
    if not rk:
        print(f"rd_kafka_new failed: {errstr.value.decode()}", file=sys.stderr)
        return 1
    brokers = int(sys.argv[sys.argv.index("--brokers") + 1]) if "--brokers" in sys.argv else 1
    cluster = lib.rd_kafka_mock_cluster_new(rk, brokers)
    if not cluster:
        print("rd_kafka_mock_cluster_new failed", file=sys.stderr)
        return 1
    print(lib.rd_kafka_mock_cluster_bootstraps(cluster).decode(), flush=True)
    for line in sys.stdin:
        if line.split():
            print(command(lib, cluster, line.split()), flush=True)
    # No cleanup: the process is ending and librdkafka's threads go with it.
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(0)
