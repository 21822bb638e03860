"""Produce ten keyed records, consume them in a group, then add a second member and watch the rebalance.

    python examples/quickstart_kafka_python.py [BOOTSTRAP]   (default localhost:9092)
"""

import sys
import threading
import time

try:
    from kafka import KafkaConsumer, KafkaProducer
except ModuleNotFoundError:  # the client libraries are the package's [clients] extra, not dependencies
    sys.exit(f"{sys.argv[0]}: kafka-python is not installed: pip install '.[clients]' in the kafka-group-broker "
             "checkout (the three client libraries), or pip install kafka-python")

BOOTSTRAP = sys.argv[1] if len(sys.argv) > 1 else "localhost:9092"
TOPIC = "quickstart"
GROUP = "quickstart-kafka-python"


def consumer() -> KafkaConsumer:
    return KafkaConsumer(
        TOPIC, bootstrap_servers=BOOTSTRAP, group_id=GROUP, auto_offset_reset="earliest", enable_auto_commit=False
    )


def owned(member: KafkaConsumer) -> list[int]:
    return sorted(tp.partition for tp in member.assignment())


def split_between(first: list[int], second: list[int]) -> bool:
    """Both members hold partitions and none twice: the rebalance has reached both of them."""
    return bool(first) and bool(second) and not set(first) & set(second)


producer = KafkaProducer(bootstrap_servers=BOOTSTRAP)  # idempotent by default
ours: set[tuple[int, int]] = set()  # (partition, offset) of this run's records; the topic may hold older ones
for i in range(10):
    sent = producer.send(TOPIC, key=f"key-{i}".encode(), value=f"record {i}".encode()).get(timeout=30)
    ours.add((sent.partition, sent.offset))
producer.close()
print("produced 10 records")

first = consumer()
earlier = 0
while ours:
    for records in first.poll(timeout_ms=1000).values():
        for record in records:
            if (record.partition, record.offset) not in ours:
                earlier += 1
                continue
            ours.discard((record.partition, record.offset))
            print(f"consumed {record.topic}-{record.partition}@{record.offset}: {record.value!r}")
if earlier:  # the topic keeps what earlier runs produced; a new group reads it from the start
    print(f"skipped {earlier} records of earlier runs")
first.commit()
print("first member owns", owned(first))

# Each member polls in its own thread, as each would in its own process: a kafka-python consumer that is not
# polling when its rebalance completes can miss the answer (a client-side quirk of kafka-python 3.0.12).
second = consumer()  # its first poll joins the group and starts a rebalance; the broker logs it
done = threading.Event()


def keep_polling(member: KafkaConsumer) -> None:
    while not done.is_set():
        member.poll(timeout_ms=500)


threads = [threading.Thread(target=keep_polling, args=(member,)) for member in (first, second)]
for thread in threads:
    thread.start()
while not split_between(owned(first), owned(second)):
    time.sleep(0.1)
done.set()
for thread in threads:
    thread.join()
print("after the rebalance: first owns", owned(first), "second owns", owned(second))
second.close()
first.close()
