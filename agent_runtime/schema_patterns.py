"""The regular expressions of JSON Schemas from outside (`pattern`, `patternProperties`), matched in bounded time.

jsonschema matches them with Python's `re`, a backtracking engine that cannot be interrupted: `^(a|aa)+$` takes
exponential time on a string of a's that ends wrong (ReDoS). A client's output format or an MCP server's input schema
could so pin a CPU, and the thread checking it, for hours with one answer or one tool call. Here the same syntax runs
on the `regex` module (`re`'s syntax and semantics in its default VERSION0, plus a timeout on each match). All matches
of one check share one budget (`match_budget`); a check that runs out raises `PatternTimeoutError`: the schema cannot
be checked in bounded time, which is not the same as the value being wrong.

`BOUNDED_KEYWORDS` are the keywords that match these patterns, for `jsonschema.validators.extend`. Their results and
messages are jsonschema's own. `unevaluatedProperties` matches `patternProperties` too (deep in jsonschema's
helpers); `json_schemas.check_schema` refuses a schema that uses both rather than rewriting them.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import regex
from jsonschema.exceptions import ValidationError

MATCH_BUDGET_SECONDS = 0.25
"""The matching time one check may spend on all its patterns (a legitimate pattern matches a 2 MB answer in
milliseconds)."""

_budget_ends: ContextVar[float | None] = ContextVar("schema_pattern_budget_ends", default=None)


class PatternError(ValueError):
    """A schema's pattern that cannot be used: it does not compile, or it ran out of the check's time."""


class PatternTimeoutError(PatternError):
    """The check's patterns took longer than its budget (`MATCH_BUDGET_SECONDS`)."""


@contextmanager
def match_budget(seconds: float = MATCH_BUDGET_SECONDS) -> Iterator[None]:
    """Every match inside shares `seconds` (one validation of one value); outside one, each match has them alone."""
    token = _budget_ends.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _budget_ends.reset(token)


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> regex.Pattern[str]:
    try:
        return regex.compile(pattern)
    except (regex.error, TypeError) as error:  # check_schema compiled it with `re`: a rare difference of syntax
        raise PatternError(f"the pattern {pattern[:200]!r} cannot be used: {error}") from None


def search(pattern: str, text: str) -> bool:
    """`re.search(pattern, text) is not None`, within the budget (`PatternTimeoutError` past it)."""
    ends = _budget_ends.get()
    remaining = MATCH_BUDGET_SECONDS if ends is None else ends - time.monotonic()
    if remaining <= 0:
        raise _timed_out(pattern)
    try:
        # concurrent: the match releases the GIL, so a slow one does not stall the process's other threads
        return _compiled(pattern).search(text, timeout=remaining, concurrent=True) is not None
    except TimeoutError:
        raise _timed_out(pattern) from None


def _timed_out(pattern: str) -> PatternTimeoutError:
    return PatternTimeoutError(
        f"matching the pattern {pattern[:200]!r} took longer than {MATCH_BUDGET_SECONDS} s (a pattern that backtracks"
        " exponentially on some strings, such as '^(a|aa)+$', cannot be checked)"
    )


# ----------------------------------------------------------------------------------------------- the keywords
# Each is jsonschema's own (`jsonschema._keywords`, 4.x), with `search` where it calls `re.search`.


def _pattern(validator: Any, pattern: str, instance: Any, schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = {
        key for key in instance if key not in properties and not any(search(pattern, key) for pattern in patterns)
    }
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            listed = ", ".join(repr(each) for each in sorted(patterns))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {listed}")
        else:
            ordered = sorted(extras, key=str)
            verb = "was" if len(ordered) == 1 else "were"
            joined = ", ".join(repr(extra) for extra in ordered)
            yield ValidationError(f"Additional properties are not allowed ({joined} {verb} unexpected)")


BOUNDED_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}

__all__ = [
    "BOUNDED_KEYWORDS",
    "MATCH_BUDGET_SECONDS",
    "PatternError",
    "PatternTimeoutError",
    "match_budget",
    "search",
]
