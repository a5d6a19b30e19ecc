"""`GET /api/runs/{run_id}/transcript` on both stores: what a run did, replayed green, then red after a change."""

from __future__ import annotations

import pytest
from e2e_harness import InProcessApp

from scripted_model import Fault, Match, Reply, Rule, Script, ScriptedModelServer

TRANSFER = {"account": "GB1234", "amount": 50}
SCRIPT = Script(rules=[
    Rule(match=Match(last_tool_name="transfer"), reply=Reply.say("Transferred; key sk-live-abcdefghijklmnop.")),
    Rule(match=Match(last_tool_name="lookup"), reply=Reply.call("transfer", TRANSFER)),
    Rule(match=Match(last_user="pay"), reply=Reply.call("lookup", {"key": "GB1234"})),
])


def paid_run(app: InProcessApp, model: ScriptedModelServer) -> dict:
    model.set_script(SCRIPT)
    view = app.start_until_approval(input="pay GB1234 50 euros")
    approval = view["pending_approvals"][0]["approval_id"]
    edited = {**TRANSFER, "amount": 40}
    assert app.decide(view["run_id"], approval, "approve", arguments=edited, reason="only 40").status_code == 202
    app.settle()
    assert app.view(view["run_id"])["status"] == "completed"
    return view


def test_a_transcript_holds_every_model_call_tool_call_and_decision(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    view = paid_run(app, model)
    transcript = app.http.get(f"/api/runs/{view['run_id']}/transcript")
    assert transcript.status_code == 200, transcript.text
    body = transcript.json()
    assert body["format"] == "durable-agents-transcript/1" and body["run_id"] == view["run_id"]
    assert body["agent"]["name"] == "helper" and len(body["agent"]["digest"]) == 64
    assert [c["iteration"] for c in body["model_calls"]] == [1, 2, 3]
    first = body["model_calls"][0]["request"]
    assert first["messages"][0] == {"role": "system", "content": "You are a test agent."}
    assert first["messages"][-1] == {"role": "user", "content": "pay GB1234 50 euros"}
    assert {t["function"]["name"] for t in first["tools"]} >= {"lookup", "transfer"}
    assert [(c["name"], c["error"]) for c in body["tool_calls"]] == [("lookup", None), ("transfer", None)]
    [decision] = body["approvals"]
    assert decision["status"] == "approved" and decision["reason"] == "only 40"
    assert decision["edited_arguments"] == {"account": "GB1234", "amount": 40}
    assert body["output"]["text"] == "Transferred; key ***."  # redacted as telemetry redacts keys
    assert "sk-live" not in transcript.text


def test_an_exported_run_replays_green_and_red_after_an_instruction_change(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    from fixture_agents.agents import helper

    from agent_testing import TranscriptMismatch, replay

    view = paid_run(app, model)
    transcript = app.http.get(f"/api/runs/{view['run_id']}/transcript").json()
    replayed = replay(transcript, helper)
    assert replayed.result.status == "completed" and len(replayed.requests) == 3
    with pytest.raises(TranscriptMismatch, match="You are a careful test agent"):
        replay(transcript, helper.model_copy(update={"instructions": "You are a careful test agent."}))


def test_a_failed_run_has_a_transcript_up_to_its_failure(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script(rules=[Rule(reply=Reply.fail(Fault(status=400, message="bad request")))]))
    started = app.start(input="anything")
    app.settle()
    assert app.view(started["run_id"])["status"] == "failed"
    body = app.http.get(f"/api/runs/{started['run_id']}/transcript").json()
    assert body["status"] == "failed" and body["model_calls"] == [] and len(body["input"]) == 1
