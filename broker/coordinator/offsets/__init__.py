"""Committed offsets (Kafka's ``OffsetMetadataManager``): ``manager.py`` (commit, fetch, delete, retention),
``transactional.py`` (TxnOffsetCommit's pending offsets). The offsets themselves: ``offset_store.py``."""
