"""MCP tools with the in-process runner (`AgentRunner`, no Durable): the same real MCP servers as the durable tests
(`mcp_test_server.py` on loopback Streamable HTTP in a child process, and over stdio), the real `openai` client
against the scripted model.

Entra ID cannot run here: `credential_scope` is exercised with a fake credential object (the only stand-in), and
the test checks the bearer token reaches the server.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import httpx
import pytest
from mcp_process import SERVER_SCRIPT, McpServerProcess, server_calls

from agent_runtime.agents import AgentDefinition
from agent_runtime.check_threads import CHECK_THREAD_PREFIX
from agent_runtime.conversation import InMemoryConversationLog, idempotency_key
from agent_runtime.mcp import McpServer
from agent_runtime.mcp.answers import MAX_ANSWER_BYTES
from agent_runtime.mcp.connection import (
    MAX_PROTOCOL_ERROR_BYTES,
    McpProtocolError,
    call_remote_tool,
    list_remote_tools,
)
from agent_runtime.mcp.discovery import McpDiscoveryError, discover_tools
from agent_runtime.mcp.server_stderr import MAX_LINE_CHARS, MAX_LOGGED_CHARS
from agent_runtime.models import OpenAIChatClient
from agent_runtime.redaction import MIN_SECRET_PART_CHARS
from agent_runtime.runner import AgentRunner
from agent_runtime.tools import ToolArgumentsError
from scripted_model import Reply, Script, ScriptedModelServer


@pytest.fixture
def mcp_server(tmp_path: Path) -> Iterator[McpServerProcess]:
    server = McpServerProcess(tmp_path / "mcp").start()
    yield server
    server.stop()


@pytest.fixture
async def client(model: ScriptedModelServer) -> AsyncIterator[OpenAIChatClient]:
    chat = OpenAIChatClient.compatible(base_url=model.base_url, model="scripted", timeout=10)
    yield chat
    await chat.aclose()


def http_server(process: McpServerProcess, **fields: Any) -> McpServer:
    return McpServer(**{"name": "tools", "url": process.url, "attempts": 2, "retry_delay_seconds": 0, **fields})


def tool_messages(model: ScriptedModelServer, request: int = -1) -> list[str]:
    return [m["content"] for m in model.log.requests[request].messages if m["role"] == "tool"]


async def test_discovery_and_a_call_over_http(
    mcp_server: McpServerProcess, client: OpenAIChatClient, model: ScriptedModelServer
) -> None:
    agent = AgentDefinition(name="a", tools=[http_server(mcp_server, approval="never", allowed_tools=["record"])])
    model.set_script(Script.of(Reply.call("record", {"item": "kiwi"}), "Recorded."))
    result = await AgentRunner(agent, client).run("record a kiwi", run_id="run-1")
    assert (result.status, result.text) == ("completed", "Recorded.")
    assert [t["name"] for t in result.mcp_tools] == ["record"]
    assert model.log.requests[0].tool_names == ["record"]
    [call] = mcp_server.calls("record")
    assert call["idempotency_key"] == idempotency_key("run-1", result.messages[1].function_calls[0].call_id)
    assert tool_messages(model) == ["recorded kiwi"]


def spy_on_threads(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, seen: list[tuple[str, str]]) -> None:
    """Record the thread (its name) each call of `module.name` runs in."""
    real = getattr(module, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append((name, threading.current_thread().name))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)


async def test_the_servers_schemas_are_checked_off_the_event_loop(
    mcp_server: McpServerProcess, client: OpenAIChatClient, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Discovery checks each listed schema and binding the run's tools builds a validator from it: about 0.1 s for a
    large schema, up to 128 tools a run. Both run on worker threads, so the loop goes on serving every other run."""
    from agent_runtime.mcp import discovery
    from agent_runtime.mcp import tools as mcp_tools

    seen: list[tuple[str, str]] = []
    spy_on_threads(monkeypatch, discovery, "check_schema", seen)
    spy_on_threads(monkeypatch, mcp_tools, "_validator_for", seen)
    agent = AgentDefinition(name="a", tools=[http_server(mcp_server, approval="never", allowed_tools=["record"])])
    model.set_script(Script.of(Reply.call("record", {"item": "kiwi"}), "Recorded."))
    result = await AgentRunner(agent, client).run("record a kiwi")
    assert result.status == "completed"
    assert {name for name, _ in seen} == {"check_schema", "_validator_for"}
    assert all(thread.startswith(CHECK_THREAD_PREFIX) for _, thread in seen), seen  # the checks' own threads


async def test_a_server_listing_more_tools_than_a_run_offers_is_refused_before_any_schema_is_checked(
    mcp_server: McpServerProcess, client: OpenAIChatClient, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server may list thousands of tools, each schema ~0.1 s to check: more than a run can offer (128) is refused
    as a server that cannot be listed, before any schema is checked."""
    from agent_runtime.mcp import discovery

    seen: list[tuple[str, str]] = []
    spy_on_threads(monkeypatch, discovery, "check_schema", seen)
    (mcp_server.state / "copies.json").write_text(json.dumps({"echo": 300}))  # 305 tools
    failed = await AgentRunner(AgentDefinition(name="a", tools=[http_server(mcp_server)]), client).run("go")
    assert failed.status == "failed", failed
    assert "MCP server 'tools' (too_many_tools): it lists 305 tools; models take at most 128" in (failed.reason or "")
    assert seen == [] and len(model.log) == 0

    # An optional server listing too many is skipped; the run goes on with another server's tools.
    many = http_server(mcp_server, name="many", required=False)
    few = http_server(mcp_server, allowed_tools=["record"], approval="never")
    model.set_script(Script.of("Ok."))
    result = await AgentRunner(AgentDefinition(name="a", tools=[many, few]), client).run("go")
    assert result.status == "completed" and [t["name"] for t in result.mcp_tools] == ["record"]
    assert len(seen) == 1 and model.log.requests[0].tool_names == ["record"]


@pytest.mark.parametrize("answers", ["json", "sse"])
async def test_a_server_answer_past_the_bound_is_refused_at_once_and_not_retried(
    tmp_path: Path, answers: str, caplog: pytest.LogCaptureFixture
) -> None:
    """What a server answers is read up to `MAX_ANSWER_BYTES` (4 MiB, all pages of a listing together): a longer answer
    is a protocol error at once, not read whole into memory and parsed on the loop, nor asked again; as a plain JSON
    body (`--json-response`) or an SSE stream, which the SDK reads whole alike. Answers within the bound work."""
    process = McpServerProcess(tmp_path / "mcp", json_response=answers == "json").start()
    try:
        server = http_server(process, attempts=3)
        (process.state / "copies.json").write_text(json.dumps({"echo": 1_000}))  # a listing of ~0.3 MB
        assert len(await list_remote_tools(server)) == 1_005
        answer = await call_remote_tool(server, "echo", {"text": "hi"}, "key-1")
        assert [c.text for c in answer.content] == ["echo: hi"]  # type: ignore[union-attr]

        (process.state / "copies.json").write_text(json.dumps({"echo": 20_000}))  # ~6 MB
        caplog.clear()
        with pytest.raises(McpProtocolError, match="refused listing its tools") as refused:
            await list_remote_tools(server)
        if answers == "json":
            assert f"larger than {MAX_ANSWER_BYTES} bytes" in str(refused.value)
        # The bound is for the whole listing: 10 pages of ~0.6 MB, each within it, are refused together.
        (process.state / "page_size").write_text("2000")
        with pytest.raises(McpProtocolError, match="refused listing its tools"):
            await list_remote_tools(server)
        (process.state / "copies.json").write_text(json.dumps({"echo": 1_000}))  # 3 pages, ~0.3 MB in all
        (process.state / "page_size").write_text("400")
        assert len(await list_remote_tools(server)) == 1_005
        with pytest.raises(McpProtocolError, match="refused calling tool 'echo'"):  # a tool error for the model
            await call_remote_tool(server, "echo", {"text": "x" * MAX_ANSWER_BYTES}, "key-2")
        # Not retried: a second listing would be refused the same, after as much work again.
        assert not [r for r in caplog.records if "attempt" in r.getMessage()]
    finally:
        process.stop()


# Not an MCP server: 64 MiB on stdout without a line end (the SDK buffered a line until it ended), then it waits.
ENDLESS_LINE = (
    "import sys, time\nfor _ in range(64):\n    sys.stdout.write('x' * 1048576)\n    sys.stdout.flush()\ntime.sleep(60)"
)


@pytest.mark.parametrize("writer", ["mcp-server", "endless-line"])
async def test_a_stdio_server_answer_past_the_bound_is_refused_at_once_and_not_retried(
    tmp_path: Path, writer: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A stdio server's output was read without a limit (the SDK buffers each line whole, then parses it on the loop):
    a 6 MB listing was taken, and a server writing one endless line grew the client's memory until the timeout, then
    was started again. Its output is now counted against `MAX_ANSWER_BYTES` per operation as HTTP answers are: past
    it the connection ends with a protocol error at once, not retried; answers within it work."""
    state = tmp_path / "stdio"
    state.mkdir()
    args = [str(SERVER_SCRIPT), "stdio"] if writer == "mcp-server" else ["-c", ENDLESS_LINE]
    server = McpServer(name="local", command=sys.executable, args=args, env={"MCP_TEST_STATE": str(state)},
                       attempts=3, retry_delay_seconds=0, timeout_seconds=60)
    too_large = f"MCP server 'local' refused listing its tools: the server's answers are larger than {MAX_ANSWER_BYTES}"
    if writer == "mcp-server":
        (state / "copies.json").write_text(json.dumps({"echo": 1_000}))  # a listing of ~0.3 MB
        assert len(await list_remote_tools(server)) == 1_005
        (state / "copies.json").write_text(json.dumps({"echo": 20_000}))  # ~6 MB on one line
    caplog.clear()
    with pytest.raises(McpProtocolError, match=too_large), anyio.fail_after(20):  # at once, not at the timeout
        await list_remote_tools(server)
    if writer == "mcp-server":
        (state / "copies.json").write_text(json.dumps({"echo": 1_000}))
        with pytest.raises(McpProtocolError, match="refused calling tool 'echo': the server's answers are larger"):
            await call_remote_tool(server, "echo", {"text": "x" * MAX_ANSWER_BYTES}, "key-1")
        assert len(server_calls(state, "echo")) == 1  # called once: not retried
    assert not [r for r in caplog.records if "attempt" in r.getMessage()]


async def test_a_listing_past_the_page_limit_fails_discovery_instead_of_dropping_tools(
    mcp_server: McpServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """The client reads at most 100 pages of `tools/list`: past them the rest of the list was dropped without a word
    and the run went on with part of the server's tools. Now such a listing is a discovery failure (the run fails
    `tool_discovery_failed`; an optional server is skipped), asked once; 100 pages are read whole."""
    (mcp_server.state / "page_size").write_text("1")
    (mcp_server.state / "copies.json").write_text(json.dumps({"echo": 95}))  # 100 tools: 100 pages
    server = http_server(mcp_server)
    assert len(await list_remote_tools(server)) == 100
    (mcp_server.state / "copies.json").write_text(json.dumps({"echo": 96}))  # 101 pages
    caplog.clear()
    with pytest.raises(McpDiscoveryError, match="in more than 100 pages; a partial list is not used"):
        await discover_tools([server])
    assert not [r for r in caplog.records if "attempt" in r.getMessage()]  # not asked again
    optional = await discover_tools([server.model_copy(update={"required": False})])
    assert [(s.server, s.code) for s in optional.skipped_servers] == [("tools", "too_many_pages")]
    assert optional.tools == []


async def test_a_compressed_answer_is_bounded_as_decoded(tmp_path: Path) -> None:
    """A server may compress its answers (the client accepts gzip): a listing a few hundred KB on the wire that
    expands past `MAX_ANSWER_BYTES` is refused, as the same listing sent plain is."""
    process = McpServerProcess(tmp_path / "mcp", json_response=True, gzip=True).start()
    try:
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}
        async with httpx.AsyncClient() as http:  # the server really compresses what it sends
            probe = await http.post(process.url, json=initialize, headers={
                "Accept": "application/json, text/event-stream", "Accept-Encoding": "gzip"})
        assert probe.status_code == 200 and probe.headers.get("content-encoding") == "gzip", probe.headers

        server = http_server(process)
        (process.state / "copies.json").write_text(json.dumps({"echo": 1_000}))
        assert len(await list_remote_tools(server)) == 1_005  # within the bound, compressed: read as usual
        (process.state / "copies.json").write_text(json.dumps({"echo": 20_000}))  # ~6 MB, far less on the wire
        with pytest.raises(McpProtocolError, match=f"larger than {MAX_ANSWER_BYTES} bytes"):
            await list_remote_tools(server)
    finally:
        process.stop()


HOSTILE_TEXT = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "string", "pattern": "^(a|aa)+$"}


@pytest.mark.parametrize(
    ("schema", "refused"),
    [
        ({"type": "object", "properties": {"text": {"$ref": "#/$defs/text"}}, "$defs": {"text": HOSTILE_TEXT}},
         "is refused: $schema at #/$defs/text: a dialect is named only at the schema's root"),
        ({"type": "object", "properties": {"text": {"type": "string"}, "default": HOSTILE_TEXT}},
         "is refused: $schema at #/properties/default"),
        ({"type": "object", "properties": {"text": {"type": "string"}, "enum": {"$ref": "http://127.0.0.1:9/s"}}},
         "is refused: $ref 'http://127.0.0.1:9/s' at #/properties/enum points outside the schema"),
        ({"type": "object", "properties": {"text": {"type": "banana"}}},
         "is invalid: not a valid JSON schema: 'banana' is not valid under any of the given schemas"),
        ({"type": "object", "properties": {"text": {"type": "string", "description": "x" * 70_000}}},
         "is refused: the schema is too large"),
    ],
    ids=["dialect-in-defs", "dialect-in-a-property-named-default", "remote-ref-in-a-property-named-enum",
         "invalid", "too-large"],
)
async def test_a_tool_whose_schema_is_invalid_or_refused_is_left_out_and_the_others_stay(
    mcp_server: McpServerProcess,
    client: OpenAIChatClient,
    model: ScriptedModelServer,
    caplog: pytest.LogCaptureFixture,
    schema: dict[str, Any],
    refused: str,
) -> None:
    """A subschema naming its own `$schema` made jsonschema check it with that dialect's plain validator: its pattern
    matched with `re`, unbounded (`^(a|aa)+$` on 37 characters: 3 s; 60 would take days, holding the GIL). And a
    property named `default` or `enum` was walked as data, so what it held escaped every up-front check. Such a tool,
    or one whose schema is invalid (it was offered: OpenAI refuses a request offering it, and its calls went
    unchecked), is left out of the run with a warning naming server, tool and reason; the server's other tools are
    offered and work."""
    (mcp_server.state / "schemas.json").write_text(json.dumps({"echo": schema}))
    server = http_server(mcp_server, approval="never", allowed_tools=["echo", "record"])
    model.set_script(Script.of(Reply.call("record", {"item": "plum"}), "Done."))
    with caplog.at_level(logging.WARNING, logger="agent_runtime.mcp.discovery"):
        discovered = await discover_tools([server])
        result = await AgentRunner(AgentDefinition(name="a", tools=[server]), client).run("go")
    assert (result.status, result.text) == ("completed", "Done."), result
    assert [t["name"] for t in result.mcp_tools] == ["record"]
    assert model.log.requests[0].tool_names == ["record"]
    assert tool_messages(model) == ["recorded plum"] and mcp_server.calls("echo") == []
    [skipped] = discovered.skipped_tools
    assert (skipped.server, skipped.tool) == ("tools", "echo") and skipped.reason.startswith(refused), skipped
    assert len(skipped.reason) <= 300  # the server's text (an error may quote its schema) is cut
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"MCP server 'tools': tool 'echo' left out of this run: its input schema {skipped.reason}"] * 2


@pytest.mark.parametrize(
    "output_schema",
    [
        {"type": "object", "properties": {"result": {"type": "integer"}}},
        {"type": "object", "properties": {"result": {"type": "string", "pattern": "^echo: (a|aa)+$"}}},
    ],
    ids=["not-matching", "backtracking-pattern"],
)
async def test_a_call_does_not_check_the_servers_output_schema(
    mcp_server: McpServerProcess, client: OpenAIChatClient, model: ScriptedModelServer, output_schema: dict[str, Any]
) -> None:
    """The SDK's `call_tool` re-listed the tools on every call (each call has a fresh connection) and checked the
    result's structured content against the server's `outputSchema` with a plain jsonschema validator, on the event
    loop: unbounded patterns (`^echo: (a|aa)+$` on 40 a's and a `b` takes minutes, the loop frozen) and branches.
    A result that failed its own schema was an exception like a lost connection: the call was made again
    (`attempts`) and reported as the server being unavailable. The result reaches the model as text: it is not
    checked against what the server says of it, and the call is made once."""
    (mcp_server.state / "output_schemas.json").write_text(json.dumps({"echo": output_schema}))
    agent = AgentDefinition(name="a", tools=[http_server(mcp_server, approval="never", allowed_tools=["echo"])])
    text = "a" * 22 + "b"
    model.set_script(Script.of(Reply.call("echo", {"text": text}), "Done."))
    result = await AgentRunner(agent, client).run("go")
    assert (result.status, result.text) == ("completed", "Done."), result
    assert tool_messages(model) == [f"echo: {text}"]
    assert len(mcp_server.calls("echo")) == 1


async def test_approval_rejected_edited_and_the_list_kept_across_resume(
    mcp_server: McpServerProcess, client: OpenAIChatClient, model: ScriptedModelServer
) -> None:
    agent = AgentDefinition(name="a", tools=[http_server(mcp_server, approval={"transfer": "always"})])
    runner = AgentRunner(agent, client, InMemoryConversationLog())
    model.set_script(
        Script.of(
            Reply.call("transfer", {"amount": 5, "to": "bob"}),
            Reply.call("transfer", {"amount": 9, "to": "x"}),
            "Done.",
        )
    )
    paused = await runner.run("pay bob")
    assert paused.status == "requires_action" and mcp_server.calls() == []
    mcp_server.show_tools(["echo"])  # the server changes its list while the run waits

    [request] = paused.pending_approvals
    with pytest.raises(ToolArgumentsError, match="5000 is greater than the maximum of 1000"):
        await runner.resume(paused, [request.create_approval(arguments={"amount": 5000, "to": "bob"})])
    paused = await runner.resume(paused, [request.create_approval(arguments={"amount": 6, "to": "bob"})])
    assert paused.status == "requires_action"  # the second transfer
    assert [c["arguments"] for c in mcp_server.calls("transfer")] == [{"amount": 6, "to": "bob"}]

    done = await runner.resume(paused, [paused.pending_approvals[0].create_rejection("no")])
    assert done.status == "completed"
    assert len(mcp_server.calls("transfer")) == 1
    assert model.log.requests[0].tool_names == model.log.requests[-1].tool_names  # the run kept its list
    assert "later" not in model.log.requests[-1].tool_names and "transfer" in model.log.requests[-1].tool_names


async def test_stdio_server_with_env_from_settings(
    tmp_path: Path, client: OpenAIChatClient, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_MCP_STATE", str(tmp_path / "stdio"))
    server = McpServer(
        name="local",
        command=sys.executable,
        args=[str(SERVER_SCRIPT), "stdio"],
        env_settings={"MCP_TEST_STATE": "MY_MCP_STATE"},
        approval="never",
    )
    agent = AgentDefinition(name="a", tools=[server])
    model.set_script(Script.of(Reply.call("picture", {}), Reply.call("record", {"item": "plum"}), "Ok."))
    result = await AgentRunner(agent, client).run("go", run_id="stdio-run")
    assert result.status == "completed"
    picture = next(c for m in result.messages for c in m.function_results)
    assert [item["type"] for item in picture.result] == ["text", "data", "text", "uri"]
    assert picture.result[1]["media_type"] == "image/png" and picture.result[1]["uri"].startswith("data:image/png")
    assert picture.result[2]["text"] == "[resource file:///notes.txt]\nsome notes"
    assert "binary data not shown" in tool_messages(model)[0]  # the model is told about the image, not sent base64
    [call] = server_calls(tmp_path / "stdio", "record")
    assert call["idempotency_key"].startswith("stdio-run")


async def test_entra_bearer_token_and_secret_headers_come_from_settings(
    mcp_server: McpServerProcess, client: OpenAIChatClient, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    scopes: list[str] = []

    class FakeCredential:  # stands in for DefaultAzureCredential (no Entra ID here)
        def get_token(self, scope: str) -> Any:
            scopes.append(scope)
            return SimpleNamespace(token="entra-token", expires_on=4_102_444_800)

    monkeypatch.setenv("TOOLS_API_KEY", "k-123")
    server = http_server(
        mcp_server,
        approval="never",
        credential_scope="api://tools/.default",
        credential=FakeCredential(),
        header_settings={"X-Api-Key": "TOOLS_API_KEY"},
    )
    model.set_script(Script.of(Reply.call("echo", {"text": "x"}), "Ok."))
    assert (await AgentRunner(AgentDefinition(name="a", tools=[server]), client).run("go")).status == "completed"
    [call] = mcp_server.calls("echo")
    assert call["headers"] == {"authorization": "Bearer entra-token", "x-api-key": "k-123"}
    assert scopes == ["api://tools/.default"]  # cached: discovery and the call shared one token


async def test_a_missing_setting_or_a_down_server(
    mcp_server: McpServerProcess, client: OpenAIChatClient, model: ScriptedModelServer
) -> None:
    unconfigured = http_server(mcp_server, header_settings={"X-Api-Key": "NO_SUCH_SETTING_4711"})
    failed = await AgentRunner(AgentDefinition(name="a", tools=[unconfigured]), client).run("go")
    assert failed.status == "failed" and "NO_SUCH_SETTING_4711" in failed.reason and len(model.log) == 0

    # An optional server that cannot be listed is skipped; the run goes on with the other tools.
    optional = McpServer(name="gone", url="http://127.0.0.1:9/mcp", attempts=1, required=False)
    agent = AgentDefinition(name="a", tools=[optional, http_server(mcp_server, approval="never")])
    model.set_script(Script.of(Reply.call("echo", {"text": "x"}), Reply.call("echo", {"text": "y"}), "Ok."))
    runner = AgentRunner(agent, client)
    result = await runner.run("go")
    assert result.status == "completed"
    assert [t["server"] for t in result.mcp_tools] == ["tools"] * 5
    assert [c["arguments"] for c in mcp_server.calls("echo")] == [{"text": "x"}, {"text": "y"}]


async def test_a_server_that_goes_down_mid_run_is_a_tool_error_then_a_failed_start(
    mcp_server: McpServerProcess, client: OpenAIChatClient, model: ScriptedModelServer
) -> None:
    agent = AgentDefinition(name="a", tools=[http_server(mcp_server, approval={"transfer": "always"})])
    runner = AgentRunner(agent, client)
    model.set_script(Script.of(Reply.call("transfer", {"amount": 1, "to": "bob"}), "Could not pay.", "never"))
    paused = await runner.run("pay")
    mcp_server.stop()  # gone while the run waits for approval
    done = await runner.resume(paused, [paused.pending_approvals[0].create_approval()])
    assert (done.status, done.text) == ("completed", "Could not pay.")
    [told] = tool_messages(model)
    assert told == "Error: MCP server 'tools' is unavailable: calling tool 'transfer' failed 2 times (ConnectError)."

    # A new run cannot list the required server's tools: it fails before the model is called.
    calls = len(model.log)
    failed = await runner.run("again")
    assert failed.status == "failed" and "tool_discovery_failed: MCP server 'tools'" in failed.reason
    assert len(model.log) == calls


async def test_secrets_read_from_settings_are_masked_in_what_is_logged(
    mcp_server: McpServerProcess, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A server's URL (`url_setting`: an endpoint with a token in its query, as many hosted MCP servers take it) and
    its header values are secrets read from app settings: the HTTP client logs each request's URL, and a server or
    proxy may echo a header into an error. The process masks them as it masks model keys, in every log record."""
    from telemetry.log_redaction import install_log_redaction

    install_log_redaction()
    monkeypatch.setenv("MCP_URL_4711", f"{mcp_server.url}?token=url-secret-4711")
    monkeypatch.setenv("MCP_KEY_4711", "header-secret-4711")
    server = McpServer(name="tools", url_setting="MCP_URL_4711", header_settings={"X-Api-Key": "MCP_KEY_4711"})
    with caplog.at_level(logging.INFO):
        assert len(await list_remote_tools(server)) == 5
        logging.getLogger("test.mcp").warning("the server said: bad key header-secret-4711")
    formatted = "\n".join(logging.Formatter().format(record) for record in caplog.records)
    assert "HTTP Request: POST" in formatted  # the client did log the requests
    assert "url-secret-4711" not in formatted and "header-secret-4711" not in formatted, formatted


async def test_a_stdio_servers_stderr_is_logged_masked_and_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """A stdio server's stderr was the host's own: a server printing its environment put the token the app gave it
    into the Functions host's logs, and a flood went there unbounded. Its lines are now logged through the redaction,
    at most `MAX_LOGGED_CHARS` an operation (then one line says how much was dropped), and the server still works."""
    state = tmp_path / "stdio"
    state.mkdir()
    monkeypatch.setenv("MCP_TOKEN_4711", "stdio-secret-4711")
    server = McpServer(
        name="local", command=sys.executable, args=[str(SERVER_SCRIPT), "stdio"],
        env={"MCP_TEST_STATE": str(state), "MCP_TEST_STDERR_CHARS": str(MAX_LOGGED_CHARS * 3)},
        env_settings={"MCP_TEST_TOKEN": "MCP_TOKEN_4711"},
    )
    with caplog.at_level(logging.INFO, logger="agent_runtime.mcp.server_stderr"):
        assert len(await list_remote_tools(server)) == 5
        with anyio.fail_after(10):  # the reader logs as the server's output arrives, on a thread of its own
            while not any("characters of its stderr not logged" in r.getMessage() for r in caplog.records):
                await anyio.sleep(0.05)
    lines = [r.getMessage() for r in caplog.records if r.name == "agent_runtime.mcp.server_stderr"]
    assert lines[0] == "MCP server 'local' stderr: starting with MCP_TEST_TOKEN=***"
    logged = sum(len(line.split("stderr: ", 1)[1]) for line in lines if "stderr: noise" in line)
    assert MAX_LOGGED_CHARS <= logged < MAX_LOGGED_CHARS + 2 * MAX_LINE_CHARS
    assert "stdio-secret-4711" not in capfd.readouterr().err  # nothing went to the host's stderr as it was


def test_a_secret_at_the_cut_of_a_long_stderr_line_is_masked_whole(caplog: pytest.LogCaptureFixture) -> None:
    """A line is masked before it is cut: cut first, the secret's start no longer matched and reached the log."""
    from agent_runtime.mcp.server_stderr import _StderrLog
    from agent_runtime.redaction import remember_secret

    remember_secret("stderr-cut-secret-4711")
    log = _StderrLog("local")
    with caplog.at_level(logging.INFO, logger="agent_runtime.mcp.server_stderr"):
        log.feed(b"x" * (MAX_LINE_CHARS - 5) + b"stderr-cut-secret-4711 and more\n")
        log.close()
    [line] = [r.getMessage() for r in caplog.records]
    assert "stder" not in line.split("stderr: ", 1)[1] and line.endswith(" ...")  # no part of the secret


def test_the_rest_of_a_stderr_line_too_long_to_wait_for_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    """A line without end is logged by its start once it passes 4x `MAX_LINE_CHARS`: the rest of it, arriving in
    later reads, was logged as lines of their own, the first one starting mid-line with the end of a secret across
    the read's end (`ret-4711`); and the long line was logged before the lines that came before it."""
    from agent_runtime.mcp.server_stderr import _StderrLog
    from agent_runtime.redaction import remember_secret

    remember_secret("stderr-split-secret-4711")
    log = _StderrLog("local")
    with caplog.at_level(logging.INFO, logger="agent_runtime.mcp.server_stderr"):
        log.feed(b"first\n" + b"x" * (MAX_LINE_CHARS * 4) + b" stderr-split-sec")
        log.feed(b"ret-4711 and more")
        log.feed(b" still the same line\nnext\n")
        log.close()
    shown = [r.getMessage().split("stderr: ", 1)[1] for r in caplog.records]
    assert shown == ["first", "x" * MAX_LINE_CHARS + " ...", "next"], [line[:40] for line in shown]


# What a misbehaving server writes to forge a log line: a line break, a new record, terminal escapes, a C1 line break.
FORGED = "no\r\n2026-11-29 12:00:00 ERROR forged record\x1b[2K\x1b[31m\x85\u2028\u202edne"
ESCAPED = "no\\r\\n2026-11-29 12:00:00 ERROR forged record\\x1b[2K\\x1b[31m\\x85\\u2028\\u202edne"
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202e]")


async def test_a_servers_error_text_cannot_forge_log_lines(
    mcp_server: McpServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """A server's JSON-RPC error message reached the host's log, a skipped server's message, a run's error and the
    model's tool error as it was: its line breaks forged log records, its escapes rewrote a terminal. It is now
    quoted with its control characters escaped (`\\r\\n`, `\\x1b`) wherever the app shows it."""
    (mcp_server.state / "errors.json").write_text(json.dumps({"tools/list": FORGED, "tools/call": FORGED}))
    server = http_server(mcp_server, required=False, attempts=1)
    with caplog.at_level(logging.INFO):
        [skipped] = (await discover_tools([server])).skipped_servers
        with pytest.raises(McpDiscoveryError) as failed:
            await discover_tools([server.model_copy(update={"required": True})])
        with pytest.raises(McpProtocolError) as refused:
            await call_remote_tool(server, "echo", {"text": "hi"}, "key-1")
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("agent_runtime")]
    assert any(ESCAPED in line for line in logged), logged  # the skipped server's warning
    shown = [skipped.message, str(failed.value), str(refused.value), *logged]
    assert all(ESCAPED in text for text in shown[:3]), shown
    assert not [text for text in shown if CONTROL.search(text)], shown


async def test_a_left_out_tools_name_and_reason_cannot_forge_log_lines(
    mcp_server: McpServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """A tool left out for its schema is logged and recorded with its name and the reason, both the server's text
    (the reason quotes the schema's `$ref`): recorded as they were, with their line breaks and escapes."""
    ref = f"https://example.invalid/{FORGED}.json"
    schema = {"type": "object", "properties": {"x": {"$ref": ref}}}
    (mcp_server.state / "schemas.json").write_text(json.dumps({"echo": schema}))
    (mcp_server.state / "renamed.json").write_text(json.dumps({"echo": f"echo{FORGED}"}))
    with caplog.at_level(logging.WARNING, logger="agent_runtime.mcp.discovery"):
        found = await discover_tools([http_server(mcp_server, allowed_tools=[f"echo{FORGED}", "record"])])
    [skipped] = found.skipped_tools
    assert skipped.tool == f"echo{ESCAPED}" and ESCAPED in skipped.reason, skipped
    [logged] = [r.getMessage() for r in caplog.records]
    assert logged.startswith(f"MCP server 'tools': tool 'echo{ESCAPED}' left out") and not CONTROL.search(logged)
    assert not CONTROL.search(skipped.model_dump_json())


async def test_a_left_out_tools_name_echoing_its_servers_url_key_is_masked(mcp_server: McpServerProcess) -> None:
    """A key written in the server's URL in the agent's definition is not remembered app-wide (only one read from a
    setting is): a left-out tool's name and reason quoting it were recorded and logged whole."""
    secret = "inline-url-secret-4417"
    schema = {"type": "object", "properties": {"x": {"$ref": f"https://example.invalid/{secret}.json"}}}
    (mcp_server.state / "schemas.json").write_text(json.dumps({"echo": schema}))
    (mcp_server.state / "renamed.json").write_text(json.dumps({"echo": f"echo-{secret}"}))
    server = http_server(mcp_server, url=f"{mcp_server.url}?code={secret}", allowed_tools=[f"echo-{secret}", "record"])
    found = await discover_tools([server])
    [skipped] = found.skipped_tools
    assert secret not in skipped.model_dump_json() and skipped.tool.startswith("echo-"), skipped


def test_a_stdio_servers_stderr_line_cannot_forge_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    """A line of a server's stderr is split at its line feeds; a carriage return, a terminal escape or a C1 line
    break inside it reached the log as it was."""
    from agent_runtime.mcp.server_stderr import _StderrLog

    log = _StderrLog("local")
    with caplog.at_level(logging.INFO, logger="agent_runtime.mcp.server_stderr"):
        log.feed(FORGED.replace("\n", "").encode() + b"\n")
        log.close()
    escaped = ESCAPED.replace("\\n", "")
    assert [r.getMessage() for r in caplog.records] == [f"MCP server 'local' stderr: {escaped}"]


async def test_a_secret_at_the_cut_of_a_long_protocol_error_is_masked_whole(mcp_server: McpServerProcess) -> None:
    """A server's JSON-RPC error message is kept to 16 KB: it was cut first and masked after, so a secret the server
    echoed across the cut was no longer recognised and its start reached the model's tool error and the run's error.
    It is masked first, then cut."""
    secret = "e2e-cut-secret-9531"  # the server's URL carries it, as an Azure Functions key
    message = "x" * (MAX_PROTOCOL_ERROR_BYTES - 214) + secret + " and more" * 50  # the cut falls inside the secret
    (mcp_server.state / "errors.json").write_text(json.dumps({"tools/list": message, "tools/call": message}))
    server = http_server(mcp_server, url=f"{mcp_server.url}?code={secret}", attempts=1)
    with pytest.raises(McpProtocolError) as refused:
        await call_remote_tool(server, "echo", {"text": "hi"}, "key-1")
    with pytest.raises(McpDiscoveryError) as failed:
        await discover_tools([server])
    for told in (str(refused.value), str(failed.value)):
        assert "more characters omitted" in told and "xxxx***" in told, told[-300:]
        assert secret[:MIN_SECRET_PART_CHARS] not in told, told[-300:]


@pytest.mark.parametrize("url_in", ["setting", "definition"])
async def test_a_servers_error_text_in_a_logged_traceback_cannot_forge_log_lines(
    mcp_server: McpServerProcess, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, url_in: str
) -> None:
    """Code that logs a refused call with its traceback (`logger.exception` in a middleware or a tool) logged the
    error's cause, the SDK's `MCPError` holding the server's message, masked but as it was: its line breaks forged
    records inside the traceback, its escapes rewrote a terminal. Each exception's message in a traceback is escaped
    to one line; the traceback keeps its own lines. The server's URL carries a key (as an Azure Functions key) that
    the server echoes: masked whether the URL is read from a setting or written in the agent's definition (that one
    was not remembered, so the traceback showed it)."""
    from telemetry.log_redaction import install_log_redaction

    install_log_redaction()
    secret = f"e2e-traceback-secret-6620-{url_in}"
    url = f"{mcp_server.url}?code={secret}"
    monkeypatch.setenv("MCP_URL_6620", url)
    (mcp_server.state / "errors.json").write_text(json.dumps({"tools/call": f"{FORGED} {secret}"}))
    server = (McpServer(name="tools", url_setting="MCP_URL_6620", attempts=1) if url_in == "setting"
              else McpServer(name="tools", url=url, attempts=1))
    with caplog.at_level(logging.ERROR, logger="test.mcp.traceback"):
        try:
            await call_remote_tool(server, "echo", {"text": "hi"}, "key-1")
        except McpProtocolError:
            logging.getLogger("test.mcp.traceback").exception("the call was refused")
    [record] = caplog.records
    formatted = logging.Formatter().format(record)
    lines = formatted.split("\n")
    assert lines[0] == "the call was refused" and lines[1].endswith("Traceback (most recent call last):"), lines[:2]
    assert "The above exception was the direct cause of the following exception:" in lines, lines
    [told] = [line for line in lines if "mcp.shared.exceptions.MCPError: " in line]  # inside the task group's error
    assert told.endswith(f"mcp.shared.exceptions.MCPError: {ESCAPED} ***"), formatted
    assert not [line for line in lines if CONTROL.search(line) or line.startswith("2026-")], formatted
    assert secret not in formatted
