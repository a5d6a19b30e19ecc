"""Schemas from outside never make the app fetch anything (`agent_runtime.json_schemas`).

Real listener sockets on 127.0.0.1 (`listeners.py`): an HTTP server that records every request (and would serve a
schema) and one that accepts and never answers. Every validator the app builds (a run's output format, an MCP tool's
input schema, the approval check of edited arguments) refuses `$ref`s outside the schema and contacts neither.
`file:` refs are refused without reading the file.
"""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator
from listeners import FETCHED_MARKER, RecordingServer, SilentServer
from referencing.exceptions import Unresolvable

from agent_runtime.agents import AgentDefinition
from agent_runtime.json_schemas import (
    MAX_SCHEMA_CHARS,
    MAX_SCHEMA_DEPTH,
    NO_RETRIEVAL,
    SchemaRefusedError,
    check_schema,
    safe_validator,
    schema_errors_of,
)
from agent_runtime.mcp.config import McpServer
from agent_runtime.mcp.tools import McpTool, McpToolSpec
from agent_runtime.messages import FunctionApprovalRequestContent, FunctionCallContent
from agent_runtime.models.types import ResponseFormat
from agent_runtime.overrides import OutputSchemaError, RunOverrides, check_output_schema
from agent_runtime.steps import decide_approval
from agent_runtime.tools import ToolArgumentsError


def object_with(ref: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": {"$ref": ref}}, "required": ["x"]}


def refs(recording: RecordingServer, silent: SilentServer, local_file: str) -> list[str]:
    return [recording.url(), silent.url(), local_file, "other.json#/x"]


def test_the_registry_retrieves_nothing_even_when_asked_directly(
    recording: RecordingServer, silent: SilentServer, local_file: str
) -> None:
    """The last line of defence: a validator on `NO_RETRIEVAL` that meets a remote ref fails, it does not fetch."""
    for ref in refs(recording, silent, local_file):
        validator = Draft202012Validator(object_with(ref), registry=NO_RETRIEVAL)
        with pytest.raises(Unresolvable):
            list(validator.iter_errors({"x": 1}))
    assert recording.requests == [] and silent.accepted == 0


@pytest.mark.parametrize("keyword", ["$ref", "$dynamicRef"])
def test_a_schema_with_a_reference_outside_it_is_refused_naming_it(
    recording: RecordingServer, silent: SilentServer, local_file: str, keyword: str
) -> None:
    for ref in refs(recording, silent, local_file):
        schema = {"type": "object", "properties": {"x": {keyword: ref}}}
        with pytest.raises(SchemaRefusedError) as refused:
            check_output_schema(schema)
        assert ref in str(refused.value) and "#/properties/x" in str(refused.value)
        assert FETCHED_MARKER not in str(refused.value)
    assert recording.requests == [] and silent.accepted == 0


def test_local_references_resolve_and_values_that_look_like_refs_are_data() -> None:
    schema = {
        "type": "object",
        "$defs": {"amount": {"type": "integer", "maximum": 10}},
        "properties": {"a": {"$ref": "#/$defs/amount"}, "b": {"enum": [{"$ref": "http://example.invalid/x"}]}},
    }
    validator = safe_validator(schema)
    assert schema_errors_of(validator, {"a": 3, "b": {"$ref": "http://example.invalid/x"}}) == []
    [error] = schema_errors_of(validator, {"a": 30})
    assert error.validator == "maximum"


def test_a_missing_or_looping_local_reference_is_a_clear_refusal() -> None:
    with pytest.raises(SchemaRefusedError, match="not inside it"):
        schema_errors_of(safe_validator(object_with("#/$defs/missing")), {"x": 1})
    with pytest.raises(SchemaRefusedError, match="loop"):
        schema_errors_of(safe_validator({"$ref": "#"}), {})


@pytest.mark.parametrize(
    "dialect", ["http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2020-12/schema"]
)
def test_a_dialect_named_inside_the_schema_is_refused(dialect: str) -> None:
    """jsonschema validates a subschema naming its own `$schema` with that dialect's plain validator class, outside
    the bounds: there `^(a|aa)+$` matched 37 characters for 3 s (and doubles every two more). Any dialect, even the
    root's own, so only the root may name one; a property named `$schema`, or one in data, is no dialect."""
    hostile = {"$schema": dialect, "type": "string", "pattern": "^(a|aa)+$"}
    for schema in (
        {"type": "object", "properties": {"q": hostile}},
        {"type": "object", "properties": {"q": {"$ref": "#/$defs/s"}}, "$defs": {"s": hostile}},
    ):
        with pytest.raises(SchemaRefusedError, match=r"\$schema at #/.*only at the schema's root"):
            check_schema(schema)
    check_schema({"$schema": dialect, "type": "object", "properties": {"$schema": {"type": "string"}}})
    check_schema({"type": "object", "properties": {"a": {"const": {"$schema": dialect}}}})


@pytest.mark.parametrize("name", ["enum", "const", "default", "examples"])
def test_a_property_named_like_a_data_keyword_is_checked_as_a_schema(name: str) -> None:
    """A property named `enum` (or `const`, ...) is a schema: it was walked as data, so its remote `$ref`, its dialect
    and its patterns passed the up-front check (the pattern then compiled with no bound at the first call)."""
    def under(schema: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": {name: schema}}

    with pytest.raises(SchemaRefusedError, match="points outside the schema"):
        check_schema(under({"$ref": "http://127.0.0.1:9/schema.json"}))
    with pytest.raises(SchemaRefusedError, match="only at the schema's root"):
        check_schema(under({"$schema": "http://json-schema.org/draft-07/schema#", "pattern": "^(a|aa)+$"}))
    with pytest.raises(SchemaRefusedError, match="pattern"):
        check_schema(under({"type": "string", "pattern": "(?:(?:a{1000}){1000}){10}"}))
    check_schema({"type": "object", "properties": {"a": {name: [{"$ref": "http://x", "$schema": 1}]}}})  # data


def test_size_depth_and_dialect_limits() -> None:
    deep: dict[str, Any] = {"type": "object"}
    for _ in range(MAX_SCHEMA_DEPTH):
        deep = {"type": "object", "properties": {"a": deep}}
    with pytest.raises(SchemaRefusedError, match="deeper"):
        check_schema(deep)
    large = {"type": "object", "description": "x" * MAX_SCHEMA_CHARS}
    with pytest.raises(SchemaRefusedError, match="too large"):
        check_schema(large)
    with pytest.raises(SchemaRefusedError, match="dialect"):
        check_schema({"$schema": "http://127.0.0.1:9/meta", "type": "object"})
    with pytest.raises(SchemaRefusedError, match="not a valid JSON schema"):
        check_schema({"type": "object", "properties": {"a": {"type": 5}}})


def test_a_run_output_format_with_a_remote_ref_fails_the_check_without_a_fetch(
    recording: RecordingServer, silent: SilentServer, local_file: str
) -> None:
    """A run's stored format (recorded before the edge refused such schemas) never reaches the network."""
    agent = AgentDefinition(name="a", instructions="x")
    for ref in refs(recording, silent, local_file):
        overrides = RunOverrides(response_format=ResponseFormat.from_json_schema(object_with(ref), name="f"))
        with pytest.raises(OutputSchemaError, match="cannot be checked") as refused:
            overrides.parse_output(agent, '{"x": "fetched-document-7d1c"}')
        assert FETCHED_MARKER not in str(refused.value)
    assert recording.requests == [] and silent.accepted == 0


def test_an_answer_nested_too_deep_is_an_output_error_not_a_crash() -> None:
    agent = AgentDefinition(name="a", instructions="x")
    overrides = RunOverrides(response_format=ResponseFormat.from_json_schema({"type": "object"}, name="f"))
    with pytest.raises(OutputSchemaError, match="deeper than"):
        overrides.parse_output(agent, '{"a":' * 100_000 + "1" + "}" * 100_000)


def test_an_mcp_tool_recorded_with_a_remote_ref_refuses_edited_arguments_without_a_fetch(
    recording: RecordingServer, silent: SilentServer, local_file: str
) -> None:
    """The approval route's check of edited arguments (`decide_approval`) on a tool whose recorded schema needs a
    remote document: a clear tool error, nothing contacted."""
    server = McpServer(name="s", url="http://127.0.0.1:9/mcp")
    for ref in refs(recording, silent, local_file):
        spec = McpToolSpec(server="s", remote_name="t", name="t", input_schema=object_with(ref))
        agent = AgentDefinition(name="a", instructions="x").with_discovered_tools([spec])
        call = FunctionCallContent(call_id="c1", name="t", arguments={"x": "a"})
        request = FunctionApprovalRequestContent(id="r1", function_call=call)
        with pytest.raises(ToolArgumentsError, match="cannot check its arguments"):
            decide_approval(agent, request, request.create_approval(arguments={"x": "b"}))
        with pytest.raises(ToolArgumentsError, match="cannot check its arguments"):
            McpTool(spec, server).validate_arguments({"x": "b"})
    assert recording.requests == [] and silent.accepted == 0
