"""A workflow is one trace: `workflow {name}` at its root, a `workflow_step {step}` span per finished step, and the
agent runs its steps start (`invoke_agent`, with their `chat` spans) under their step's span."""

from __future__ import annotations

from collections import Counter

from workflow_helpers import decide, settle, start, view

from telemetry.testing import telemetry_sink


def test_a_workflow_with_agent_steps_and_a_gate_is_one_trace(host, model) -> None:
    sink = telemetry_sink()
    sink.clear()
    run_id = start(host, "review_pipeline", {"topic": "durable agents"})["run_id"]
    settle(host)
    [gate] = view(host, run_id)["pending_approvals"]
    decide(host, run_id, gate["approval_id"], **{"x-ms-client-principal-name": "ed@example.com"})
    settle(host)
    finished = view(host, run_id)
    assert finished["status"] == "completed"

    spans = sink.spans()
    assert len({s.context.trace_id for s in spans}) == 1
    by_id = {s.context.span_id: s for s in spans}
    [root] = [s for s in spans if s.name == "workflow review_pipeline"]
    assert root.parent is None and root.attributes["workflow.status"] == "completed"
    steps = [s for s in spans if s.name.startswith("workflow_step ")]
    assert [s.attributes["workflow.step.id"] for s in sorted(steps, key=lambda s: s.end_time)] == [
        entry["step"] for entry in finished["steps"]
    ]
    assert all(s.parent.span_id == root.context.span_id for s in steps)
    sign_off = next(s for s in steps if s.attributes["workflow.step.id"] == "sign_off")
    assert sign_off.attributes["workflow.step.kind"] == "approval"
    runs = [s for s in spans if s.name.startswith("invoke_agent ")]
    agent_steps = {entry["step"] for entry in finished["steps"] if entry["kind"] == "agent"}
    assert {by_id[r.parent.span_id].attributes["workflow.step.id"] for r in runs} == agent_steps
    for run in runs:  # an agent step's span covers its run
        step = by_id[run.parent.span_id]
        assert step.start_time <= run.start_time and run.end_time <= step.end_time
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert chats and all(by_id[c.parent.span_id].name.startswith("invoke_agent ") for c in chats)
    assert Counter(s.name.split(" ")[0] for s in spans)["invoke_agent"] == len(agent_steps)
