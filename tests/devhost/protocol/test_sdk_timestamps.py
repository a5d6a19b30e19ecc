"""The SDK's history timestamps parsed through devhost's fast path are the datetimes dateutil itself returns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from dateutil.parser import parse as dateutil_parse

from devhost.invoke import fast_dateutil_parse
from devhost.protocol.timefmt import dotnet_iso, dotnet_roundtrip_o, parse_iso

FAST = fast_dateutil_parse(dateutil_parse)


def _same(text: str) -> None:
    expected, got = dateutil_parse(text), FAST(text)
    assert got == expected and got.tzinfo == expected.tzinfo and type(got.tzinfo) is type(expected.tzinfo)
    assert got.utcoffset() == expected.utcoffset() and got.isoformat() == expected.isoformat()


def test_every_timestamp_devhost_writes_parses_as_dateutil_parses_it() -> None:
    start = datetime(2026, 11, 25, 21, 25, tzinfo=UTC)
    for step in range(0, 2_000_000, 997):  # whole seconds, and fractions of 1-6 digits after trimming zeros
        moment = start + timedelta(microseconds=step * 37)
        _same(dotnet_iso(moment))
        _same(dotnet_roundtrip_o(moment))  # 7 digits: truncated to microseconds, as dateutil does


@pytest.mark.parametrize("text", [
    "2026-11-25T21:25:00Z", "2026-11-25T21:25:00.1234567Z", "2026-11-25T21:25:00.9999999Z",
    "2024-02-29T23:59:59.000001Z", "0001-01-01T00:00:00Z",
])
def test_edge_values(text: str) -> None:
    _same(text)


@pytest.mark.parametrize("text", [
    "2026-11-25T21:25:00+02:00", "2026-11-25T21:25:00.5+00:00", "2026-11-25 21:25:00Z", "2026-11-25T21:25:00",
    "2026-11-25T21:25:00.12345678Z",
])
def test_other_forms_go_to_dateutil(text: str) -> None:
    _same(text)


@pytest.mark.parametrize("text", ["2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-11-25T24:00:00Z"])
def test_values_dateutil_refuses_are_refused_the_same_way(text: str) -> None:
    with pytest.raises(ValueError) as expected:
        dateutil_parse(text)
    with pytest.raises(type(expected.value)):
        FAST(text)


@pytest.mark.parametrize(("moment", "text"), [
    (datetime(2030, 1, 1, 0, 0, 5, 120000, tzinfo=UTC), "2030-01-01T00:00:05.12Z"),
    (datetime(2030, 1, 1, 0, 0, 5, tzinfo=UTC), "2030-01-01T00:00:05Z"),
    (datetime(2030, 1, 1, 0, 0, 5, 1), "2030-01-01T00:00:05.000001Z"),  # naive: taken as UTC
    (datetime(2030, 1, 1, 2, 0, 5, 999999, tzinfo=timezone(timedelta(hours=2))), "2030-01-01T00:00:05.999999Z"),
    (datetime(1, 1, 1, tzinfo=UTC), "0001-01-01T00:00:00Z"),  # DateTime's round-trip form pads the year
])
def test_dotnet_iso_is_the_round_trip_form_newtonsoft_writes(moment: datetime, text: str) -> None:
    assert dotnet_iso(moment) == text


def _parse_by_hand(text: str) -> datetime:
    """parse_iso as it was before it let `datetime.fromisoformat` read the text itself."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    main, _, rest = value.partition(".")
    if rest:
        digits = ""
        while len(digits) < len(rest) and rest[len(digits)].isdigit():
            digits += rest[len(digits)]
        value = f"{main}.{(digits + '000000')[:6]}{rest[len(digits):]}"
    parsed = datetime.fromisoformat(value)
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


@pytest.mark.parametrize("text", [
    "2026-11-25T21:25:00Z", "2026-11-25T21:25:00.1Z", "2026-11-25T21:25:00.1234567Z", "2026-11-25T21:25:00.123Z",
    "2026-11-25T21:25:00.9999999Z", "2026-11-25T21:25:00.000000Z", "2026-11-25T21:25:00+02:00",
    "2026-11-25T21:25:00.5-03:30", "2026-11-25T21:25:00", "2026-11-25 21:25:00Z", " 2026-11-25T21:25:00Z ",
    "2026-11-25T21:25:00z", "0001-01-01T00:00:00Z",
])
def test_parse_iso_reads_what_it_read_by_hand(text: str) -> None:
    parsed = parse_iso(text)
    assert parsed == _parse_by_hand(text) and parsed.tzinfo == UTC
