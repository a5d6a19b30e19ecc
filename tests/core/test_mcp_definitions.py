"""MCP tools without a server: configuration rules, naming on collisions, argument checks against the server's
JSON schema, approval policies, result conversion. (The calls themselves are tested against real MCP servers in
tests/e2e/test_mcp_in_process.py and tests/e2e/test_e2e_mcp.py.)"""

from __future__ import annotations

import base64

import pytest
from mcp_types import CallToolResult, ImageContent, TextContent
from pydantic import ValidationError

from agent_runtime.agents import AgentDefinition
from agent_runtime.mcp import McpServer, McpTool, McpToolSpec, assign_names
from agent_runtime.mcp.results import MAX_INLINE_BYTES, result_value
from agent_runtime.messages import FunctionResultContent, Message
from agent_runtime.models.openai_wire import result_text
from agent_runtime.tools import ToolArgumentsError, tool

SCHEMA = {
    "type": "object",
    "properties": {"amount": {"type": "integer", "minimum": 1}, "to": {"type": "string"}},
    "required": ["amount", "to"],
    "title": "transferArguments",
}


@tool
def search(query: str) -> str:
    """Search."""
    return query


def spec(name: str = "transfer", server: str = "bank", schema: dict | None = None) -> McpToolSpec:
    return McpToolSpec(
        server=server, remote_name=name, name=name, description="Move money.", input_schema=schema or SCHEMA
    )


def test_a_server_needs_exactly_one_transport() -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        McpServer(name="x")
    with pytest.raises(ValidationError, match="exactly one"):
        McpServer(name="x", url="https://a/mcp", command="python")
    with pytest.raises(ValidationError, match="stdio command"):
        McpServer(name="x", command="python", headers={"X-Key": "1"})
    with pytest.raises(ValidationError, match="apply to a stdio command"):
        McpServer(name="x", url="https://a/mcp", args=["-m", "x"])
    with pytest.raises(ValidationError, match="approval"):
        McpServer(name="x", url="https://a/mcp", approval={"t": "sometimes"})
    with pytest.raises(ValidationError):
        McpServer(name="bad name", url="https://a/mcp")


def test_servers_in_tools_move_to_mcp_servers() -> None:
    server = McpServer(name="files", url="https://files.example/mcp")
    agent = AgentDefinition(name="a", tools=[search, server])
    assert [t.name for t in agent.tools] == ["search"]
    assert agent.mcp_servers == [server]
    with pytest.raises(ValidationError, match="duplicate MCP server"):
        AgentDefinition(name="a", tools=[server, McpServer(name="files", command="x")])


def test_names_collide_only_when_they_must() -> None:
    names = assign_names(["search"], [("a", "search"), ("a", "read.file"), ("a", "list"), ("b", "list"), ("b", "x")])
    assert names == ["a__search", "read_file", "a__list", "b__list", "x"]
    long = "t" * 70
    assert assign_names([], [("s", long)]) == ["t" * 64]
    # Two servers whose names only differ by characters the model cannot see still get distinct names.
    assert assign_names(["s__x"], [("s", "x"), ("s", "x")]) == ["s__x_2", "s__x_3"]


def test_bound_agent_offers_the_server_schema_and_validates_against_it() -> None:
    agent = AgentDefinition(name="a", tools=[search, McpServer(name="bank", url="https://bank/mcp")])
    bound = agent.with_discovered_tools([spec()])
    assert [t.name for t in bound.tools] == ["search", "transfer"] and bound.mcp_servers == agent.mcp_servers
    offered = {s.name: s for s in bound.tool_specs()}["transfer"]
    assert offered.parameters == {k: v for k, v in SCHEMA.items() if k != "title"}
    transfer = bound.tool("transfer")
    assert isinstance(transfer, McpTool)
    args = transfer.validate_arguments('{"amount": 3, "to": "bob"}')
    assert (args.amount, args.to) == (3, "bob")
    with pytest.raises(ToolArgumentsError, match=r"amount: 0 is less than the minimum of 1"):
        transfer.validate_arguments({"amount": 0, "to": "bob"})
    with pytest.raises(ToolArgumentsError, match="'to' is a required property"):
        transfer.validate_arguments({"amount": 2})
    with pytest.raises(ToolArgumentsError, match="not valid JSON"):
        transfer.validate_arguments("{nope")


def test_approval_policy_per_server_and_per_tool() -> None:
    everything = McpServer(name="bank", url="https://bank/mcp")  # default: always
    per_tool = McpServer(name="bank", url="https://bank/mcp", approval={"transfer": lambda a: a.amount > 100})
    assert McpTool(spec(), everything).needs_approval(
        McpTool(spec(), everything).validate_arguments({"amount": 1, "to": "x"})
    )
    tool_ = McpTool(spec(), per_tool)
    assert not tool_.needs_approval(tool_.validate_arguments({"amount": 5, "to": "x"}))
    assert tool_.needs_approval(tool_.validate_arguments({"amount": 500, "to": "x"}))
    other = McpTool(spec("balance", schema={"type": "object"}), per_tool)
    assert other.approval is None and not other.needs_approval(other.validate_arguments({}), "never")
    with_default = McpServer(name="bank", url="https://bank/mcp", approval={"balance": "never", "*": "always"})
    assert McpTool(spec("balance"), with_default).approval == "never"
    assert McpTool(spec("transfer"), with_default).approval == "always"
    # A tool whose server the agent no longer configures always asks (and fails to run: see the e2e tests).
    orphan = McpTool(spec(), None)
    assert orphan.needs_approval(orphan.validate_arguments({"amount": 1, "to": "x"}))


def test_an_invalid_server_schema_accepts_any_object() -> None:
    loose = McpTool(spec(schema={"type": "object", "properties": {"a": {"type": "no-such-type"}}}), None)
    assert loose.validate_arguments({"a": 1}).as_dict() == {"a": 1}


def test_results_are_converted_to_our_contents() -> None:
    text_only = CallToolResult(content=[TextContent(type="text", text="a"), TextContent(type="text", text="b")])
    assert result_value(text_only) == "a\nb"
    structured = CallToolResult(content=[], structured_content={"n": 1})
    assert result_value(structured) == {"n": 1}
    png = base64.b64encode(b"\x89PNG-bytes").decode()
    mixed = CallToolResult(
        content=[TextContent(type="text", text="look"), ImageContent(type="image", data=png, mime_type="image/png")]
    )
    value = result_value(mixed)
    assert value == [
        {"type": "text", "text": "look"},
        {"type": "data", "uri": f"data:image/png;base64,{png}", "media_type": "image/png"},
    ]
    # Stored as such, the model reads a description of the image, not its base64.
    message = Message.tool_result(FunctionResultContent(call_id="c", result=value), message_id="m")
    assert Message.model_validate_json(message.model_dump_json()) == message
    told = result_text(message.function_results[0])
    assert png not in told and '"media_type": "image/png"' in told and '"bytes": 10' in told
    huge = base64.b64encode(b"x" * (MAX_INLINE_BYTES + 3)).decode()
    too_big = CallToolResult(content=[ImageContent(type="image", data=huge, mime_type="image/png")])
    assert result_value(too_big).startswith(f"[image/png content of {MAX_INLINE_BYTES + 3} bytes omitted")


def test_a_result_is_kept_to_its_bound_however_it_is_made() -> None:
    """Many small contents, text that JSON escapes six-fold, bounds smaller than the note: each ends, within bound."""
    from agent_runtime.content_sizes import MAX_CONTENT_BYTES as MAX_RESULT_BYTES
    from agent_runtime.content_sizes import cut_text, json_bytes

    many = CallToolResult(content=[ImageContent(type="image", data="AAAA", mime_type="image/png")] * 20_000)
    fitted = result_value(many)
    assert json_bytes(fitted) <= MAX_RESULT_BYTES and fitted[-1]["text"].endswith("more contents omitted]")
    escaped = result_value(CallToolResult(content=[TextContent(type="text", text="\x01" * 2_000_000)]))
    assert json_bytes(escaped) <= MAX_RESULT_BYTES and escaped.endswith(f"kept to {MAX_RESULT_BYTES} bytes]")
    assert [cut_text("x" * 500, limit).startswith("\n[... 500 more") for limit in (0, 1, 3)] == [True] * 3


@pytest.mark.parametrize("root_type", ["string", "array", ["object", "null"]])
def test_a_tool_whose_arguments_are_not_an_object_is_left_out_at_discovery(root_type: object) -> None:
    """OpenAI answers 400 to a request offering a function whose `parameters` are not an object schema ("schema must
    be a JSON Schema of 'type: \"object\"'"): offered, such a tool failed every model call of every run. The `mcp`
    client takes such a listing (its server SDK will not send one; others may): discovery leaves the tool out."""
    from mcp_types import Tool as RemoteTool

    from agent_runtime.mcp.discovery import _usable_tools

    server = McpServer(name="odd", url="http://127.0.0.1:9/mcp")
    odd = RemoteTool(name="echo", input_schema={"type": root_type})
    usable, [skipped] = _usable_tools(server, [odd, RemoteTool(name="ok", input_schema={"properties": {}})])
    assert (skipped.tool, skipped.reason) == ("echo", f"is of type {root_type!r}, not 'object'")
    [(_, name, _, schema)] = usable
    assert (name, schema) == ("ok", {"properties": {}})  # no type: an object, as offered (`type` added)
