"""Exactly-once consume-transform-produce: copy `orders` to `orders-out` in transactions that carry the group's offsets.

    python examples/exactly_once_confluent.py [BOOTSTRAP]   (default localhost:9092)

Ten records go in; the loop commits one transaction for the first five and aborts one for the rest, then commits
them again. A read_committed reader of `orders-out` sees each of the ten once; a read_uncommitted one also sees the
five aborted copies. The group's committed offsets end at the input's end, written by the transactions alone.
Any broker will do (`group-broker serve --topic orders:6`, or none given: both topics are auto-created): the
partitions are read from the broker, and only this run's records are counted, so it can run again.
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


def partitions(client: Consumer, topic: str) -> list[int]:
    """The topic's partitions as the broker reports them (none if it does not exist yet)."""
    topics = client.list_topics(topic, timeout=10).topics
    return sorted(topics[topic].partitions) if topic in topics and topics[topic].error is None else []


def read_all(isolation: str, expected: int, starts: dict[int, int]) -> list[bytes]:
    """Every record of SINK from `starts` on (this run's) as a reader with this isolation level sees it (30 s)."""
    reader = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "reader", "isolation.level": isolation})
    reader.assign([TopicPartition(SINK, p, starts.get(p, 0)) for p in partitions(reader, SINK)])
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


# Where SINK ends before this run (an earlier run's output stays in the log): the readers start there.
probe = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "reader"})
sink_starts = {p: probe.get_watermark_offsets(TopicPartition(SINK, p), timeout=10)[1] for p in partitions(probe, SINK)}
probe.close()

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
inputs = [TopicPartition(SOURCE, partition) for partition in partitions(consumer, SOURCE)]
offsets = {tp.partition: tp.offset for tp in consumer.committed(inputs, timeout=10)}
past = sum(record.offset() < offsets[record.partition()] for record in batch)  # inputs the group will not read again
print("the group committed", past, "of 10 input offsets")
consumer.close()

committed = read_all("read_committed", 10, sink_starts)
uncommitted = read_all("read_uncommitted", 15, sink_starts)
print("read_committed sees", len(committed), "records,", len(set(committed)), "distinct")
print("read_uncommitted sees", len(uncommitted), "records")
