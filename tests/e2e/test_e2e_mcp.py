"""MCP tools in durable runs, end to end: the app on devhost, a real MCP server (`mcp_test_server.py`, built with
the `mcp` package) on a loopback port in a child process, and over stdio, the scripted model calling its tools.

Proves: discovery once per run, recorded with the run (the model sees MCP tools as function tools, `server__tool`
on a name collision); a call with its idempotency key in `_meta` and a secret header from an app setting; approval
required / rejected / edited (edited arguments failing the server's input schema -> 422); a server crash between
two calls (the call is retried, the server's effect ledger sees one effect); the tool list changing mid-run (the run
keeps its list); `isError` and a server that is down reach the model as tool errors; a required server that is down
at the start fails the run; the list survives continue-as-new (no second discovery), a SIGKILL of the host and a
redelivered discovery activity.
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from e2e_harness import PROGRESS_TIMEOUT_S, AppClient, InProcessApp, completed_activities, pending_ids
from e2e_settings import E2E_DIR, REPO_ROOT, app_settings
from mcp_process import McpServerProcess, server_calls, server_effects

from devhost.engine.api import EngineOptions, FaultPlan
from devhost.testing import InProcessHost, SubprocessHost
from scripted_model import Reply, Script, ScriptedModelServer

API_KEY = "e2e-mcp-secret-4711"
MCP_TOOLS = ["tools__echo", "record", "transfer", "fail", "picture"]  # `echo` is the agent's Python tool


@pytest.fixture
def mcp_server(tmp_path: Path) -> Iterator[McpServerProcess]:
    """The MCP server on a free loopback port, brought back by a supervisor whenever it dies."""
    server = McpServerProcess(tmp_path / "mcp-http", supervise=True).start()
    yield server
    server.stop()


@pytest.fixture
def mcp_app(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], mcp_server: McpServerProcess, tmp_path: Path
) -> Iterator[InProcessApp]:
    settings = {
        "AGENTS_PACKAGE": "fixture_mcp_agents",
        "WORKFLOWS_PACKAGE": "none",
        "E2E_MCP_URL": mcp_server.url,
        "E2E_MCP_KEY": API_KEY,
        "E2E_MCP_STATE": str(tmp_path / "mcp-stdio"),
    }
    with app_with(**settings) as app:
        yield app


def tool_messages(model: ScriptedModelServer, request: int = -1) -> list[str]:
    return [m["content"] for m in model.log.requests[request].messages if m["role"] == "tool"]


def run_record(app: InProcessApp, run_id: str) -> Any:
    return app.store_call(lambda store: store.get_run(run_id))


def activity_names(app: InProcessApp, run_id: str) -> list[str]:
    return completed_activities(app.history(run_id))


def test_discovered_tools_are_recorded_and_a_call_carries_its_idempotency_key(
    mcp_app: InProcessApp, model: ScriptedModelServer, mcp_server: McpServerProcess
) -> None:
    model.set_script(Script.of(Reply.call("record", {"item": "apple"}), Reply.call("echo", {"text": "x"}), "Done."))
    started = mcp_app.start(agent="mcp_helper", input="record an apple")
    mcp_app.settle()
    view = mcp_app.view(started["run_id"])
    assert (view["status"], view["output"]["text"]) == ("completed", "Done.")

    # The model saw the MCP tools as ordinary function tools, the colliding one namespaced, with the server's schema.
    first = model.log.requests[0]
    assert first.tool_names == ["echo", *MCP_TOOLS]
    record_tool = next(t for t in first.body["tools"] if t["function"]["name"] == "record")
    assert record_tool["function"]["parameters"]["required"] == ["item"]
    # The list is the run's: recorded in its store record, discovered by one activity.
    record = run_record(mcp_app, started["run_id"])
    assert [t["name"] for t in record.discovered_tools] == MCP_TOOLS
    assert activity_names(mcp_app, started["run_id"]).count("discover_tools") == 1

    [call] = mcp_server.calls("record")
    assert call["idempotency_key"] and call["idempotency_key"].startswith(started["run_id"])
    assert call["headers"] == {"x-api-key": API_KEY, "x-team": "e2e"}  # the secret came from an app setting
    assert list(mcp_server.effects()) == [call["idempotency_key"]]
    assert tool_messages(model, 1) == ["recorded apple"]
    assert tool_messages(model, 2)[-1] == "python echo: x"  # the agent's own `echo` is still the Python tool
    # The result is stored in the session (not in history); the secret is nowhere in what the API shows.
    messages = mcp_app.session_messages(view["session_id"])
    results = [c for m in messages for c in m["contents"] if c["type"] == "function_result"]
    assert results[0]["result"] == "recorded apple"
    assert API_KEY not in json.dumps(messages) + json.dumps(view) + json.dumps(mcp_app.history(started["run_id"]))


def test_approval_required_then_approved_runs_the_call_once(
    mcp_app: InProcessApp, model: ScriptedModelServer, mcp_server: McpServerProcess
) -> None:
    model.set_script(Script.of(Reply.call("transfer", {"amount": 5, "to": "bob"}), "Sent."))
    view = mcp_app.start_until_approval(agent="mcp_helper")
    [pending] = view["pending_approvals"]
    assert (pending["tool"], pending["arguments"]) == ("transfer", {"amount": 5, "to": "bob"})
    assert mcp_server.calls("transfer") == []  # nothing reaches the server before a person says so

    assert mcp_app.decide(view["run_id"], pending["approval_id"], "approve").status_code == 202
    mcp_app.settle()
    assert mcp_app.view(view["run_id"])["status"] == "completed"
    assert [c["arguments"] for c in mcp_server.calls("transfer")] == [{"amount": 5, "to": "bob"}]
    assert tool_messages(model) == ["transferred 5 to bob"]


def test_rejected_call_never_reaches_the_server(
    mcp_app: InProcessApp, model: ScriptedModelServer, mcp_server: McpServerProcess
) -> None:
    model.set_script(Script.of(Reply.call("transfer", {"amount": 5, "to": "bob"}), "Not sent."))
    view = mcp_app.start_until_approval(agent="mcp_helper")
    [approval_id] = pending_ids(view)
    assert mcp_app.decide(view["run_id"], approval_id, "reject", reason="no").status_code == 202
    mcp_app.settle()
    assert mcp_app.view(view["run_id"])["status"] == "completed"
    assert mcp_server.calls("transfer") == []
    assert "denied" in tool_messages(model)[0]


def test_edited_arguments_are_checked_against_the_mcp_schema(
    mcp_app: InProcessApp, model: ScriptedModelServer, mcp_server: McpServerProcess
) -> None:
    model.set_script(Script.of(Reply.call("transfer", {"amount": 5, "to": "bob"}), "Sent."))
    view = mcp_app.start_until_approval(agent="mcp_helper")
    [approval_id] = pending_ids(view)

    refused = mcp_app.decide(view["run_id"], approval_id, "approve", arguments={"amount": 5000, "to": "bob"})
    assert refused.status_code == 422, refused.text
    problem = refused.json()
    assert (problem["code"], problem["field"]) == ("invalid_arguments", "body.arguments")
    assert "amount" in problem["detail"] and "maximum" in problem["detail"]
    wrong_type = mcp_app.decide(view["run_id"], approval_id, "approve", arguments={"amount": 5})
    assert wrong_type.status_code == 422 and "'to' is a required property" in wrong_type.json()["detail"]

    accepted = mcp_app.decide(view["run_id"], approval_id, "approve", arguments={"amount": 7, "to": "eve"})
    assert accepted.status_code == 202, accepted.text
    mcp_app.settle()
    assert mcp_app.view(view["run_id"])["status"] == "completed"
    assert [c["arguments"] for c in mcp_server.calls("transfer")] == [{"amount": 7, "to": "eve"}]


def test_a_server_crash_between_two_calls_is_retried_without_a_duplicate_effect(
    mcp_app: InProcessApp, model: ScriptedModelServer, mcp_server: McpServerProcess
) -> None:
    # The second call's effect is stored, then the server dies before answering; its supervisor brings it back.
    mcp_server.crash_on_next_record("pear")
    model.set_script(
        Script.of(Reply.call("record", {"item": "apple"}), Reply.call("record", {"item": "pear"}), "Both recorded.")
    )
    started = mcp_app.start(agent="mcp_helper", input="record two")
    mcp_app.settle()
    assert mcp_app.view(started["run_id"])["status"] == "completed"

    apple, *pears = mcp_server.calls("record")
    assert len(pears) == 2, pears  # the lost answer made the client try again ...
    assert pears[0]["idempotency_key"] == pears[1]["idempotency_key"] != apple["idempotency_key"]  # ... same key
    assert pears[0]["pid"] != pears[1]["pid"] and mcp_server.starts == 2  # a new server process answered
    assert server_effects(mcp_server.state) == {
        apple["idempotency_key"]: {"item": "apple"},
        pears[0]["idempotency_key"]: {"item": "pear"},
    }
    assert tool_messages(model) == ["recorded apple", "recorded pear"]


def test_the_run_keeps_its_tool_list_when_the_server_changes_it(
    mcp_app: InProcessApp, model: ScriptedModelServer, mcp_server: McpServerProcess
) -> None:
    model.set_script(Script.of(Reply.call("transfer", {"amount": 1, "to": "bob"}), "Done.", "Second run."))
    view = mcp_app.start_until_approval(agent="mcp_helper")
    mcp_server.show_tools(["later", "record"])  # a redeployed server: tools gone, a new one
    mcp_app.decide(view["run_id"], pending_ids(view)[0], "approve")
    mcp_app.settle()
    assert mcp_app.view(view["run_id"])["status"] == "completed"
    first, second = model.log.requests
    assert first.tool_names == second.tool_names == ["echo", *MCP_TOOLS]
    assert first.body["tools"] == second.body["tools"]  # same names, same schemas
    assert mcp_server.calls("transfer")  # the recorded tool was still called

    # A new run discovers afresh.
    mcp_app.start(agent="mcp_helper", input="again", session_id=view["session_id"])
    mcp_app.settle()
    assert model.log.last.tool_names == ["echo", "record", "later"]


def test_an_is_error_result_and_a_down_server_are_tool_errors_for_the_model(
    mcp_app: InProcessApp, model: ScriptedModelServer, mcp_server: McpServerProcess
) -> None:
    model.set_script(
        Script.of(
            Reply.call("fail", {"reason": "disk full"}),
            Reply.call("transfer", {"amount": 1, "to": "bob"}),
            "Gave up.",
        )
    )
    view = mcp_app.start_until_approval(agent="mcp_fragile")
    assert tool_messages(model) == [
        "Error: Tool 'fail' reported an error: Error executing tool fail: cannot do that: disk full"
    ]
    mcp_server.stop()  # the server goes away while the run waits for approval
    mcp_app.decide(view["run_id"], pending_ids(view)[0], "approve")
    mcp_app.settle()
    final = mcp_app.view(view["run_id"])
    assert (final["status"], final["output"]["text"]) == ("completed", "Gave up.")
    down = tool_messages(model)[-1]
    assert down == "Error: MCP server 'tools' is unavailable: calling tool 'transfer' failed 2 times (ConnectError)."
    assert "127.0.0.1" not in down  # the URL (it may carry secrets) is not told to the model


def test_a_required_server_down_at_the_start_fails_the_run(
    mcp_app: InProcessApp, model: ScriptedModelServer, mcp_server: McpServerProcess
) -> None:
    mcp_server.stop()
    model.set_script(Script.of("never asked"))
    started = mcp_app.start(agent="mcp_fragile", input="hi")
    mcp_app.settle()
    view = mcp_app.view(started["run_id"])
    assert view["status"] == "failed"
    assert view["error"]["code"] == "tool_discovery_failed" and "'tools'" in view["error"]["message"]
    assert len(model.log) == 0
    assert run_record(mcp_app, started["run_id"]).discovered_tools is None


REMOTE_REF = "https://example.invalid/transfer.json"  # refused at discovery (never fetched)


def refuse_transfer(server: McpServerProcess, ref: str = REMOTE_REF) -> None:
    """The server lists `transfer` with an input schema the app refuses: a `$ref` to a remote document."""
    schema = {"type": "object", "properties": {"to": {"$ref": ref}}}
    (server.state / "schemas.json").write_text(json.dumps({"transfer": schema}))


def settled_run(app: InProcessApp, model: ScriptedModelServer, agent: str, script: Script) -> tuple[str, Any]:
    """A run of `agent` ("pay") to its end, the model answering `script`: its id and view."""
    model.set_script(script)
    started = app.start(agent=agent, input="pay")
    app.settle()
    return started["run_id"], app.view(started["run_id"])


def test_the_run_view_names_the_tools_left_out_and_why(
    mcp_app: InProcessApp, model: ScriptedModelServer, mcp_server: McpServerProcess
) -> None:
    """Before, a left-out tool showed only in the host's logs; the run's view (and record) now name it, why, with
    what the server wrote cut to 300 characters and at most 50 tools (here 60 are left out)."""
    long_ref = f"https://example.invalid/{'x' * 400}.json"
    refuse_transfer(mcp_server, long_ref)
    (mcp_server.state / "copies.json").write_text(json.dumps({"transfer": 59}))  # transfer_1 ... transfer_59
    run_id, view = settled_run(mcp_app, model, "mcp_helper", Script.of("Done."))
    assert view["status"] == "completed", view
    assert model.log.requests[0].tool_names == ["echo", *(t for t in MCP_TOOLS if t != "transfer")]
    skipped = view["skipped_tools"]
    assert [(s["server"], s["tool"]) for s in skipped] == [
        ("tools", name) for name in ["transfer", *(f"transfer_{i}" for i in range(1, 50))]
    ]
    assert all(s["reason"].startswith("is refused: ") and len(s["reason"]) == 300 for s in skipped), skipped[0]
    assert long_ref[:100] in skipped[0]["reason"]
    assert run_record(mcp_app, run_id).skipped_tools == skipped
    assert API_KEY not in json.dumps(view)


def test_a_required_server_whose_every_allowed_tool_is_left_out_fails_the_run(
    mcp_app: InProcessApp, model: ScriptedModelServer, mcp_server: McpServerProcess
) -> None:
    """Before, the run went on without any of the server's tools (as if it had none); now it fails as when the
    server is down, naming the server and the tool."""
    refuse_transfer(mcp_server)
    run_id, view = settled_run(mcp_app, model, "mcp_transfer_only", Script.of("never asked"))
    assert view["status"] == "failed", view
    message = view["error"]["message"]
    assert view["error"]["code"] == "tool_discovery_failed", view
    assert message.startswith("MCP server 'tools' (no_usable_tools): none of the tools it allows can be offered")
    assert "'transfer'" in message and REMOTE_REF in message, message
    assert len(model.log) == 0 and run_record(mcp_app, run_id).discovered_tools is None


def test_an_optional_server_whose_every_allowed_tool_is_left_out_is_skipped(
    mcp_app: InProcessApp, model: ScriptedModelServer, mcp_server: McpServerProcess
) -> None:
    """The run goes on without the server (its warning: `test_e2e_schema_refs`), and its view says why."""
    refuse_transfer(mcp_server)
    _, view = settled_run(mcp_app, model, "mcp_transfer_optional", Script.of("Done."))
    assert view["status"] == "completed", view
    assert model.log.requests[0].tool_names == ["echo"]
    assert [(s["server"], s["tool"]) for s in view["skipped_tools"]] == [("tools", "transfer")]
    assert [(s["server"], s["code"]) for s in view["skipped_servers"]] == [("tools", "no_usable_tools")]


def test_stdio_server_discovery_and_calls(mcp_app: InProcessApp, model: ScriptedModelServer, tmp_path: Path) -> None:
    model.set_script(Script.of(Reply.call("echo", {"text": "hi"}), Reply.call("record", {"item": "fig"}), "Ok."))
    started = mcp_app.start(agent="mcp_stdio", input="go")
    mcp_app.settle()
    assert mcp_app.view(started["run_id"])["status"] == "completed"
    assert model.log.requests[0].tool_names == ["echo", "record"]  # allowed_tools
    assert tool_messages(model) == ["echo: hi", "recorded fig"]
    state = tmp_path / "mcp-stdio"
    [call] = server_calls(state, "record")
    assert call["idempotency_key"].startswith(started["run_id"]) and call["headers"] == {}
    assert list(server_effects(state).values()) == [{"item": "fig"}]


def test_the_list_survives_continue_as_new_without_a_second_discovery(
    mcp_app: InProcessApp, model: ScriptedModelServer, mcp_server: McpServerProcess
) -> None:
    python_echoes = [Reply.call("echo", {"text": str(i)}) for i in range(8)]
    model.set_script(
        Script.of(
            Reply.call("transfer", {"amount": 1, "to": "bob"}),
            *python_echoes,
            Reply.call("tools__echo", {"text": "after"}),  # gone from the server's list by then
            "Done.",
        )
    )
    view = mcp_app.start_until_approval(agent="mcp_helper")
    mcp_server.show_tools(["later", "record"])
    mcp_app.decide(view["run_id"], pending_ids(view)[0], "approve")
    mcp_app.settle()
    assert mcp_app.view(view["run_id"])["status"] == "completed"

    requests = model.log.requests
    assert len(requests) == 11
    assert all(r.body["tools"] == requests[0].body["tools"] for r in requests)
    history = mcp_app.history(view["run_id"])
    first_input = json.loads(json.loads(history["historyEvents"][0]["Input"]))
    assert first_input["generation"] >= 1  # this execution was continued as new ...
    assert "discover_tools" not in activity_names(mcp_app, view["run_id"])  # ... and did not discover again
    assert [c["arguments"] for c in mcp_server.calls("echo")] == [{"text": "after"}]
    assert tool_messages(model)[-1] == "echo: after"


@pytest.mark.slow
@pytest.mark.parametrize("store_backend", ["sqlite"])
def test_killed_host_resumes_with_the_recorded_list(
    tmp_path: Path, model: ScriptedModelServer, mcp_server: McpServerProcess, store_settings: dict[str, str]
) -> None:
    env = app_settings(
        model.base_url,
        **{**store_settings, "SESSION_STORE_PATH": str(tmp_path / "sessions.sqlite3")},
        AGENTS_PACKAGE="fixture_mcp_agents",
        WORKFLOWS_PACKAGE="none",
        E2E_MCP_URL=mcp_server.url,
        E2E_MCP_KEY=API_KEY,
        PYTHONPATH=str(E2E_DIR),
    )
    host = SubprocessHost(REPO_ROOT, state_path=tmp_path / "devhost.sqlite3", env=env)
    host.start()
    try:
        api = AppClient(host.client)
        model.set_script(Script.of(Reply.call("transfer", {"amount": 3, "to": "eve"}), "Paid."))
        started = api.start(agent="mcp_helper", input="pay eve")
        view = api.wait_for(started["run_id"], {"requires_action"})
        mcp_server.show_tools(["later"])  # the server changes while the host is down
        host.kill()
        host.start()
        assert api.decide(view["run_id"], pending_ids(view)[0], "approve").status_code == 202
        final = api.wait_for(started["run_id"], {"completed", "failed"})
        assert final["status"] == "completed", final
        first, second = model.log.requests
        assert first.body["tools"] == second.body["tools"] and "transfer" in second.tool_names
        assert [c["arguments"] for c in mcp_server.calls("transfer")] == [{"amount": 3, "to": "eve"}]
    finally:
        host.close()


def test_the_shipped_example_agent_is_served_only_with_its_setting(
    app_with: Callable[..., AbstractContextManager[InProcessApp]],
    model: ScriptedModelServer,
    mcp_server: McpServerProcess,
) -> None:
    with app_with(AGENTS_PACKAGE="served_agents") as app:
        assert app.http.get("/api/agents/mcp_assistant").status_code == 404  # offline by default
    with app_with(AGENTS_PACKAGE="served_agents", MCP_EXAMPLE_URL=mcp_server.url,
                  MCP_EXAMPLE_TRUSTED_TOOLS="echo") as app:
        agent = app.http.get("/api/agents/mcp_assistant").json()
        assert agent["mcp_servers"] == [
            {
                "name": "example",
                "transport": "streamable_http",
                "allowed_tools": None,
                "approval": {"*": "always", "echo": "never"},
            }
        ]
        assert mcp_server.url not in json.dumps(agent)
        model.set_script(
            Script.of(Reply.call("echo", {"text": "hi"}), Reply.call("transfer", {"amount": 2, "to": "ann"}), "Ok.")
        )
        view = app.start_until_approval(agent="mcp_assistant", input="go")
        assert [p["tool"] for p in view["pending_approvals"]] == ["transfer"]  # echo is trusted, transfer is not
        app.decide(view["run_id"], pending_ids(view)[0], "approve")
        app.settle()
        assert app.view(view["run_id"])["status"] == "completed"
        assert [c["tool"] for c in mcp_server.calls()] == ["echo", "transfer"]


@pytest.mark.parametrize("store_backend", ["sqlite"])
def test_a_redelivered_discovery_keeps_the_first_list(
    tmp_path: Path, model: ScriptedModelServer, mcp_server: McpServerProcess, store_settings: dict[str, str]
) -> None:
    """The host dies after `discover_tools` ran (its list recorded) but before its completion was committed; the
    server then changes its list. The reopened host delivers the activity again: the run keeps the first list."""
    env = app_settings(
        model.base_url,
        **{**store_settings, "SESSION_STORE_PATH": str(tmp_path / "sessions.sqlite3")},
        AGENTS_PACKAGE="fixture_mcp_agents",
        WORKFLOWS_PACKAGE="none",
        E2E_MCP_URL=mcp_server.url,
        E2E_MCP_KEY=API_KEY,
    )
    state = tmp_path / "engine.sqlite3"
    model.set_script(Script.of(Reply.call("record", {"item": "once"}), "Done."))
    faults = FaultPlan(crash_at={"activity_before_commit"}, crash_after=1)  # the first activity: discover_tools
    crashing = InProcessHost(REPO_ROOT, state_path=state, env=env, options=EngineOptions(faults=faults)).start()
    try:
        started = AppClient(crashing.client).start(agent="mcp_helper", input="record once")
        deadline = time.monotonic() + PROGRESS_TIMEOUT_S
        while not crashing.engine.crashed:
            assert time.monotonic() < deadline, "the engine never reached the crash point"
            time.sleep(0.02)  # the crash happens on the host's thread; a bounded poll of its flag
        assert len(model.log) == 0
    finally:
        # (imported here when the app runs in Azure's worker: the test process then has not imported it yet)
        importlib.import_module("agent_runs.services").RunServices.reset()
        crashing.stop()
    mcp_server.show_tools(["later"])

    with InProcessHost(REPO_ROOT, state_path=state, env=env) as reopened:
        app = InProcessApp(reopened, "sqlite")
        try:
            app.settle()
            view = app.view(started["run_id"])
            assert view["status"] == "completed", view
            assert model.log.requests[0].tool_names == ["echo", *MCP_TOOLS]
            assert [c["arguments"] for c in mcp_server.calls("record")] == [{"item": "once"}]
        finally:
            app.services().reset()


@pytest.mark.parametrize(
    ("chars", "images", "refuse"),
    [(2_500_000, 0, False), (0, 5, False), (2_500_000, 0, True)],
    ids=["text", "images", "protocol-error"],
)
def test_a_result_larger_than_a_session_item_reaches_the_model_cut_to_fit(
    mcp_app: InProcessApp,
    model: ScriptedModelServer,
    mcp_server: McpServerProcess,
    chars: int,
    images: int,
    refuse: bool,
) -> None:
    """A server may answer up to `MAX_ANSWER_BYTES` (4 MiB), twice what one stored message holds (Cosmos: 2 MB an
    item): a 2.5 MB text, five images each within the inline bound, or a JSON-RPC error with a 2.5 MB message, are cut
    to fit, with a note saying so, and the run goes on, instead of the step failing to store its result on every
    retry."""
    mcp_server.show_tools(["echo", "big"])
    arguments = {"chars": chars, "images": images, "refuse": refuse}
    model.set_script(Script.of(Reply.call("big", arguments), "Too much."))
    started = mcp_app.start(agent="mcp_helper", input="get it all")
    mcp_app.settle()
    view = mcp_app.view(started["run_id"])
    assert view["status"] == "completed", view
    assert view["output"]["text"] == "Too much."
    [told] = tool_messages(model)
    assert len(told.encode()) < 1_100_000 and "omitted" in told
    messages = mcp_app.session_messages(view["session_id"])
    [result] = [c for m in messages for c in m["contents"] if c["type"] == "function_result"]
    assert len(json.dumps(result, ensure_ascii=False).encode()) < 1_100_000


def test_a_listing_larger_than_the_run_record_holds_fails_the_run_with_a_reason(
    mcp_app: InProcessApp, model: ScriptedModelServer, mcp_server: McpServerProcess
) -> None:
    """Each schema may take 64,000 characters and a run may offer 128 tools, all recorded in the run's store record
    (one item: 2 MB on Cosmos). 41 tools with 60 KB schemas are a 2.5 MB listing, within what the client reads: the
    run fails at once with `tool_discovery_failed` naming the size, instead of the discovery step failing to store
    its list on every retry."""
    padded = {"type": "object", "properties": {"text": {"type": "string", "description": "x" * 60_000}}}
    (mcp_server.state / "schemas.json").write_text(json.dumps({"echo": padded}))
    (mcp_server.state / "copies.json").write_text(json.dumps({"echo": 40}))
    mcp_server.show_tools(["echo"])
    model.set_script(Script.of("never asked"))
    started = mcp_app.start(agent="mcp_helper", input="hi")
    mcp_app.settle()
    view = mcp_app.view(started["run_id"])
    assert view["status"] == "failed", view
    assert view["error"]["code"] == "tool_discovery_failed"
    assert "allowed_tools" in view["error"]["message"], view["error"]
    assert len(model.log) == 0
