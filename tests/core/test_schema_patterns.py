"""A schema's patterns are matched in bounded time (`agent_runtime.schema_patterns`): a pattern that backtracks
exponentially (ReDoS) on a hostile value is refused within the check's budget instead of pinning a CPU, in every
keyword that matches patterns and every dialect; patterns that behave get jsonschema's own results and messages.

Each hostile check runs in a child process with a deadline: before this, `re` matched `^(a|aa)+$` against 80 a's and
a "!" for longer than the universe's age, and the test must fail rather than hang.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from jsonschema import validators

from agent_runtime import schema_patterns
from agent_runtime.json_schemas import SchemaRefusedError, best_error, check_schema, safe_validator, schema_errors_of
from agent_runtime.mcp.tools import McpTool, McpToolSpec
from agent_runtime.models.types import ResponseFormat
from agent_runtime.overrides import OutputSchemaError, RunOverrides
from agent_runtime.schema_patterns import PatternError, PatternTimeoutError, match_budget, search
from agent_runtime.tools import ToolArgumentsError

EVIL = "^(a|aa)+$"
HOSTILE = "a" * 80 + "!"
DIALECTS = [
    "http://json-schema.org/draft-04/schema#",
    "http://json-schema.org/draft-07/schema#",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
]


def finishes(check: Callable[[], Any], within: float = 30) -> Any:
    """`check()`'s result, or the error it raised, from a child process that must end within `within` seconds. A
    process, not a thread: `re` holds the GIL while it matches, so a runaway match would freeze this process (and
    pytest's own timeout with it) instead of failing the test."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def run() -> None:
        try:
            send.send(("value", check()))
        except Exception as error:  # handed to the test
            send.send(("error", error))

    child = context.Process(target=run, daemon=True)
    child.start()
    try:
        if not receive.poll(within):
            pytest.fail(f"the check did not end within {within} s: it runs without a bound")
        kind, value = receive.recv()
    finally:
        child.kill()
        child.join()
    if kind == "error":
        raise value
    return value


def hostile_cases() -> list[tuple[str, dict[str, Any], Any]]:
    """(keyword, schema, value) where matching the evil pattern meets the hostile string."""
    return [
        ("pattern", {"type": "object", "properties": {"v": {"type": "string", "pattern": EVIL}}}, {"v": HOSTILE}),
        ("patternProperties", {"type": "object", "patternProperties": {EVIL: {"type": "integer"}}}, {HOSTILE: 1}),
        ("additionalProperties", {"type": "object", "patternProperties": {EVIL: {}}, "additionalProperties": False},
         {HOSTILE: 1}),
        ("propertyNames", {"type": "object", "propertyNames": {"pattern": EVIL}}, {HOSTILE: 1}),
    ]


def dialect_cases() -> list[Any]:
    """Each hostile case in each dialect that has its keyword (draft 4 has no `propertyNames`)."""
    return [
        pytest.param(dialect, schema, value, id=f"{keyword}-{dialect.split('/')[-2]}")
        for dialect in DIALECTS
        for keyword, schema, value in hostile_cases()
        if keyword in validators.validator_for({"$schema": dialect}).VALIDATORS
    ]


@pytest.mark.parametrize(("dialect", "schema", "value"), dialect_cases())
def test_a_pattern_that_backtracks_exponentially_is_refused_not_matched_forever(
    dialect: str, schema: dict[str, Any], value: Any
) -> None:
    validator = safe_validator({"$schema": dialect, **schema})
    with pytest.raises(SchemaRefusedError, match=r"took longer than the check allows .* cannot be checked") as refused:
        finishes(lambda: schema_errors_of(validator, value))
    assert EVIL in str(refused.value)
    with pytest.raises(SchemaRefusedError):
        finishes(lambda: best_error(validator, value))


def test_all_matches_of_one_check_share_one_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many matches that each stay under the budget cannot add up past it: on a CPU clock that moves 0.1 s at each
    reading (the matches themselves are instant), a check of five strings runs out before its last."""
    clock = iter(0.1 * step for step in range(1000))
    monkeypatch.setattr(schema_patterns, "time", SimpleNamespace(thread_time=lambda: next(clock),
                                                                 process_time=time.process_time))
    validator = safe_validator({"type": "array", "items": {"type": "string", "pattern": "^a+$"}})
    with pytest.raises(SchemaRefusedError, match=r"took longer than the check allows \(0.25 s, plus 25 µs a match"):
        schema_errors_of(validator, ["aaa"] * 5)
    assert search("a", "a") and not search("^b", "a")  # outside a check, each match has the budget alone
    with match_budget(-1), pytest.raises(PatternTimeoutError):
        search("a", "a")  # nothing left: not even a trivial match starts


class StallingPattern:
    """A compiled pattern whose first search stalls off the CPU first, as a check on a busy worker does waiting for
    the GIL (the event loop serving other runs) or for a core; with `cut_short`, that search then times out as regex
    does when the process's other threads spent its timeout (it counts the whole process's CPU time)."""

    def __init__(self, compiled: Any, stall: float, *, cut_short: bool = False) -> None:
        self.compiled, self.stall, self.cut_short = compiled, stall, cut_short
        self.attempts: list[tuple[float, bool]] = []  # (timeout, concurrent) of each search

    def search(self, *args: Any, **kwargs: Any) -> Any:
        self.attempts.append((kwargs["timeout"], kwargs["concurrent"]))
        if self.stall:
            time.sleep(self.stall)
            self.stall = 0.0
            if self.cut_short:
                raise TimeoutError("regex time-out")
        return self.compiled.search(*args, **kwargs)


def stall_first_match(
    monkeypatch: pytest.MonkeyPatch, seconds: float, *, cut_short: bool = False
) -> dict[str, StallingPattern]:
    """The check's first match (of any pattern) stalls `seconds` off the CPU (and is cut short: `StallingPattern`)."""
    compiled = schema_patterns._compiled
    stalling: dict[str, StallingPattern] = {}

    def stalled(pattern: str) -> StallingPattern:
        if pattern not in stalling:
            stalling[pattern] = StallingPattern(compiled(pattern), 0.0 if stalling else seconds, cut_short=cut_short)
        return stalling[pattern]

    monkeypatch.setattr(schema_patterns, "_compiled", stalled)
    return stalling


def test_time_the_checking_thread_waits_does_not_count_against_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A legitimate answer checked while the process is busy is not refused: the budget is the thread's CPU time.
    Before, a match that waited longer than the budget (0.25 s plus 25 µs a match) refused the schema."""
    stall_first_match(monkeypatch, 0.4)
    validator = safe_validator({"type": "array", "items": {"type": "string", "pattern": "^a+$"}})
    assert schema_errors_of(validator, ["aaa"] * 50) == []
    assert [e.validator for e in schema_errors_of(validator, ["aaa", "b"])] == ["pattern"]


def test_a_match_cut_short_by_other_threads_cpu_time_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """regex's timeout counts the whole process's CPU time: while other threads run (the event loop, other checks),
    a long match that releases the GIL times out before this thread spent its budget. It is tried again with what is
    left, holding the GIL (the other Python threads wait: the process's CPU time is this thread's); before, the
    legitimate answer was refused (with three busy Python threads, a 2 MB answer every time)."""
    stalling = stall_first_match(monkeypatch, 0.05, cut_short=True)
    validator = safe_validator({"type": "string", "pattern": "^(?:[a-z]+ )*[a-z]+$"})
    assert schema_errors_of(validator, "word " * 2000 + "end") == []
    [(first, concurrent), (again, holding)] = stalling["^(?:[a-z]+ )*[a-z]+$"].attempts
    assert (concurrent, holding) == (True, False)
    assert 0 < again <= first  # what is left of the budget (the stall was off the CPU: nearly all of it)


def busy_threads_around(check: Callable[[], Any], count: int = 3) -> Callable[[], Any]:
    """`check` run while `count` Python threads spin (as the event loop and other checks keep a worker busy)."""

    def run() -> Any:
        stop = threading.Event()

        def spin() -> None:
            while not stop.is_set():
                pass

        spinners = [threading.Thread(target=spin, daemon=True) for _ in range(count)]
        for spinner in spinners:
            spinner.start()
        try:
            return check()
        finally:
            stop.set()

    return run


def test_a_hostile_long_match_on_a_busy_process_is_still_refused_in_bounded_time() -> None:
    """Retried matches (a match cut short by other threads' CPU time is tried again holding the GIL) stay bounded:
    `^(a|aa)+$` against 5,000 a's and a "!" (a long match: the GIL released) beside three spinning threads is refused,
    in a child process that must end within 30 s."""
    validator = safe_validator({"type": "string", "pattern": EVIL})
    with pytest.raises(SchemaRefusedError, match=r"took longer than the check allows"):
        finishes(busy_threads_around(lambda: schema_errors_of(validator, "a" * 5000 + "!")))


def test_a_pattern_whose_repetitions_multiply_out_is_refused_before_it_is_compiled() -> None:
    """`regex` spells fixed repetitions out when it compiles, where no timeout applies: `(?:(?:a{1000}){1000}){10}`
    took 14 s. Such a pattern is refused where the schema is checked, naming where, and before any compile."""
    huge = "(?:(?:a{1000}){1000}){10}"
    with pytest.raises(SchemaRefusedError, match=r"repeats too much.* \(at #/properties/v\)"):
        check_schema({"type": "object", "properties": {"v": {"type": "string", "pattern": huge}}})
    with pytest.raises(SchemaRefusedError, match="repeats too much"):
        check_schema({"type": "object", "patternProperties": {f"^x{huge}": {}}})
    with pytest.raises(PatternError, match="repeats too much"):
        finishes(lambda: search(huge, "a"), within=5)  # a validator built before this rule: refused, not compiled
    uuid = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
    for fine in ("a{10000}", uuid, "(?:ab{100}){99}", EVIL, r"x(?=y)(?P<n>a)(?(n)b|c)"):
        check_schema({"type": "string", "pattern": fine})
    assert search(uuid, "0f8fad5b-d9cb-469f-a165-70867728950e")


def test_patterns_that_behave_get_jsonschemas_own_results_and_messages() -> None:
    """The library's own validator is the oracle: the same errors, in the same words, at the same places."""
    schema = {
        "type": "object",
        "properties": {"id": {"type": "string", "pattern": r"^[a-z]{3}-\d+$"}, "tags": {"type": "array"}},
        "patternProperties": {r"^x-": {"type": "string"}, r"^n_\d$": {"type": "integer"}},
        "additionalProperties": False,
        "propertyNames": {"pattern": r"^[\w-]+$"},
    }
    values = [
        {"id": "abc-12", "x-a": "s", "n_1": 2},
        {"id": "ABC-12", "x-a": 3, "n_1": "two", "other": 1, "more": 2, "bad name": 0},
        {"id": "abc-1", "single": True},
    ]
    own = validators.validator_for(schema)(schema)
    ours = safe_validator(schema)
    for value in values:
        expected = sorted((list(e.absolute_path), e.validator, e.message) for e in own.iter_errors(value))
        got = sorted((list(e.absolute_path), e.validator, e.message) for e in schema_errors_of(ours, value, limit=99))
        assert got == expected, value
    without_patterns = {"type": "object", "properties": {"a": {}}, "additionalProperties": False}
    [error] = schema_errors_of(safe_validator(without_patterns), {"a": 1, "b": 2})
    assert error.message == "Additional properties are not allowed ('b' was unexpected)"


def test_unevaluated_properties_with_pattern_properties_is_refused_up_front() -> None:
    """jsonschema matches `patternProperties` for `unevaluatedProperties` deep in its helpers, with `re`."""
    schema = {
        "type": "object",
        "$defs": {"ext": {"patternProperties": {"^x-": {"type": "string"}}}},
        "allOf": [{"$ref": "#/$defs/ext"}],
        "unevaluatedProperties": False,
    }
    with pytest.raises(SchemaRefusedError, match="unevaluatedProperties and patternProperties"):
        check_schema(schema)
    check_schema({**schema, "$defs": {"ext": {"properties": {"x-a": {"type": "string"}}}}})  # either alone is fine
    check_schema({"type": "object", "patternProperties": {"^x-": {}}, "additionalProperties": False})
    check_schema({"type": "object", "properties": {"unevaluatedProperties": {}, "patternProperties": {}}})  # names
    # A schema describing schemas names its properties after keywords: names, not keywords, however they are filled.
    about_schemas = {
        "type": "object",
        "properties": {
            "patternProperties": {"type": "object", "additionalProperties": {"type": "object"}},
            "unevaluatedProperties": {"type": "boolean"},
            "$ref": {"type": "string"},
        },
        "$defs": {"pattern": {"type": "string"}},
    }
    check_schema(about_schemas)
    assert schema_errors_of(safe_validator(about_schemas), {"$ref": "https://example.invalid/x"}) == []
    with pytest.raises(SchemaRefusedError, match="unevaluatedProperties and patternProperties"):
        check_schema({**about_schemas, "unevaluatedProperties": False, "patternProperties": {"^x-": {}}})


def test_a_run_s_output_format_and_an_mcp_tool_refuse_the_hostile_value_in_bounded_time() -> None:
    schema = {"type": "object", "properties": {"verdict": {"type": "string", "pattern": EVIL}}, "required": ["verdict"]}
    overrides = RunOverrides(response_format=ResponseFormat.from_json_schema(schema))
    with pytest.raises(OutputSchemaError, match="cannot be checked against the schema"):
        finishes(lambda: overrides.parse_output(None, f'{{"verdict": "{HOSTILE}"}}'))  # type: ignore[arg-type]
    assert overrides.parse_output(None, '{"verdict": "aaa"}') == {"verdict": "aaa"}  # type: ignore[arg-type]

    tool = McpTool(McpToolSpec(server="s", remote_name="judge", name="s_judge", input_schema=schema), None)
    with pytest.raises(ToolArgumentsError, match="cannot check its arguments"):
        finishes(lambda: tool.validate_arguments({"verdict": HOSTILE}))
    assert tool.validate_arguments({"verdict": "aa"}).as_dict() == {"verdict": "aa"}  # type: ignore[attr-defined]
