"""The transaction coordinator (Kafka's ``TransactionCoordinator``), as a deterministic state machine.

``docs/spec/transactions.md`` section 3: per transactional id state, InitProducerId, adding partitions,
EndTxn (TV1 and TV2), completing a transaction on one node and the timers. No I/O, time from an injected clock,
timers through the purgatory. Completing a transaction hands the control markers to write and the groups whose
pending offsets end to an injected callback; the API layer applies them to storage and the group coordinator.
"""
