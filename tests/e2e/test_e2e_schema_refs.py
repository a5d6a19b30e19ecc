"""A JSON Schema from outside never makes the app fetch a URL or read a file, and never freezes the host: the app on
devhost, real listener sockets on 127.0.0.1 (`listeners.py`: an HTTP server that records whether it was contacted
and one that accepts and never answers), `file:` refs to a real file, and a real MCP server (`mcp_test_server.py`).

- `POST /api/v1/responses` with `text.format` `json_schema` holding a remote, `file:` or relative `$ref`: 400 naming
  `text.format.schema`, at once, `/api/health` answering, nothing contacted (the host froze on the silent server);
- an MCP server listing a tool whose input schema needs a remote document: the run fails at discovery naming the
  server and the tool, nothing contacted;
- the approval route's check of edited arguments on an MCP schema with local refs (and a base URI on a live server):
  resolved locally, nothing contacted; a broken local ref is a tool error for the model, not a crash;
- a client's pattern that backtracks exponentially on the model's answer: the run fails naming it, the host answers.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest
import test_e2e_mcp
from e2e_harness import InProcessApp, pending_ids
from e2e_settings import watches_the_app_in_process
from listeners import FETCHED_MARKER, RecordingServer, SilentServer
from mcp_process import McpServerProcess

from agent_runtime.check_threads import CHECK_THREAD_PREFIX
from scripted_model import Reply, Script, ScriptedModelServer

pytestmark = pytest.mark.slow


# The MCP test's fixtures: the app with `fixture_mcp_agents` and the MCP server on loopback.
mcp_server = test_e2e_mcp.mcp_server
mcp_app = test_e2e_mcp.mcp_app


def object_with(ref: str, key: str = "$ref") -> dict[str, Any]:
    return {"type": "object", "properties": {"verdict": {key: ref}}, "required": ["verdict"]}


def create(app: InProcessApp, schema: dict[str, Any], timeout: float = 30) -> httpx.Response:
    body = {
        "model": "helper",
        "input": "judge",
        "text": {"format": {"type": "json_schema", "name": "verdict", "schema": schema}},
    }
    return httpx.post(f"{app.host.base_url}/api/v1/responses", json=body, timeout=timeout, trust_env=False)


def test_a_response_format_with_an_outside_ref_is_refused_at_the_edge(
    app: InProcessApp,
    model: ScriptedModelServer,
    recording: RecordingServer,
    silent: SilentServer,
    local_file: str,
) -> None:
    model.set_script(Script.of('{"verdict": "fetched-document-7d1c"}'))
    cases = [
        object_with(recording.url()),
        object_with(local_file),
        object_with("other.json#/verdict"),
        object_with(recording.url("/dyn.json"), key="$dynamicRef"),
        {"$id": recording.url("/base/"), **object_with("sibling.json")},
    ]
    for schema in cases:
        response = create(app, schema)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert (error["param"], error["type"]) == ("text.format.schema", "invalid_request_error"), error
        assert "outside the schema" in error["message"] and FETCHED_MARKER not in response.text
    assert recording.requests == [], recording.requests
    assert len(model.log) == 0  # no run started


def test_a_ref_to_a_server_that_never_answers_does_not_freeze_the_host(
    app: InProcessApp, model: ScriptedModelServer, silent: SilentServer
) -> None:
    """Before: the run's finish step fetched the ref with no timeout on the event loop and the whole host froze."""
    model.set_script(Script.of('{"verdict": "yes"}'))
    outcome: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: outcome.update(response=create(app, object_with(silent.url()))))
    worker.start()
    for _ in range(5):  # the host answers all along
        health = httpx.get(f"{app.host.base_url}/api/health", timeout=10, trust_env=False)
        assert health.status_code == 200
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert outcome["response"].status_code == 400
    assert silent.accepted == 0
    # A local ref is fine and a run with it completes (the check runs without any fetch).
    local = {"type": "object", "$defs": {"v": {"type": "string"}}, "properties": {"verdict": {"$ref": "#/$defs/v"}}}
    done = create(app, local, timeout=120)
    assert done.status_code == 200 and done.json()["status"] == "completed", done.text


def test_a_pattern_that_backtracks_exponentially_fails_the_run_and_never_freezes_the_host(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """The model's answer meets a client's `^(a|aa)+$`: with `re` the check ran for ages holding the GIL, the worker
    frozen; now the run fails `invalid_structured_output` naming the pattern, and the host answers all along."""
    evil = {"type": "object", "properties": {"verdict": {"type": "string", "pattern": "^(a|aa)+$"}}}
    model.set_script(Script.of(json.dumps({"verdict": "a" * 80 + "!"})))
    outcome: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: outcome.update(response=create(app, evil, timeout=120)), daemon=True)
    worker.start()
    for _ in range(5):
        assert httpx.get(f"{app.host.base_url}/api/health", timeout=10, trust_env=False).status_code == 200
    worker.join(timeout=120)
    assert not worker.is_alive()
    body = outcome["response"].json()
    assert outcome["response"].status_code == 200 and body["status"] == "failed", body
    message = body["error"]["message"]
    assert message.startswith("invalid_structured_output: ") and "^(a|aa)+$" in message, message
    assert "cannot be checked" in message
    model.set_script(Script.of(json.dumps({"verdict": "aaaa"})))  # the same schema checks a fitting answer
    done = create(app, evil, timeout=120)
    assert done.status_code == 200 and done.json()["status"] == "completed", done.text



def test_a_schema_jsonschema_cannot_check_is_refused_at_the_edge_before_any_model_call(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """A valid draft 2019-09 schema with `unevaluatedItems` beside a boolean `items`: jsonschema 4.26 fails on it with a
    TypeError when it checks an array (found by fuzzing the checks). Refused at the edge (400 naming the field and the
    way out); before, the run called the model and then failed its closing step on the crash."""
    schema = {
        "$schema": "https://json-schema.org/draft/2019-09/schema",
        "type": "object",
        "properties": {"verdicts": {"type": "array", "items": True, "unevaluatedItems": False}},
    }
    model.set_script(Script.of(json.dumps({"verdicts": ["yes"]})))
    refused = create(app, schema)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert (error["param"], error["type"]) == ("text.format.schema", "invalid_request_error"), error
    assert "unevaluatedItems" in error["message"] and '"items": {}' in error["message"], error
    assert len(model.log) == 0
    schema["properties"]["verdicts"]["items"] = {}  # the same schema as the message says to write it
    done = create(app, schema, timeout=60)
    assert done.status_code == 200 and done.json()["status"] == "completed", done.text
    assert json.loads(done.json()["output"][0]["content"][0]["text"]) == {"verdicts": ["yes"]}


async def _current_thread() -> threading.Thread:
    return threading.current_thread()


@watches_the_app_in_process
def test_the_answers_schema_check_runs_off_the_event_loop(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checking an answer against a client's schema is bounded work but not small (2,000,000 characters, the patterns'
    budget): closing the run does it on a worker thread, and the host's loop serves meanwhile. A run without a format
    builds its result on the loop (bookkeeping, not worth a thread hop)."""
    finish = app.app_module("agent_runs.finishing")
    loop_thread = app.host.run(_current_thread())
    built_on: list[threading.Thread] = []
    build = finish.build_run_result

    def spy(*args: Any, **kwargs: Any) -> Any:
        built_on.append(threading.current_thread())
        return build(*args, **kwargs)

    monkeypatch.setattr(finish, "build_run_result", spy)
    model.set_script(Script.of('{"verdict": "yes"}'))
    checked = create(app, {"type": "object", "properties": {"verdict": {"type": "string", "pattern": "^y"}}})
    assert checked.status_code == 200 and checked.json()["status"] == "completed", checked.text
    model.set_script(Script.of("plain"))
    plain = app.start(input="hi")
    app.settle()
    assert app.view(plain["run_id"])["status"] == "completed"
    assert len(built_on) == 2 and built_on[0].name.startswith(CHECK_THREAD_PREFIX) and built_on[1] is loop_thread


@watches_the_app_in_process
def test_a_requests_schema_is_checked_off_the_event_loop(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checking a client's output schema takes up to ~0.15 s (64,000 characters): `POST /v1/responses` parses and
    checks its request on the threads kept for such checks (`check_threads`), refused or not, and the loop serves."""
    requests = app.app_module("http_api.openai_responses.requests")
    checked_on: list[threading.Thread] = []
    check = requests.check_output_schema

    def spy(schema: dict[str, Any]) -> None:
        checked_on.append(threading.current_thread())
        check(schema)

    monkeypatch.setattr(requests, "check_output_schema", spy)
    model.set_script(Script.of('{"verdict": "yes"}'))
    accepted = create(app, object_with("string", key="type"))
    assert accepted.status_code == 200 and accepted.json()["status"] == "completed", accepted.text
    refused = create(app, object_with("https://example.invalid/schema.json"))
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "text.format.schema", refused.text
    assert len(checked_on) == 2 and all(t.name.startswith(CHECK_THREAD_PREFIX) for t in checked_on), checked_on


def list_schemas(server: McpServerProcess, schemas: dict[str, Any]) -> None:
    (server.state / "schemas.json").write_text(json.dumps(schemas))


def test_an_mcp_tool_whose_schema_needs_a_remote_document_is_left_out_at_discovery(
    mcp_app: InProcessApp,
    model: ScriptedModelServer,
    mcp_server: McpServerProcess,
    recording: RecordingServer,
    silent: SilentServer,
    local_file: str,
) -> None:
    """The run goes on with the server's other tools; the tool is never offered and nothing is fetched."""
    for ref in (recording.url(), silent.url(), local_file):
        list_schemas(mcp_server, {"transfer": object_with(ref)})
        model.set_script(Script.of("Done."))
        started = mcp_app.start(agent="mcp_helper", input="pay")
        mcp_app.settle()
        view = mcp_app.view(started["run_id"])
        assert view["status"] == "completed", view
        offered = model.log.requests[-1].tool_names
        assert "transfer" not in offered and "record" in offered, offered
        assert FETCHED_MARKER not in json.dumps(view)
    assert recording.requests == [] and silent.accepted == 0


def test_edited_arguments_are_checked_on_local_refs_without_a_fetch(
    mcp_app: InProcessApp, model: ScriptedModelServer, mcp_server: McpServerProcess, recording: RecordingServer
) -> None:
    schema = {
        "$id": recording.url("/transfer.json"),  # a base URI on a live server: still nothing is fetched
        "type": "object",
        "$defs": {"amount": {"type": "integer", "minimum": 1, "maximum": 1000}},
        "properties": {"amount": {"$ref": "#/$defs/amount"}, "to": {"type": "string"}},
        "required": ["amount", "to"],
    }
    list_schemas(mcp_server, {"transfer": schema})
    model.set_script(Script.of(Reply.call("transfer", {"amount": 5, "to": "bob"}), "Sent."))
    view = mcp_app.start_until_approval(agent="mcp_helper")
    [approval_id] = pending_ids(view)
    refused = mcp_app.decide(view["run_id"], approval_id, "approve", arguments={"amount": 5000, "to": "bob"})
    assert refused.status_code == 422 and "maximum" in refused.json()["detail"], refused.text
    accepted = mcp_app.decide(view["run_id"], approval_id, "approve", arguments={"amount": 7, "to": "eve"})
    assert accepted.status_code == 202, accepted.text
    mcp_app.settle()
    assert [c["arguments"] for c in mcp_server.calls("transfer")] == [{"amount": 7, "to": "eve"}]
    assert recording.requests == []


def test_a_broken_local_ref_in_an_mcp_schema_is_a_tool_error_not_a_crash(
    mcp_app: InProcessApp, model: ScriptedModelServer, mcp_server: McpServerProcess
) -> None:
    list_schemas(mcp_server, {"transfer": {"type": "object", "properties": {"to": {"$ref": "#/$defs/missing"}}}})
    model.set_script(Script.of(Reply.call("transfer", {"amount": 5, "to": "bob"}), "Could not."))
    started = mcp_app.start(agent="mcp_helper", input="pay")
    mcp_app.settle()
    assert mcp_app.view(started["run_id"])["status"] == "completed"
    [result] = [m["content"] for m in model.log.requests[-1].messages if m["role"] == "tool"]
    assert "cannot check its arguments" in result and "/$defs/missing" in result, result
    assert mcp_server.calls("transfer") == []


async def test_a_refused_schema_leaves_out_that_tool_of_a_required_or_optional_server(
    mcp_server: McpServerProcess, recording: RecordingServer
) -> None:
    """Only the tool is left out (named with its server and why); the server's other tools stay, whether the server
    is required or not."""
    from agent_runtime.mcp import McpServer
    from agent_runtime.mcp.discovery import discover_tools

    list_schemas(mcp_server, {"transfer": object_with(recording.url())})
    tools = ["transfer", "record"]
    for required in (True, False):
        server = McpServer(name="bad", url=mcp_server.url, required=required, attempts=1, allowed_tools=tools)
        discovered = await discover_tools([server])
        assert discovered.skipped_servers == [] and discovered.names() == ["record"]
        [skipped] = discovered.skipped_tools
        assert (skipped.server, skipped.tool) == ("bad", "transfer") and recording.url() in skipped.reason
    assert recording.requests == []


async def test_a_server_whose_every_allowed_tool_is_refused_counts_as_one_that_cannot_be_listed(
    mcp_server: McpServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """Required: discovery fails naming the server, the tool and why (the run would otherwise go on without any of
    its tools). Optional: skipped with the warning of a skipped server; the left-out tool is still reported."""
    from agent_runtime.mcp import McpServer
    from agent_runtime.mcp.discovery import McpDiscoveryError, discover_tools

    list_schemas(mcp_server, {"transfer": object_with("https://example.invalid/t.json")})
    server = McpServer(name="bad", url=mcp_server.url, attempts=1, allowed_tools=["transfer"])
    with pytest.raises(McpDiscoveryError) as failed:
        await discover_tools([server])
    assert str(failed.value).startswith(
        "MCP server 'bad' (no_usable_tools): none of the tools it allows can be offered: 1 left out"
    )
    assert "'transfer': its input schema is refused" in str(failed.value), failed.value
    with caplog.at_level("WARNING", logger="agent_runtime.mcp.discovery"):
        optional = await discover_tools([server.model_copy(update={"required": False})])
    assert [(s.server, s.code) for s in optional.skipped_servers] == [("bad", "no_usable_tools")]
    assert optional.tools == []
    assert [(s.server, s.tool) for s in optional.skipped_tools] == [("bad", "transfer")]
    skipped_warning = "MCP server 'bad' skipped for this run (no_usable_tools): none of"
    assert any(r.getMessage().startswith(skipped_warning) for r in caplog.records)
