"""Query-string parsing with the .NET rules of HttpApiHandler (NameValueCollection, bool/int/DateTime.TryParse)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from enum import Enum
from typing import TypeVar

from multidict import MultiMapping

from devhost.protocol.timefmt import parse_iso, to_utc

E = TypeVar("E", bound=Enum)
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
        except ValueError:
            return None

    def get_enum_list(self, name: str, enum: type[E]) -> list[E] | None:
        """Enum.TryParse per comma-separated item (case-sensitive names); unknown items are skipped."""
        raw = self.get(name)
        if raw is None:
            return None
        found = [item for item in _parse_enum_items(raw.split(","), enum) if item is not None]
        return found or None


def _parse_enum_items(items: Iterable[str], enum: type[E]) -> Iterable[E | None]:
    for item in items:
        text = item.strip()
        yield enum.__members__.get(text)
