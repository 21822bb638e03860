"""Transaction coordinator settings, with Kafka's names and defaults (transactions spec section 7)."""

from __future__ import annotations

from dataclasses import dataclass

from broker.setting import Setting


@dataclass(frozen=True, slots=True)
class TxnConfig:
    """A bare ``TxnConfig()`` behaves as Kafka's ``TransactionConfig`` defaults do. The settings among its fields
    are declared here, once (``Setting``, broker/setting.py: default, name, help, Kafka's name), and collected by
    broker/config/settings.py."""

    transaction_max_timeout_ms: int = Setting(
        "transaction_max_timeout_ms", 900_000, int,
        "highest transaction.timeout.ms a transactional producer may ask for", kafka="transaction.max.timeout.ms",
    ).field()
    transactional_id_expiration_ms: int = Setting(  # 7 days
        "transactional_id_expiration_ms", 604_800_000, int,
        "how long an idle transactional id is kept before it is forgotten", kafka="transactional.id.expiration.ms",
    ).field()
    # The timeout scan (section 3.9).
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = Setting(
        "transaction_abort_timed_out_transaction_cleanup_interval_ms", 10_000, int,
        "how often transactions open past their timeout are aborted",
        kafka="transaction.abort.timed.out.transaction.cleanup.interval.ms",
    ).field()
    # The id expiration scan (section 3.9).
    transaction_remove_expired_transaction_cleanup_interval_ms: int = Setting(
        "transaction_remove_expired_transaction_cleanup_interval_ms", 3_600_000, int,
        "how often expired transactional ids are removed",
        kafka="transaction.remove.expired.transaction.cleanup.interval.ms",
    ).field()
    # Kafka settings, but fixed here and no options (transactions spec section 7).
    transaction_state_log_num_partitions: int = 50  # transaction.state.log.num.partitions
    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions: the group's partition in the txn
    # Not a Kafka setting: a test knob (section 3.8 step 4) that holds a transaction in Prepare* this long before
    # its markers are written, so clients' CONCURRENT_TRANSACTIONS retries can be exercised. 0 = atomic.
    completion_delay_ms: int = 0

    def __post_init__(self) -> None:
        if self.transaction_max_timeout_ms < 1:
            raise ValueError("transaction.max.timeout.ms must be at least 1")
        if self.transactional_id_expiration_ms < 1:
            raise ValueError("transactional.id.expiration.ms must be at least 1")
        if (
            min(
                self.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                self.transaction_remove_expired_transaction_cleanup_interval_ms,
            )
            < 1
        ):
            raise ValueError("the transaction cleanup intervals must be at least 1")
        if min(self.transaction_state_log_num_partitions, self.offsets_topic_num_partitions) < 1:
            raise ValueError("the internal topics need at least one partition")
        if self.completion_delay_ms < 0:
            raise ValueError("completion_delay_ms must not be negative")
