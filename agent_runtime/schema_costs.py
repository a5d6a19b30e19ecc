"""What a JSON Schema from outside may cost to check, beyond its patterns (`schema_patterns`).

jsonschema's work is not bounded by the size of the schema and the value:
- a small schema can make it exponential: `$defs` whose each level is `{"anyOf": [{"$ref": <the level below>},
  {"$ref": <the level below>}]}` evaluates a value that fails 2^depth times;
- `uniqueItems` compares items pairwise when they do not sort (objects): quadratic, hours for a 2 MB array.

So the keywords that branch or jump (`BRANCHING_KEYWORDS`) run under one deadline per check (`check_deadline`: a
second plus 5 µs per character of the value, several times what a legitimate check takes; the other keywords walk
the value once), and `uniqueItems` compares items by a canonical form in one pass. Running out refuses the schema
(`CheckTooCostlyError`): it cannot be checked in bounded time, which is not the same as the value being wrong.

The deadline is the checking thread's CPU time, not the wall clock's: a check on a busy worker waits for the GIL
(the event loop serves other runs meanwhile) and for a core, and a legitimate answer must not be refused because
the process was busy. The wall clock is read at each keyword (cheap; it never runs slower than the thread's CPU
clock), and only when it says the deadline passed is the CPU clock read (a system call): time the thread did not run
is given back then, up to `WALL_CEILING_FACTOR` times the deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from jsonschema.exceptions import ValidationError

CHECK_SECONDS = 1.0
CHECK_SECONDS_PER_CHAR = 5e-6
"""A check's deadline: `CHECK_SECONDS` plus this per character of the value's JSON (a 2.3 MB answer of 40,000
objects takes 1.9 s to check on a 2-core VM, and may take 12.5 s)."""

BRANCHING_KEYWORDS = frozenset({
    "$ref", "$dynamicRef", "$recursiveRef", "allOf", "anyOf", "oneOf", "not", "if", "dependentSchemas",
    "dependencies", "extends",
})
"""The keywords through which a check can do more work than the value's size: the rest walk the value once."""

WALL_CEILING_FACTOR = 10
"""However long the checking thread waits, a check ends by this many times its deadline on the wall clock: a hostile
check holds one of the few check threads (and the GIL, in turns) for a bounded time, even on a busy process."""


class _Deadline:
    """`seconds` of the checking thread's CPU time from now, watched on the wall clock (see the module's notes), and
    at most `WALL_CEILING_FACTOR` times as long on the wall clock."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.cpu_started = time.thread_time()
        now = time.monotonic()
        self.wall_ends = now + seconds
        self.wall_ceiling = now + WALL_CEILING_FACTOR * seconds

    def passed(self) -> bool:
        now = time.monotonic()
        if now <= self.wall_ends:
            return False
        left = self.seconds - (time.thread_time() - self.cpu_started)
        if left <= 0 or now >= self.wall_ceiling:
            return True
        self.wall_ends = min(now + left, self.wall_ceiling)  # the thread waited meanwhile: it still has `left` to run
        return False


_check_deadline: ContextVar[_Deadline | None] = ContextVar("schema_check_deadline", default=None)

Keyword = Callable[[Any, Any, Any, Mapping[str, Any]], Any]


class CheckTooCostlyError(ValueError):
    """The check ran past its deadline."""


@contextmanager
def check_deadline(value_chars: int) -> Iterator[None]:
    """The deadline of one check of a value whose JSON has `value_chars` characters (the check runs on this thread)."""
    token = _check_deadline.set(_Deadline(CHECK_SECONDS + CHECK_SECONDS_PER_CHAR * value_chars))
    try:
        yield
    finally:
        _check_deadline.reset(token)


def within_deadline(keyword: Keyword) -> Keyword:
    """`keyword` (a jsonschema keyword function), refused once the check's deadline has passed."""

    def checked(validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[ValidationError]:
        deadline = _check_deadline.get()
        if deadline is not None and deadline.passed():
            raise CheckTooCostlyError(
                "checking the value took longer than allowed: the schema is too costly to check (for instance"
                " anyOf or oneOf nested through references)"
            )
        errors = keyword(validator, value, instance, schema)
        if errors is not None:
            yield from errors

    checked.__name__ = getattr(keyword, "__name__", "keyword")
    return checked


def unique_items(validator: Any, unique: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    """jsonschema's `uniqueItems` (same result and message), in one pass over canonical forms."""
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Hashable] = set()
    for item in instance:
        form = _canonical(item)
        if form in seen:
            yield ValidationError(f"{instance!r} has non-unique elements")
            return
        seen.add(form)


def _canonical(value: Any) -> Hashable:
    """Equal exactly when jsonschema's `equal` says so: true and 1 differ, 1 and 1.0 do not (Python's own equality
    and hashing), objects compare without order, arrays in order."""
    if value is True or value is False:
        return ("bool", value)
    if isinstance(value, Mapping):
        return ("object", frozenset((key, _canonical(item)) for key, item in value.items()))
    if isinstance(value, list | tuple):
        return ("array", tuple(_canonical(item) for item in value))
    if isinstance(value, str):
        return ("string", value)
    return ("value", value)  # numbers and null


__all__ = [
    "BRANCHING_KEYWORDS",
    "CHECK_SECONDS",
    "CHECK_SECONDS_PER_CHAR",
    "CheckTooCostlyError",
    "check_deadline",
    "unique_items",
    "within_deadline",
]
