"""A benchmark's checks that what it measured worked: figures of failed runs would mean nothing. Real exceptions,
not `assert`, so that they hold under `python -O` too."""

from __future__ import annotations


class BenchmarkFailedError(RuntimeError):
    """What the benchmark measured did not work (the message says what it got instead)."""


def expect(condition: bool, got: object = "") -> None:
    if not condition:
        raise BenchmarkFailedError(str(got))
