"""What a ShareFetch or ShareAcknowledge acknowledges of one share-partition: its batches, their types and Kafka's
checks of them (KafkaApis.validateAcknowledgementBatches, section 8.4 of ``docs/spec/share-groups.md``).

Apart from ``partition.py`` (which applies them) so that the share-partition's state stays within one module's size;
``partition.py`` re-exports every name.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["AckBatch", "AcknowledgeType", "validate_batches"]


class AcknowledgeType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # ShareFetch/ShareAcknowledge v2 with IsRenewAck (KIP-1222)


@dataclass(frozen=True, slots=True)
class AckBatch:
    first_offset: int
    last_offset: int
    types: tuple[int, ...]


def validate_batches(batches: Sequence[AckBatch], renew_allowed: bool) -> str | None:
    """KafkaApis.validateAcknowledgementBatches (section 8.4): why the partition's batches are INVALID_REQUEST."""
    previous_last = -1
    highest = AcknowledgeType.RENEW if renew_allowed else AcknowledgeType.REJECT
    for batch in batches:
        if batch.first_offset > batch.last_offset:
            return "First offset of acknowledgement batch is greater than its last offset"
        if batch.first_offset <= previous_last:
            return "Acknowledgement batches are not in ascending order or overlap"
        if not batch.types:
            return "Acknowledgement types are empty"
        if len(batch.types) > 1 and len(batch.types) != batch.last_offset - batch.first_offset + 1:
            return "Acknowledgement types count does not match the number of records in the batch"
        for kind in batch.types:
            if not 0 <= kind <= highest:
                return f"Invalid acknowledge type: {kind}"
        previous_last = batch.last_offset
    return None
