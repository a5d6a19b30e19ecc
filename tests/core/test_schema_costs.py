"""A schema from outside cannot make a check run without bound (`agent_runtime.schema_costs`): combinators nested
through references (exponential in jsonschema) run into the check's deadline, `uniqueItems` is one pass instead of
jsonschema's pairwise comparison, and legitimate checks, large ones included, are untouched.

The hostile checks run in a child process with a deadline (`finishes`, as in test_schema_patterns.py): before this
they ran for hours, and the test must fail rather than hang.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from jsonschema import validators
from test_schema_patterns import finishes, stall_first_match

from agent_runtime import schema_costs
from agent_runtime.json_schemas import SchemaRefusedError, best_error, safe_validator, schema_errors_of
from bench.workload.schemas import ROWS_SCHEMA, nested
from bench.workload.schemas import rows as listed_rows


@pytest.mark.parametrize(("combinator", "value"), [("anyOf", "not a number"), ("oneOf", 1), ("allOf", 1)])
def test_combinators_nested_through_references_run_into_the_deadline(combinator: str, value: Any) -> None:
    """anyOf fails every branch of a wrong value; oneOf and allOf evaluate every branch of a right one."""
    validator = safe_validator(nested(combinator))
    with pytest.raises(SchemaRefusedError, match="too costly to check"):
        finishes(lambda: [e.message for e in schema_errors_of(validator, {"x": value})])
    with pytest.raises(SchemaRefusedError, match="too costly to check"):
        finishes(lambda: str(best_error(validator, {"x": value})))
    shallow = safe_validator(nested(combinator, depth=4))  # 8 evaluations: checked as before, not refused
    assert [e.validator for e in schema_errors_of(shallow, {"x": value})] == ([] if combinator == "allOf" else
                                                                               [combinator])


def test_the_deadline_grows_with_the_value_and_stops_only_branching_keywords(monkeypatch: pytest.MonkeyPatch) -> None:
    """On clocks that read 0 when the check starts and 100 s after: the deadline of a small value has passed at the
    first `$ref`, and a large value's has not; keywords that walk the value once are never stopped."""
    readings = iter([0.0, 100.0, 100.0, 100.0, 100.0])
    cpu = iter([0.0, 100.0])  # the thread ran all along: the CPU clock confirms the wall clock's reading
    monkeypatch.setattr(schema_costs, "time", SimpleNamespace(monotonic=lambda: next(readings),
                                                              thread_time=lambda: next(cpu)))
    referring = safe_validator({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"})
    with pytest.raises(SchemaRefusedError, match="too costly to check"):
        schema_errors_of(referring, 1, value_chars=1)
    readings, cpu = iter([0.0, 100.0, 100.0]), iter([0.0])
    assert schema_errors_of(referring, 1, value_chars=20_000_000) == []  # 1 s + 100 s of characters
    readings, cpu = iter([0.0, 100.0, 100.0]), iter([0.0])
    plain = safe_validator({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}})
    assert schema_errors_of(plain, {"n": 1}, value_chars=1) == []


def test_unique_items_is_one_pass_with_jsonschemas_own_results() -> None:
    """jsonschema's own validator is the oracle on the cases its `equal` singles out: true is not 1, 1 is 1.0, objects
    compare without key order, arrays in order."""
    arrays = [
        [1, True], [1, 1.0], [0, False], [True, True], [None, None], ["1", 1], [[1, 2], [2, 1]], [[1, True], [1, 1]],
        [{"a": 1, "b": 2}, {"b": 2, "a": 1}], [{"a": 1}, {"a": True}], [{"a": [1]}, {"a": [1.0]}], [], [{}],
        [{}, {}], [[], {}], ["a", "b", "a"], [1.5, 1.5], [{"a": None}, {"b": None}],
    ]
    schema = {"type": "array", "uniqueItems": True}
    own = validators.validator_for(schema)(schema)
    ours = safe_validator(schema)
    for array in arrays:
        expected = [e.message for e in own.iter_errors(array)]
        assert [e.message for e in schema_errors_of(ours, array)] == expected, array
    many = [{"k": index} for index in range(100_000)]  # pairwise, 5 billion comparisons; one pass here
    assert finishes(lambda: [e.validator for e in schema_errors_of(ours, many)]) == []
    assert finishes(lambda: [e.validator for e in schema_errors_of(ours, [*many, {"k": 7}])]) == ["uniqueItems"]


def test_a_large_legitimate_answer_is_checked_as_before() -> None:
    schema = ROWS_SCHEMA
    rows = listed_rows(5_000)
    validator = safe_validator(schema)
    assert schema_errors_of(validator, {"rows": rows}) == []
    rows[42]["name"] = "Name"
    [error] = schema_errors_of(validator, {"rows": rows})
    assert list(error.absolute_path) == ["rows", 42, "name"] and error.validator == "anyOf"


def test_time_the_checking_thread_waits_does_not_count_against_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deadline is the checking thread's CPU time: a check that waits (for the GIL, for a core) past the wall
    clock's deadline goes on. Before, a legitimate answer checked on a busy worker could be refused as too costly."""
    monkeypatch.setattr(schema_costs, "CHECK_SECONDS", 0.2)
    stall_first_match(monkeypatch, 0.5)  # off the CPU inside the first match, past the deadline on the wall clock
    validator = safe_validator({
        "$defs": {"word": {"type": "string", "pattern": "^[a-z]+$"}},
        "type": "array", "items": {"anyOf": [{"$ref": "#/$defs/word"}, {"type": "null"}]},
    })
    assert schema_errors_of(validator, ["word", None, "word"] * 20) == []
    monkeypatch.setattr(schema_costs, "CHECK_SECONDS", 0.0)  # a deadline spent before the check starts still holds
    with pytest.raises(SchemaRefusedError, match="too costly to check"):
        schema_errors_of(validator, ["word"], value_chars=0)


def test_a_check_ends_by_its_wall_clock_ceiling_however_long_its_thread_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hostile check on a busy process holds a check thread for at most `WALL_CEILING_FACTOR` times its deadline,
    though it has spent less CPU time than the deadline."""
    monkeypatch.setattr(schema_costs, "CHECK_SECONDS", 0.02)
    stall_first_match(monkeypatch, 0.3)  # past 10 x 0.02 s on the wall clock, ~no CPU time
    validator = safe_validator({
        "$defs": {"word": {"type": "string", "pattern": "^[a-z]+$"}},
        "type": "array", "items": {"anyOf": [{"$ref": "#/$defs/word"}, {"type": "null"}]},
    })
    with pytest.raises(SchemaRefusedError, match="too costly to check"):
        schema_errors_of(validator, ["word", None, "word"], value_chars=0)
