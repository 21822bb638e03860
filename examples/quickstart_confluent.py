"""Produce ten keyed records, consume them in a group, then add a second member and watch the rebalance.

    python examples/quickstart_confluent.py [BOOTSTRAP]   (default localhost:9092)
"""

import sys

try:
    from confluent_kafka import Consumer, Message, Producer
except ModuleNotFoundError:  # the client libraries are the package's [clients] extra, not dependencies
    sys.exit(f"{sys.argv[0]}: confluent-kafka is not installed: pip install '.[clients]' in the kafka-group-broker "
             "checkout (the three client libraries), or pip install confluent-kafka")

BOOTSTRAP = sys.argv[1] if len(sys.argv) > 1 else "localhost:9092"
TOPIC = "quickstart"
GROUP = "quickstart-confluent"


def consumer() -> Consumer:
    member = Consumer(
        {
            "bootstrap.servers": BOOTSTRAP,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    member.subscribe([TOPIC])
    return member


def owned(member: Consumer) -> list[int]:
    return sorted(tp.partition for tp in member.assignment())


def split_between(first: list[int], second: list[int]) -> bool:
    """Both members hold partitions and none twice: the rebalance has reached both of them."""
    return bool(first) and bool(second) and not set(first) & set(second)


producer = Producer({"bootstrap.servers": BOOTSTRAP, "enable.idempotence": True})
ours: set[tuple[int, int]] = set()  # (partition, offset) of this run's records; the topic may hold older ones


def delivered(error: object, message: Message) -> None:
    assert error is None, error
    ours.add((message.partition(), message.offset()))


for i in range(10):
    producer.produce(TOPIC, key=f"key-{i}".encode(), value=f"record {i}".encode(), on_delivery=delivered)
assert producer.flush(30) == 0, "records left undelivered"
print("produced 10 records")

first = consumer()
earlier = 0
while ours:
    record = first.poll(1.0)
    if record is None or record.error():
        continue
    if (record.partition(), record.offset()) not in ours:
        earlier += 1
        continue
    ours.discard((record.partition(), record.offset()))
    print(f"consumed {record.topic()}-{record.partition()}@{record.offset()}: {record.value()!r}")
if earlier:  # the topic keeps what earlier runs produced; a new group reads it from the start
    print(f"skipped {earlier} records of earlier runs")
first.commit(asynchronous=False)
print("first member owns", owned(first))

second = consumer()  # joining starts a rebalance; the broker logs it
while not split_between(owned(first), owned(second)):
    first.poll(0.5)
    second.poll(0.5)
print("after the rebalance: first owns", owned(first), "second owns", owned(second))
second.close()
first.close()
