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
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

# Python's own parser of `re` syntax (what `re.compile`, and so jsonschema's check of a schema's patterns, runs): the
# only reader of a pattern's structure that needs no compile. Private, but the same module in 3.11-3.13.
from re import _constants as sre_constants  # type: ignore[attr-defined]
from re import _parser as sre_parser  # type: ignore[attr-defined]
from typing import Any

import regex
from jsonschema.exceptions import ValidationError

MATCH_BUDGET_SECONDS = 0.25
"""The matching time one check may spend on all its patterns, plus `MATCH_ALLOWANCE_SECONDS` for each match (a
legitimate pattern matches a 2 MB answer in milliseconds)."""
MATCH_ALLOWANCE_SECONDS = 25e-6
"""What each match adds to the budget: a short match takes about 5 µs (the timeout's set-up is most of it), so an
answer of 250,000 short strings still checks; a hostile one gets at most its share more."""

MAX_PATTERN_EXPANSION = 10_000
"""How far a pattern's fixed repetitions may multiply out: `regex` spells them out when it compiles, where no timeout
applies, at about 130 bytes and 5 µs a character (`(?:(?:a{1000}){1000}){10}` took 14 s; `a{10000}` takes 50 ms and
1.3 MB, `^[0-9a-f]{8}-[0-9a-f]{4}-...` nothing to speak of). With `_COMPILED_KEPT`, this bounds the cache at ~45 MB."""

_COMPILED_KEPT = 32  # compiled patterns kept (a schema has a few; the output formats of runs come and go)

_REPEATS = (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, sre_constants.POSSESSIVE_REPEAT)


class PatternError(ValueError):
    """A schema's pattern that cannot be used: it does not compile, or it ran out of the check's time."""


class PatternTimeoutError(PatternError):
    """The check's patterns took longer than its budget (`MATCH_BUDGET_SECONDS`)."""


MAX_MATCH_ATTEMPTS = 4
MIN_MATCH_SHARE = 1 / 8
"""A match cut short by regex's timeout while other threads ran is tried again (at most `MAX_MATCH_ATTEMPTS` times in
all) holding the GIL, its timeout what is left divided by the share of the process's CPU this thread had (at least
this; 1 after a match that released the GIL): a hostile match spends at most the budget on a process whose other
threads are idle, and never more than 1 / MIN_MATCH_SHARE times it."""


class _Budget:
    """The matching time one check has left (only time spent matching and compiling counts, not the rest of the
    check: a large answer may take a while to walk). Time is the checking thread's CPU time: a check on a busy worker
    waits for the GIL and for a core inside its matches too, and that must not refuse a legitimate answer (reading
    the CPU clock costs ~1 µs a match, a fifth of a short match). regex's own timeout counts the whole process's CPU
    time instead (other threads' too), so `search` tries a match it cut short again (`MAX_MATCH_ATTEMPTS`)."""

    def __init__(self, seconds: float) -> None:
        self.left = seconds
        self._started = (time.thread_time(), time.process_time())

    def share(self) -> float:
        """The share of the process's CPU time this thread has had since the budget began (1 until it has any)."""
        thread, process = time.thread_time() - self._started[0], time.process_time() - self._started[1]
        return 1.0 if process <= 0 else min(max(thread / process, MIN_MATCH_SHARE), 1.0)


_budget: ContextVar[_Budget | None] = ContextVar("schema_pattern_budget", default=None)


@contextmanager
def match_budget(seconds: float = MATCH_BUDGET_SECONDS) -> Iterator[None]:
    """Every match inside shares `seconds` of matching, plus each match's allowance (one validation of one value);
    outside one, each match has them alone."""
    token = _budget.set(_Budget(seconds))
    try:
        yield
    finally:
        _budget.reset(token)


def check_pattern(pattern: str) -> None:
    """Raise `PatternError` unless `pattern` parses and its repetitions stay within `MAX_PATTERN_EXPANSION`."""
    try:
        parsed = sre_parser.parse(pattern)
    except (re.error, TypeError, RecursionError, OverflowError) as error:
        raise PatternError(f"the pattern {pattern[:200]!r} cannot be used: {error}") from None
    if _expansion(parsed) > MAX_PATTERN_EXPANSION:
        raise PatternError(
            f"the pattern {pattern[:200]!r} repeats too much: its fixed repetitions multiply out to more than"
            f" {MAX_PATTERN_EXPANSION:,} characters"
        )


def _expansion(parsed: Any) -> int:
    """An upper bound of the characters a pattern's required repetitions spell out (alternatives summed, not the
    longest: the bound only needs to be safe), stopping as soon as it passes the limit."""
    total = 0
    for op, argument in parsed:
        if op in _REPEATS:
            least, _, inner = argument
            total += max(least, 1) * _expansion(inner)
        else:
            total += 1 + sum(_expansion(sub) for sub in _subpatterns(argument))
        if total > MAX_PATTERN_EXPANSION:
            return total
    return total


def _subpatterns(argument: Any) -> Iterator[Any]:
    """The parsed sub-patterns inside an item's argument (groups, alternatives, lookarounds, conditionals)."""
    if isinstance(argument, sre_parser.SubPattern):
        yield argument
    elif isinstance(argument, tuple | list):
        for part in argument:
            yield from _subpatterns(part)


@functools.lru_cache(maxsize=_COMPILED_KEPT)
def _compiled(pattern: str) -> regex.Pattern[str]:
    check_pattern(pattern)
    try:
        return regex.compile(pattern)
    except (regex.error, TypeError) as error:  # check_schema compiled it with `re`: a rare difference of syntax
        raise PatternError(f"the pattern {pattern[:200]!r} cannot be used: {error}") from None


def search(pattern: str, text: str) -> bool:
    """`re.search(pattern, text) is not None`, within the budget (`PatternTimeoutError` past it)."""
    budget = _budget.get() or _Budget(MATCH_BUDGET_SECONDS)
    budget.left += MATCH_ALLOWANCE_SECONDS
    if budget.left <= 0:
        raise _timed_out(pattern)
    # Two reads of the thread's CPU clock a match (a system call each: ~1 µs); more only when a match is cut short.
    started = attempt_started = time.thread_time()
    try:
        compiled = _compiled(pattern)  # bounded by MAX_PATTERN_EXPANSION; its time counts against the budget
        concurrent = len(text) > 4096  # a long match releases the GIL: the process's other threads go on meanwhile
        # ... on the process's CPU time that regex's timeout counts (see below): such a match starts from the share of
        # it this thread has had since the check began.
        share = budget.share() if concurrent else 1.0
        for _ in range(MAX_MATCH_ATTEMPTS):
            left = budget.left - (attempt_started - started)  # less what this search's earlier attempts spent
            if left <= 0:
                break
            timeout = left / share
            try:
                return compiled.search(text, timeout=timeout, concurrent=concurrent) is not None
            except TimeoutError:
                pass
            # regex's timeout is the CPU time of the whole process (C `clock()`): other threads' work counted in it.
            # Again with what is left: holding the GIL, so that the other Python threads wait and the process's CPU
            # time is this thread's (the loop waits at most what is left of the budget); holding it already, with the
            # timeout scaled by the share of it this thread had (threads outside Python).
            now = time.thread_time()
            share = 1.0 if concurrent else max((now - attempt_started) / timeout, MIN_MATCH_SHARE)
            concurrent, attempt_started = False, now
        raise _timed_out(pattern)
    finally:
        budget.left -= time.thread_time() - started


def _timed_out(pattern: str) -> PatternTimeoutError:
    return PatternTimeoutError(
        f"matching the pattern {pattern[:200]!r} took longer than the check allows ({MATCH_BUDGET_SECONDS} s, plus"
        f" {MATCH_ALLOWANCE_SECONDS * 1e6:.0f} µs a match; a pattern that backtracks"
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
    "MAX_PATTERN_EXPANSION",
    "PatternError",
    "PatternTimeoutError",
    "check_pattern",
    "match_budget",
    "search",
]
