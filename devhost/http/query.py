"""Query-string parsing with the .NET rules of HttpApiHandler (NameValueCollection, bool/int/DateTime.TryParse)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TypeVar

from multidict import MultiMapping

from devhost.protocol.timefmt import parse_iso, to_utc

_INT = re.compile(r"[+-]?[0-9]+")
_TIMESPAN_MAX_SECONDS = (2**63 - 1) / 10_000_000  # TimeSpan.MaxValue (ticks of 100 ns)


class ArgumentError(ValueError):
    """A .NET ArgumentException, which the handlers answer with 400."""


class InvalidTimeSpanError(ArgumentError):
    """TimeSpan.FromSeconds(NaN)'s ArgumentException."""
N = TypeVar("N", int, float)


class QueryArgs:
    """Case-insensitive names; several values of one name read as one comma-joined string, as in .NET."""

    def __init__(self, query: MultiMapping[str]) -> None:
        self._values: dict[str, list[str]] = {}
        for name, value in query.items():
            self._values.setdefault(name.lower(), []).append(value)

    def get(self, name: str) -> str | None:
        values = self._values.get(name.lower())
        return ",".join(values) if values else None

    def first(self, name: str) -> str | None:
        """The first value of `name` in any case, in URL order (ASP.NET Core's `StringValues.First()`)."""
        values = self._values.get(name.lower())
        return values[0] if values else None

    def get_bool(self, name: str) -> bool | None:
        value = (self.get(name) or "").strip().lower()
        return {"true": True, "false": False}.get(value)

    def get_int(self, name: str) -> int | None:
        return self._get_number(name, int)

    def get_float(self, name: str) -> float | None:
        return self._get_number(name, float)

    def _get_number(self, name: str, parse: Callable[[str], N]) -> N | None:
        try:
            return parse((self.get(name) or "").strip())
        except ValueError:
            return None

    def get_timespan_seconds(self, name: str) -> float | None:
        """TryGetTimeSpanQueryParameterValue: double.TryParse, then TimeSpan.FromSeconds, which throws for NaN (an
        ArgumentException: the handlers' 400) and for a duration past TimeSpan's range (an OverflowException: 500).
        Unchecked, a NaN timeout became a NaN loop timer (the wait never answered and the loop's timer heap lost its
        order) and an infinite one a wait that never ends."""
        seconds = self.get_float(name)
        if seconds is None:
            return None
        if math.isnan(seconds):
            raise InvalidTimeSpanError("TimeSpan does not accept floating point Not-a-Number values.")
        if abs(seconds) >= _TIMESPAN_MAX_SECONDS:
            raise OverflowError("TimeSpan overflowed because the duration is too long.")
        return seconds

    def get_datetime(self, name: str) -> datetime | None:
        """DateTime.TryParse: unparseable values count as absent. Naive values are taken as UTC."""
        value = self.get(name)
        if not value:
            return None
        year, sep, _ = value.partition("-")
        if sep and 0 < len(year) < 4 and year.isdigit():
            # Python's strftime drops leading zeros of years < 1000 on Linux; the extension pads them back.
            value = value.zfill(len(value) + 4 - len(year))
        try:
            return to_utc(parse_iso(value))
        except (ValueError, OverflowError):  # (a time whose UTC instant is before year 1: TryParse fails, not 500)
            return None

    def get_enum_list(self, name: str, members: Mapping[str, int]) -> list[int] | None:
        """Enum.TryParse per comma-separated item, for a .NET enum given as its names and values: a name
        (case-sensitive) or any Int32, which TryParse takes even when the enum names no such value ("42" is
        (OrchestrationRuntimeStatus)42, a status no instance has). Unparseable items are skipped."""
        raw = self.get(name)
        if raw is None:
            return None
        found = []
        for item in raw.split(","):
            text = item.strip()
            if text in members:
                found.append(members[text])
            elif _INT.fullmatch(text) and -(2**31) <= int(text) < 2**31:
                found.append(int(text))
        return found or None
