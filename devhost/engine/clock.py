"""Clocks: real time, or a virtual clock that tests advance (and that can skip to the next timer when idle)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """What the engine needs from time. `now()` is timezone-aware UTC."""

    is_virtual: bool

    def now(self) -> datetime: ...


class RealClock:
    is_virtual = False

    def now(self) -> datetime:
        return datetime.now(UTC)


class VirtualClock:
    """Time that moves only when told. Thread-safe: tests may advance it from another thread than the engine's loop.

    `auto_skip=True` makes the engine jump straight to the next due timer whenever it is otherwise idle, so a 3-day
    approval timeout completes in milliseconds without the test calling `advance`.
    """

    is_virtual = True

    def __init__(self, start: datetime | None = None, *, auto_skip: bool = False) -> None:
        self._now = start or datetime.now(UTC).replace(microsecond=0)
        self.auto_skip = auto_skip
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        """Move time forward by `seconds` and wake the engine(s) using this clock."""
        if seconds < 0:
            raise ValueError("a virtual clock cannot go backwards")
        with self._lock:
            self._now += timedelta(seconds=seconds)
            now = self._now
        self._notify()
        return now

    def advance_to(self, moment: datetime) -> datetime:
        with self._lock:
            if moment > self._now:
                self._now = moment
            now = self._now
        self._notify()
        return now

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Register a wake-up callback (called on the advancing thread); returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _notify(self) -> None:
        for listener in list(self._listeners):
            listener()
