"""The offset-reset plan's parsers (broker/control/offset_reset.py): Java's ``Duration.parse`` and Kafka's
``Utils.getDateTime``, as ``--by-duration`` and ``--to-datetime`` read them; the planner itself is tested through
the CLI (tests/cli/test_offsets_cli.py) and the control API (test_offsets_api.py)."""

from __future__ import annotations

import pytest

from broker.control.offset_reset import ResetUsageError, parse_datetime, parse_duration, parse_topic_arg


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("PT1H30M", 5_400_000),
        ("P1D", 86_400_000),
        ("P1DT2H", 93_600_000),
        ("PT0.5S", 500),
        ("PT-0.5S", -500),
        ("-PT5M", -300_000),
        ("pt10s", 10_000),
        ("PT1M-10S", 50_000),
    ],
)
def test_durations_parse_as_java_does(text: str, millis: int) -> None:
    assert parse_duration(text) == millis


@pytest.mark.parametrize("text", ["", "P", "PT", "1h", "PT1H30", "P1H", "PTS", "P1DT"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ResetUsageError, match="Text cannot be parsed to a Duration"):
        parse_duration(text)


def test_datetimes_are_utc_unless_a_zone_is_given() -> None:
    assert parse_datetime("1970-01-01T00:00:01.500") == 1500
    assert parse_datetime("1970-01-01T01:00:00+01:00") == 0
    assert parse_datetime("1970-01-01T00:00:00Z") == 0
    for bad in ("1970-01-01", "yesterdayTnoon"):
        with pytest.raises(ResetUsageError):
            parse_datetime(bad)


def test_topic_arguments() -> None:
    assert parse_topic_arg("orders") == ("orders", None)
    assert parse_topic_arg("orders:0,2") == ("orders", [0, 2])
    for bad in ("orders:", "orders:a", ":1", "a:1:2", ""):
        with pytest.raises(ResetUsageError):
            parse_topic_arg(bad)
