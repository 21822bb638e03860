"""Produce ten keyed records, consume them in a group, then add a second member and watch the rebalance.

    python examples/quickstart_aiokafka.py [BOOTSTRAP]   (default localhost:9092)
"""

import asyncio
import sys

try:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
except ModuleNotFoundError:  # the client libraries are the package's [clients] extra, not dependencies
    sys.exit(f"{sys.argv[0]}: aiokafka is not installed: pip install '.[clients]' in the kafka-group-broker "
             "checkout (the three client libraries), or pip install aiokafka")

BOOTSTRAP = sys.argv[1] if len(sys.argv) > 1 else "localhost:9092"
TOPIC = "quickstart"
GROUP = "quickstart-aiokafka"


def consumer() -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        TOPIC, bootstrap_servers=BOOTSTRAP, group_id=GROUP, auto_offset_reset="earliest", enable_auto_commit=False
    )


def owned(member: AIOKafkaConsumer) -> list[int]:
    return sorted(tp.partition for tp in member.assignment())


def split_between(first: list[int], second: list[int]) -> bool:
    """Both members hold partitions and none twice: the rebalance has reached both of them."""
    return bool(first) and bool(second) and not set(first) & set(second)


async def main() -> None:
    producer = AIOKafkaProducer(bootstrap_servers=BOOTSTRAP, enable_idempotence=True)
    await producer.start()
    ours: set[tuple[int, int]] = set()  # (partition, offset) of this run's records; the topic may hold older ones
    for i in range(10):
        sent = await producer.send_and_wait(TOPIC, key=f"key-{i}".encode(), value=f"record {i}".encode())
        ours.add((sent.partition, sent.offset))
    await producer.stop()
    print("produced 10 records")

    first = consumer()
    await first.start()
    earlier = 0
    while ours:
        for records in (await first.getmany(timeout_ms=1000)).values():
            for record in records:
                if (record.partition, record.offset) not in ours:
                    earlier += 1
                    continue
                ours.discard((record.partition, record.offset))
                print(f"consumed {record.topic}-{record.partition}@{record.offset}: {record.value!r}")
    if earlier:  # the topic keeps what earlier runs produced; a new group reads it from the start
        print(f"skipped {earlier} records of earlier runs")
    await first.commit()
    print("first member owns", owned(first))

    second = consumer()
    await second.start()  # joining starts a rebalance; the broker logs it
    while not split_between(owned(first), owned(second)):
        await asyncio.gather(first.getmany(timeout_ms=200), second.getmany(timeout_ms=200))
    print("after the rebalance: first owns", owned(first), "second owns", owned(second))
    await second.stop()
    await first.stop()


asyncio.run(main())
