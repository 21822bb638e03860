"""Exactly-once consume-transform-produce: copy `orders` to `orders-out` in transactions that carry the group's offsets.

    python examples/exactly_once_confluent.py [BOOTSTRAP]   (default localhost:9092)

Ten records go in; the loop commits one transaction for the first five and aborts one for the rest, then commits
them again. A read_committed reader of `orders-out` sees each of the ten once; a read_uncommitted one also sees the
five aborted copies. The group's committed offsets end at the input's end, written by the transactions alone.
"""

import sys
import time

try:
    from confluent_kafka import Consumer, Producer, TopicPartition
except ModuleNotFoundError:  # the client libraries are the package's [clients] extra, not dependencies
    sys.exit(f"{sys.argv[0]}: confluent-kafka is not installed: pip install '.[clients]' in the kafka-group-broker "
             "checkout (the three client libraries), or pip install confluent-kafka")

BOOTSTRAP = sys.argv[1] if len(sys.argv) > 1 else "localhost:9092"
SOURCE, SINK, GROUP = "orders", "orders-out", "orders-eos"


def read_all(isolation: str, expected: int) -> list[bytes]:
    """Every record of SINK as a reader with this isolation level sees it (within 30 s)."""
    reader = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "reader", "isolation.level": isolation})
    reader.assign([TopicPartition(SINK, partition, 0) for partition in range(3)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        record = reader.poll(0.5)
        if record is not None and not record.error():
            values.append(record.value())
            if len(values) == expected:  # linger a second: a duplicate would show up now
                deadline = min(deadline, time.monotonic() + 1)
    reader.close()
    return values


source = Producer({"bootstrap.servers": BOOTSTRAP})
for i in range(10):
    source.produce(SOURCE, key=f"order-{i}".encode(), value=f"order {i}".encode())
assert source.flush(30) == 0, "records left undelivered"

consumer = Consumer(
    {"bootstrap.servers": BOOTSTRAP, "group.id": GROUP, "auto.offset.reset": "earliest",
     "enable.auto.commit": False, "isolation.level": "read_committed"}
)
consumer.subscribe([SOURCE])
producer = Producer({"bootstrap.servers": BOOTSTRAP, "transactional.id": "orders-copier"})
producer.init_transactions()  # fences any older instance with this transactional.id

batch = []
while len(batch) < 10:
    record = consumer.poll(1.0)
    if record is not None and not record.error():
        batch.append(record)


def copy(records: list, commit: bool) -> None:
    producer.begin_transaction()
    for record in records:
        producer.produce(SINK, key=record.key(), value=record.value().replace(b"order", b"paid"))
    ends = [TopicPartition(r.topic(), r.partition(), r.offset() + 1) for r in records]
    producer.send_offsets_to_transaction(ends, consumer.consumer_group_metadata())
    producer.flush()  # librdkafka drops unsent records on abort: send them, so the abort has something to hide
    if commit:
        producer.commit_transaction()
    else:
        producer.abort_transaction()
    print(("committed" if commit else "aborted"), len(records), "records")


copy(batch[:5], commit=True)
copy(batch[5:], commit=False)
copy(batch[5:], commit=True)
offsets = consumer.committed([TopicPartition(SOURCE, partition) for partition in range(3)], timeout=10)
print("the group committed", sum(tp.offset for tp in offsets), "of 10 input offsets")
consumer.close()

committed = read_all("read_committed", 10)
uncommitted = read_all("read_uncommitted", 15)
print("read_committed sees", len(committed), "records,", len(set(committed)), "distinct")
print("read_uncommitted sees", len(uncommitted), "records")
