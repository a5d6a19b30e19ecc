"""jsonschema's own failures on schemas its meta-schema accepts never escape the app's checks
(`agent_runtime.json_schemas`, `agent_runtime.schema_numbers`).

Found by fuzzing the checks with random schemas of every dialect and random values (the property test at the end
keeps doing it): jsonschema 4.26 raised `OverflowError` from `multipleOf` on numbers beyond a float's range and
`TypeError` from draft 2019-09's `unevaluatedItems` beside a boolean `items`. Out of an output-format check, the
second left a run retrying its closing step; out of an MCP tool's argument check, a crash where the model should
have been told what is wrong.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest
import rpds
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft201909Validator, Draft202012Validator, validators

from agent_runtime.agents import AgentDefinition
from agent_runtime.json_schemas import (
    NO_RETRIEVAL,
    SchemaRefusedError,
    _bounded,
    best_error,
    check_schema,
    safe_validator,
    schema_errors_of,
)
from agent_runtime.mcp.tools import McpTool, McpToolSpec
from agent_runtime.models.types import ResponseFormat
from agent_runtime.overrides import OutputSchemaError, RunOverrides
from agent_runtime.run_result import structured_value
from agent_runtime.tools import ToolArgumentsError

DRAFT_2019 = "https://json-schema.org/draft/2019-09/schema"
BIG = 10**400  # an exact JSON integer no float holds


def messages(schema: dict[str, Any], value: Any) -> list[str]:
    return [error.message for error in schema_errors_of(safe_validator(schema), value)]


def test_multiple_of_answers_for_numbers_beyond_a_floats_range() -> None:
    """jsonschema: `OverflowError: int too large to convert to float` on both."""
    assert messages({"multipleOf": 0.5}, BIG) == []  # every integer is a multiple of 0.5
    assert messages({"multipleOf": 0.5}, BIG + 1) == []
    assert messages({"multipleOf": 0.3}, BIG) != []  # 0.3 as a double is no divisor of it
    assert messages({"multipleOf": BIG}, 0.5) == [f"0.5 is not a multiple of {BIG}"]
    assert messages({"multipleOf": BIG}, 2.0 * 1e300) != []
    assert messages({"multipleOf": BIG}, 3 * BIG) == []
    # The quotient (2**1100) overflows a float: exact, as jsonschema's own fallback.
    assert messages({"multipleOf": 2.0**-100}, 2.0**1000) == []
    assert messages({"multipleOf": 3 * 2.0**-100}, 2.0**1000) != []


finite = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.1, 0.5, 1.0, 2.5, 3, 10, 1e-300, 1e308, 0.0]),
)
divisors = st.one_of(
    st.integers(min_value=1, max_value=10**20),
    st.floats(min_value=1e-300, max_value=1e308, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.1, 0.5, 0.01, 2.5, 7]),
)


@settings(max_examples=400, deadline=None, database=None)
@given(divisor=divisors, value=finite)
def test_multiple_of_gives_jsonschemas_answer_and_message_wherever_it_gives_one(divisor: Any, value: Any) -> None:
    """Floating point, as jsonschema (10.1 is no multiple of 0.1 in doubles): only its crashes change."""
    schema = {"multipleOf": divisor}
    try:
        expected = [error.message for error in Draft202012Validator(schema).iter_errors(value)]
    except OverflowError:
        return
    assert messages(schema, value) == expected


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_a_schema_holding_nan_or_an_infinity_is_refused_as_not_json(number: float) -> None:
    """Not JSON, yet a parser may hand them over (Python's reads `1e999` as infinity); `multipleOf: NaN` passed the
    meta-schema (NaN compares false with its bound) and then failed every check."""
    for schema in ({"multipleOf": number}, {"type": "object", "properties": {"a": {"maximum": number}}}):
        with pytest.raises(SchemaRefusedError, match="not plain JSON"):
            check_schema(schema)


def test_draft_2019_unevaluated_items_beside_a_boolean_items_is_refused_up_front_naming_the_way_out() -> None:
    for items in (True, False):
        for schema in (
            {"$schema": DRAFT_2019, "items": items, "unevaluatedItems": False},
            {"$schema": DRAFT_2019, "allOf": [{"items": items}], "unevaluatedItems": {"type": "string"}},
        ):
            with pytest.raises(SchemaRefusedError, match=r'draft 2019-09.*"items": \{\} for true'):
                check_schema(schema)
    # Written as the message says, it checks: every item is evaluated by `items`, none is left over.
    assert messages({"$schema": DRAFT_2019, "items": {}, "unevaluatedItems": False}, [1, "a"]) == []
    assert messages({"$schema": DRAFT_2019, "items": {"not": {}}, "unevaluatedItems": False}, [1]) != []
    # Boolean `items` alone, or under 2020-12 (a different implementation), is fine.
    assert messages({"$schema": DRAFT_2019, "items": False}, []) == []
    assert messages({"items": True, "unevaluatedItems": False}, [1]) == []


def test_a_failure_inside_jsonschema_is_a_refusal_logged_without_the_schema_or_the_value(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Whatever jsonschema bug is not known yet: the value cannot be checked, which callers report. A validator built
    around the up-front check meets the 2019-09 bug above."""
    schema = {"items": True, "unevaluatedItems": False, "description": "schema-marker-51c2"}
    validator = _bounded(Draft201909Validator)(schema, registry=NO_RETRIEVAL)
    with caplog.at_level(logging.WARNING, logger="agent_runtime.json_schemas"):
        for check in (schema_errors_of, best_error):
            with pytest.raises(SchemaRefusedError, match=r"cannot be checked here \(jsonschema fails on it: TypeError"):
                check(validator, ["value-marker-9e07"])
    logged = [record.getMessage() for record in caplog.records]
    assert len(logged) == 2 and all("TypeError in find_evaluated_item_indexes_by_schema" in m for m in logged)
    assert not any("marker" in m for m in logged)


class _AtTheRecursionLimit:
    """A key whose comparison meets Python's recursion limit, as a URI's does when a looping reference reaches the
    limit right at the registry's lookup (seen once in 20,000 fuzzed checks; where depends on the caller's stack)."""

    def __hash__(self) -> int:
        return 1

    def __eq__(self, other: object) -> bool:
        raise RecursionError("maximum recursion depth exceeded in comparison")


def test_a_rust_panic_inside_a_check_is_a_refusal_not_a_base_exception_past_every_handler() -> None:
    """rpds (under `referencing`) turns that RecursionError into pyo3's `PanicException`, a BaseException that no
    `except Exception` of an activity or a route would stop. A keyword making the registry's own lookup meets it."""
    resources = rpds.HashTrieMap({_AtTheRecursionLimit(): "resource"})

    def looks_up(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        resources.get(_AtTheRecursionLimit())
        yield from ()

    cls = validators.extend(_bounded(Draft202012Validator), {"x-lookup": looks_up})
    with pytest.raises(SchemaRefusedError, match="references loop") as refused:
        schema_errors_of(cls({"x-lookup": True}, registry=NO_RETRIEVAL), 1)
    assert type(refused.value.__cause__).__name__ == "PanicException"
    assert not isinstance(refused.value.__cause__, Exception)

    def interrupted(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        raise KeyboardInterrupt
        yield

    cls = validators.extend(_bounded(Draft202012Validator), {"x-lookup": interrupted})
    with pytest.raises(KeyboardInterrupt):  # other BaseExceptions are not the check's to answer
        schema_errors_of(cls({"x-lookup": True}, registry=NO_RETRIEVAL), 1)


def test_an_mcp_tools_arguments_meeting_a_multiple_of_overflow_are_told_apart_not_crashed() -> None:
    """An MCP server's schema is parsed without the app's number limits (`json_limits`): a 400-digit `multipleOf`
    reaches the check, and the model's `0.5` crashed it instead of being told what is wrong."""
    schema = {"type": "object", "properties": {"amount": {"type": "number", "multipleOf": BIG}}}
    tool = McpTool(McpToolSpec(server="s", remote_name="pay", name="pay", input_schema=schema), None)
    with pytest.raises(ToolArgumentsError, match=r"amount: 0\.5 is not a multiple of 1000"):
        tool.validate_arguments('{"amount": 0.5}')
    assert tool.validate_arguments('{"amount": 0}').as_dict() == {"amount": 0}


def test_a_run_format_recorded_before_the_refusal_fails_the_answers_check_not_the_closing_step() -> None:
    """A run started before `check_schema` refused such formats keeps its format: the answer's check says the schema
    cannot be checked (the run fails `invalid_structured_output`); the TypeError failed the closing step on every
    retry."""
    schema = {"$schema": DRAFT_2019, "type": "object", "properties": {"v": {"items": True, "unevaluatedItems": False}}}
    overrides = RunOverrides(response_format=ResponseFormat.from_json_schema(schema, name="f"))
    agent = AgentDefinition(name="a", instructions="x")
    with pytest.raises(OutputSchemaError, match="cannot be checked against the schema: under draft 2019-09"):
        overrides.parse_output(agent, '{"v": [1]}')
    value, problem = structured_value(agent, '{"v": [1]}', overrides)
    assert value is None and problem is not None and problem.startswith("the answer cannot be checked")


# ------------------------------------------------------------------------------------------ fuzzing the checks

_numbers = st.one_of(
    st.integers(), st.integers(min_value=-BIG, max_value=BIG), st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.1, 0.5, 1e-300, 1e308, 3.0, 7]),
)
_values = st.recursive(
    st.one_of(st.none(), st.booleans(), _numbers, st.text(max_size=6)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(["a", "b", "x", ""]), inner, max_size=4)
    ),
    max_leaves=10,
)
_names = st.sampled_from(["a", "b", "x", "$ref", "enum"])
_positive = st.one_of(st.integers(min_value=1, max_value=BIG), st.floats(min_value=1e-300, max_value=1e308))


def _schema_of(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    small = st.integers(0, 3)
    keywords = st.fixed_dictionaries({}, optional={
        "type": st.sampled_from(["object", "array", "string", "number", "integer", "boolean", "null"]),
        "multipleOf": _positive, "minimum": _numbers, "exclusiveMaximum": _numbers, "maxLength": small,
        "pattern": st.sampled_from(["^a", "(a+)+$", "\\d{2}", "(?i)x"]),
        "enum": st.lists(_values, min_size=1, max_size=3), "const": _values,
        "properties": st.dictionaries(_names, inner, max_size=3),
        "patternProperties": st.dictionaries(st.sampled_from(["^a", "b$"]), inner, max_size=2),
        "additionalProperties": inner, "items": inner | st.lists(inner, min_size=1, max_size=2),
        "prefixItems": st.lists(inner, min_size=1, max_size=2), "additionalItems": inner,
        "contains": inner, "minContains": small, "maxContains": small, "uniqueItems": st.booleans(),
        "required": st.lists(_names, max_size=2, unique=True), "dependentRequired": st.dictionaries(
            _names, st.lists(_names, max_size=2, unique=True), max_size=2),
        "allOf": st.lists(inner, min_size=1, max_size=2), "anyOf": st.lists(inner, min_size=1, max_size=2),
        "oneOf": st.lists(inner, min_size=1, max_size=2), "not": inner, "if": inner, "then": inner, "else": inner,
        "dependentSchemas": st.dictionaries(_names, inner, max_size=2), "propertyNames": inner,
        "unevaluatedItems": inner, "unevaluatedProperties": inner, "minProperties": small, "maxItems": small,
        "$ref": st.sampled_from(["#", "#/$defs/d", "#/properties/a", "#/$defs/missing", "#anc", "#/items"]),
        "$dynamicRef": st.sampled_from(["#", "#anc", "#meta"]), "$recursiveRef": st.just("#"),
        "$anchor": st.just("anc"), "$dynamicAnchor": st.just("anc"), "$recursiveAnchor": st.booleans(),
        "$defs": st.dictionaries(st.just("d"), inner, max_size=1),
        "$id": st.sampled_from(["https://example.com/s", "urn:x", "sub/"]),
    })
    return st.one_of(st.booleans(), keywords)


_schemas = st.recursive(st.one_of(st.booleans(), st.just({})), _schema_of, max_leaves=8)
_dialects = st.sampled_from([
    None, "https://json-schema.org/draft/2020-12/schema", DRAFT_2019, "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-06/schema#", "http://json-schema.org/draft-04/schema#",
])


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(schema=_schemas, dialect=_dialects, value=_values)
def test_checking_any_schema_of_any_dialect_answers_or_refuses_and_nothing_else(
    schema: Any, dialect: str | None, value: Any
) -> None:
    """The app's checks end in an answer or a `SchemaRefusedError` for any schema, never another exception: 20,000
    examples of this found the bugs above (CI keeps a few hundred)."""
    schema = schema if isinstance(schema, dict) else {"not": schema}
    if dialect is not None:
        schema = {**schema, "$schema": dialect}
    try:
        validator = safe_validator(schema)
        schema_errors_of(validator, value)
        best_error(validator, value)
    except SchemaRefusedError:
        pass
