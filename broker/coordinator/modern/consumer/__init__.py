"""KIP-848 consumer groups (the "consumer" rebalance protocol), on the shared ``modern/`` machinery.

Kafka's ``group-coordinator`` module keeps ``modern/consumer/ConsumerGroup`` beside ``modern/share/`` over what
both share (``modern/`` target assignment, assignors, member state); so does this package. Section numbers refer to
``docs/spec/consumer-groups.md``.
"""
