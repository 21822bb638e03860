"""An offset reset planned as ``kafka-consumer-groups.sh --reset-offsets`` plans it (Kafka's ConsumerGroupCommand:
``resetOffsets``, ``getPartitionsToReset``, ``prepareOffsetsToReset``, ``checkOffsetsRange``).

One planner for the three ways in: the CLI (``broker/cli/offsets_commands.py``, over the Kafka protocol), the control
API (``broker/control/offsets_api.py``, in the broker's loop) and the pytest plugin (through the control API). Each
hands it an ``OffsetSource``: where the group's committed offsets, the topics' partitions and the logs' offsets come
from. Standard library only, no I/O of its own.

Kafka's rules kept here: ``--all-topics`` is the partitions the group has committed offsets for; ``--to-offset`` and
``--shift-by`` are clamped to [earliest, latest] with a warning naming the partition; ``--to-datetime`` and
``--by-duration`` ask ListOffsets by timestamp and fall back to the latest offset where no record is that late;
``--shift-by`` refuses a partition without a committed offset; only an Empty or Dead group is reset.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol

TopicPartition = tuple[str, int]

EARLIEST = -2  # ListOffsets' special timestamps
LATEST = -1
#: The states in which Kafka's tool resets a group (ConsumerGroupCommand.resetOffsets).
INACTIVE_STATES = ("Empty", "Dead")

TargetKind = Literal["earliest", "latest", "offset", "shift", "datetime", "duration"]


class ResetUsageError(ValueError):
    """The request cannot be planned as given (Kafka's tool prints its usage): the CLI exits 2, the API says 400."""


class GroupNotInactive(Exception):
    """The group has members: Kafka's tool refuses, with this message."""

    def __init__(self, group: str, state: str) -> None:
        super().__init__(
            f"Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}."
        )
        self.group = group
        self.state = state


class UnknownTopic(Exception):
    """A ``--topic`` without partitions names no topic (Kafka's describeTopics: UNKNOWN_TOPIC_OR_PARTITION)."""

    def __init__(self, topic: str) -> None:
        super().__init__(
            f"UNKNOWN_TOPIC_OR_PARTITION: topic '{topic}': This server does not host this topic-partition."
        )
        self.topic = topic


class OffsetSource(Protocol):
    """What the planner reads; the CLI's is the Kafka protocol, the control API's the broker itself."""

    def partitions_of(self, topics: Sequence[str]) -> dict[str, list[int]]:
        """Every partition of these topics; raises ``UnknownTopic``."""
        ...

    def committed(self, group: str) -> dict[TopicPartition, int]:
        """The group's committed offsets (OffsetFetch for all topics)."""
        ...

    def log_offsets(self, partitions: Sequence[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        """ListOffsets: ``EARLIEST``, ``LATEST`` or a timestamp in ms; -1 where none, absent where it failed."""
        ...


@dataclass(frozen=True, slots=True)
class Target:
    """One reset scenario: ``value`` is the offset, the shift, or the timestamp in ms (a duration is resolved to
    "now minus the duration" when parsed)."""

    kind: TargetKind
    value: int = 0


@dataclass(slots=True)
class Plan:
    group: str
    offsets: dict[TopicPartition, int]
    warnings: list[str] = field(default_factory=list)

    def rows(self) -> list[dict[str, object]]:
        return [
            {"group": self.group, "topic": topic, "partition": partition, "new_offset": offset}
            for (topic, partition), offset in self.offsets.items()
        ]


def shown(partition: TopicPartition) -> str:
    """Kafka's ``TopicPartition.toString``."""
    return f"{partition[0]}-{partition[1]}"


def check_inactive(group: str, state: str) -> None:
    if state not in INACTIVE_STATES:
        raise GroupNotInactive(group, state)


# -- parsing ------------------------------------------------------------------------------------------------


def parse_topic_arg(argument: str) -> tuple[str, list[int] | None]:
    """``T`` (every partition) or ``T:P[,P...]``, with Kafka's messages (parseTopicsWithPartitions)."""
    if ":" not in argument:
        if not argument:
            raise ResetUsageError("Invalid topic arg '', expected a topic name")
        return argument, None
    parts = argument.split(":")
    if len(parts) != 2 or not parts[0]:
        raise ResetUsageError(f"Invalid topic arg '{argument}', expected topic name and partitions")
    partitions = []
    for text in parts[1].split(","):
        if not re.fullmatch(r"[0-9]{1,9}", text.strip()):
            raise ResetUsageError(f"Invalid partition '{text}' specified in topic arg '{argument}'")
        partitions.append(int(text))
    return parts[0], partitions


def parse_datetime(text: str) -> int:
    """Kafka's ``Utils.getDateTime``: ISO-8601 with a ``T``, UTC when no zone is given; epoch milliseconds."""
    if "T" not in text:
        raise ResetUsageError(
            f"Error parsing timestamp '{text}'. It does not contain a 'T' according to ISO8601 format"
        )
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ResetUsageError(f"Error parsing timestamp '{text}': expected e.g. 2026-12-02T07:00:00.000") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?(?:T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)


def parse_duration(text: str) -> int:
    """Java's ``Duration.parse`` (``PnDTnHnMn.nS``, e.g. ``PT1H30M``, ``P1D``, ``-PT5M``) in milliseconds."""
    found = _DURATION.fullmatch(text)
    t_at = text.upper().find("T")
    if found is None or not any(found.group(i) for i in (2, 3, 4, 5)) or (t_at >= 0 and t_at == len(text) - 1):
        raise ResetUsageError(f"Text cannot be parsed to a Duration: {text!r} (expected e.g. PT1H30M or P1DT12H)")
    sign, days, hours, minutes, seconds, fraction = found.groups()
    total = (int(days or 0) * 86_400 + int(hours or 0) * 3_600 + int(minutes or 0) * 60 + int(seconds or 0)) * 1000
    if fraction:
        millis = int((fraction + "00")[:3])
        total += -millis if (seconds or "").startswith("-") else millis
    return -total if sign == "-" else total


def target_from(
    *,
    to_earliest: bool = False,
    to_latest: bool = False,
    to_offset: int | None = None,
    shift_by: int | None = None,
    to_datetime: str | None = None,
    by_duration: str | None = None,
    now_ms: int,
) -> Target:
    """Exactly one scenario (Kafka: "Option --reset-offsets requires one of the following scenarios")."""
    given: list[Target] = []
    if to_earliest:
        given.append(Target("earliest"))
    if to_latest:
        given.append(Target("latest"))
    if to_offset is not None:
        given.append(Target("offset", to_offset))
    if shift_by is not None:
        given.append(Target("shift", shift_by))
    if to_datetime is not None:
        given.append(Target("datetime", parse_datetime(to_datetime)))
    if by_duration is not None:
        given.append(Target("duration", now_ms - parse_duration(by_duration)))
    if len(given) != 1:
        raise ResetUsageError(
            "exactly one reset scenario is needed: to-earliest, to-latest, to-offset, shift-by, to-datetime or "
            f"by-duration ({len(given)} given)"
        )
    return given[0]


# -- planning ---------------------------------------------------------------------------------------------


def partitions_to_reset(
    source: OffsetSource, group: str, topics: Sequence[str], all_topics: bool
) -> list[TopicPartition]:
    """getPartitionsToReset: the committed partitions for ``all_topics``; else the named ones, a topic without
    partitions standing for all of its own."""
    if all_topics == bool(topics):
        raise ResetUsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    if all_topics:
        return sorted(source.committed(group))
    named: list[TopicPartition] = []
    whole: list[str] = []
    for argument in topics:
        topic, partitions = parse_topic_arg(argument)
        if partitions is None:
            whole.append(topic)
        else:
            named.extend((topic, p) for p in partitions)
    if whole:
        for topic, partitions in source.partitions_of(whole).items():
            named.extend((topic, p) for p in partitions)
    return sorted(dict.fromkeys(named))


def plan_reset(source: OffsetSource, group: str, partitions: Sequence[TopicPartition], target: Target) -> Plan:
    """prepareOffsetsToReset for one scenario."""
    plan = Plan(group, {})
    kind = target.kind
    if kind in ("earliest", "latest"):
        found = source.log_offsets(partitions, EARLIEST if kind == "earliest" else LATEST)
        which = "starting" if kind == "earliest" else "ending"
        for partition in partitions:
            offset = found.get(partition, -1)
            if offset < 0:
                raise ResetUsageError(f"Error getting {which} offset of topic partition: {shown(partition)}")
            plan.offsets[partition] = offset
    elif kind == "offset":
        plan.offsets = _in_range(source, {p: target.value for p in partitions}, plan.warnings)
    elif kind == "shift":
        current = source.committed(group)
        requested = {}
        for partition in partitions:
            if partition not in current:
                raise ResetUsageError(
                    f"Cannot shift offset for partition {shown(partition)} since there is no current committed offset"
                )
            requested[partition] = current[partition] + target.value
        plan.offsets = _in_range(source, requested, plan.warnings)
    else:  # datetime, duration: ListOffsets by timestamp, the latest offset where no record is that late
        found = source.log_offsets(partitions, target.value)
        empty = [p for p in partitions if found.get(p, -1) < 0]
        for topic, index in empty:
            plan.warnings.append(f"Warn: Partition {index} from topic {topic} is empty. Falling back to latest "
                                 "known offset.")
        found.update(source.log_offsets(empty, LATEST) if empty else {})
        for partition in partitions:
            offset = found.get(partition, -1)
            if offset < 0:
                raise ResetUsageError(f"Error getting offset by timestamp of topic partition: {shown(partition)}")
            plan.offsets[partition] = offset
    return plan


def _in_range(
    source: OffsetSource, requested: Mapping[TopicPartition, int], warnings: list[str]
) -> dict[TopicPartition, int]:
    """checkOffsetsRange: above the latest offset -> the latest, below the earliest -> the earliest, each said."""
    partitions = list(requested)
    starts = source.log_offsets(partitions, EARLIEST)
    ends = source.log_offsets(partitions, LATEST)
    checked = {}
    for partition, offset in requested.items():
        end, start = ends.get(partition, -1), starts.get(partition, -1)
        if end < 0:
            raise ResetUsageError(f"Unexpected non-existing offset value for topic partition {shown(partition)}")
        if offset > end:
            warnings.append(f"New offset ({offset}) is higher than latest offset for topic partition "
                            f"{shown(partition)}. Value will be set to {end}")
            offset = end
        elif start >= 0 and offset < start:
            warnings.append(f"New offset ({offset}) is lower than earliest offset for topic partition "
                            f"{shown(partition)}. Value will be set to {start}")
            offset = start
        checked[partition] = offset
    return checked


# -- Kafka's output -------------------------------------------------------------------------------------


def plan_table(plans: Iterable[Plan]) -> str:
    """printOffsetsToReset's table (``%-30s %-30s %-10s %-15s``, trailing blanks cut), a blank line first."""
    rows = [(plan.group, topic, str(partition), str(offset))
            for plan in plans for (topic, partition), offset in plan.offsets.items()]
    if not rows:
        return "\n"
    lines = [f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}".rstrip()]
    lines += [f"{g:<30} {t:<30} {p:<10} {o:<15}".rstrip() for g, t, p, o in rows]
    return "\n" + "\n".join(lines) + "\n"


def delete_offsets_table(results: Mapping[TopicPartition, str | None]) -> str:
    """deleteOffsets' table (``%-30s %-15s %-15s``): "Successful" or the partition's error."""
    lines = [f"{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}".rstrip()]
    for (topic, partition), error in sorted(results.items()):
        status = "Successful" if error is None else f"Error: :{error}"
        where = str(partition) if partition >= 0 else "Not Provided"  # a topic that could not be described
        lines.append(f"{topic:<30} {where:<15} {status:<15}".rstrip())
    return "\n" + "\n".join(lines) + "\n"


#: The messages of Kafka's exceptions for the errors these commands show (``Errors``' default messages).
KAFKA_MESSAGES = {
    "NON_EMPTY_GROUP": "The group is not empty.",
    "GROUP_ID_NOT_FOUND": "The group id does not exist.",
    "INVALID_GROUP_ID": "The configured groupId is invalid.",
    "GROUP_SUBSCRIBED_TO_TOPIC": "The consumer group is actively subscribed to the topic",
    "UNKNOWN_TOPIC_OR_PARTITION": "This server does not host this topic-partition.",
    "COORDINATOR_NOT_AVAILABLE": "The coordinator is not available.",
    "COORDINATOR_LOAD_IN_PROGRESS": "The coordinator is loading and hence can't process requests.",
    "UNKNOWN_MEMBER_ID": "The coordinator is not aware of this member.",
    "ILLEGAL_GENERATION": "Specified group generation id is not valid.",
    "STALE_MEMBER_EPOCH": "The member epoch is stale.",
    "OFFSET_METADATA_TOO_LARGE": "The metadata field of the offset request was too large.",
}


def kafka_error(name: str) -> str:
    """``NAME: message``, as these commands show a refused request."""
    message = KAFKA_MESSAGES.get(name)
    return f"{name}: {message}" if message else name
