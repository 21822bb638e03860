"""KIP-848 consumer groups ("consumer" rebalance protocol), beside ``classic/``.

Kafka's ``modern/consumer/`` package in Python: the group and member model (``group.py``, ``member.py``), the
member reconciliation state machine (``reconcile.py``, Kafka's ``CurrentAssignmentBuilder``), the server-side
assignors (``assignors/``), and the ConsumerGroupHeartbeat handler (``heartbeat.py``, the consumer-group half of
``GroupMetadataManager``). Deterministic like the classic package: no I/O, time from the injected clock, delayed
work in the purgatory. Section numbers refer to ``docs/spec/consumer-groups.md``.
"""
