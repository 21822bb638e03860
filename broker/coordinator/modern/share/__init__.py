"""KIP-932 share groups ("Queues for Kafka"), ``docs/spec/share-groups.md``: the group and member model and the
heartbeat (the group coordinator's side, Kafka's ``modern/share/``), and the share-partitions with their record
states, acquisition locks and share sessions (the partition leader's side, Kafka's ``SharePartition`` and
``SharePartitionManager``), joined by ``service.py``."""
