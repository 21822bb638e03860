"""The transaction coordinator's settings (transactions spec section 7), declared apart from settings.py.

settings.py turns each row into an ``Option`` filling ``txn.<field>`` of ``TxnConfig`` (whose defaults are
Kafka's); the rows live here so that settings.py stays under the 600-line limit. Plain rows, not ``Option``s:
this module must not import settings.py, which imports it.
"""

from __future__ import annotations

#: (our name, help, Kafka's name); each fills ``txn.<our name>``.
TXN_SETTINGS: tuple[tuple[str, str, str], ...] = (
    (
        "transaction_max_timeout_ms",
        "highest transaction.timeout.ms a transactional producer may ask for",
        "transaction.max.timeout.ms",
    ),
    (
        "transactional_id_expiration_ms",
        "how long an idle transactional id is kept before it is forgotten",
        "transactional.id.expiration.ms",
    ),
    (
        "transaction_abort_timed_out_transaction_cleanup_interval_ms",
        "how often transactions open past their timeout are aborted",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    ),
    (
        "transaction_remove_expired_transaction_cleanup_interval_ms",
        "how often expired transactional ids are removed",
        "transaction.remove.expired.transaction.cleanup.interval.ms",
    ),
)
