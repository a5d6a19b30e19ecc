"""A workflow races events, timers and child runs many times; each race must end on devhost (which replays like the
Functions host: a `task_any` carries only tasks not scheduled before, so a task shared by two races is missing from
the second on the host's side). And an event that arrives while no race is on (it lands on an older, losing waiter)
must still be seen."""

from __future__ import annotations

import json

import httpx
from httpx_sse import connect_sse
from workflow_helpers import child_run, decide, settle, start, step_ids, view
from workflow_scripts import app_env, workflow_host

from agent_runs.contracts import approval_event_name

TERMINAL = {"Completed", "Failed", "Terminated", "Canceled"}
DAY = 86400


def _raise(host, run_id: str, name: str, payload: dict) -> None:
    """An event as the durable client delivers it (used for a stale duplicate the API itself would never send)."""
    host.run(host.engine.raise_event(run_id, name, json.dumps(payload)))


def _cancelled(host, run_id: str) -> None:
    settle(host)
    assert host.get_status(run_id)["runtimeStatus"] in TERMINAL
    assert view(host, run_id)["status"] == "cancelled"


def test_cancel_during_a_signal_wait_after_an_agent_step(host) -> None:
    run_id = start(host, "open_signal_flow", {"topic": "races"})["run_id"]
    settle(host)
    assert view(host, run_id)["pending_signals"] == ["go_ahead"]
    assert host.client.post(f"/api/workflows/runs/{run_id}/cancel").status_code == 202
    _cancelled(host, run_id)


def test_a_run_cancel_on_the_workflow_flags_the_child_of_a_later_step(host) -> None:
    """`/api/runs/{id}/cancel` sends the workflow (not its children) the cancel: the workflow must flag the child of
    its second step, which then stops at its next model call instead of running on."""
    run_id = start(host, "second_step_cancel_flow", {"topic": "races"})["run_id"]
    settle(host)
    [child_id] = view(host, run_id)["active_step"]["child_runs"]
    assert host.client.post(f"/api/runs/{run_id}/cancel").status_code == 202
    settle(host)
    host.advance(DAY + 1)  # the child's approval expires: its next model call sees the flag
    assert child_run(host, child_id, child_id)["status"] == "cancelled"
    _cancelled(host, run_id)
    assert "after" not in step_ids(view(host, run_id))


def test_cancel_during_a_delay_after_a_signal(host) -> None:
    run_id = start(host, "open_signal_flow", {"topic": "races"})["run_id"]
    settle(host)
    sent = host.client.post(f"/api/workflows/runs/{run_id}/signals/go_ahead", json={"payload": {"n": 1}})
    assert sent.status_code == 202
    settle(host)
    assert view(host, run_id)["active_step"]["id"] == "pause"
    assert host.client.post(f"/api/workflows/runs/{run_id}/cancel").status_code == 202
    _cancelled(host, run_id)


def test_the_same_signal_twice_with_a_delay_between(host) -> None:
    run_id = start(host, "open_signal_flow", {"topic": "races"})["run_id"]
    settle(host)
    for n in (1, 2):
        sent = host.client.post(f"/api/workflows/runs/{run_id}/signals/go_ahead", json={"payload": {"n": n}})
        assert sent.status_code == 202
        settle(host)
        host.advance(3600)
    done = view(host, run_id)
    assert done["status"] == "completed", done
    assert done["output"]["second"] == {"n": 2}


def test_a_cancel_right_after_a_signal_is_seen(host) -> None:
    """The signal ends its race and the cancel follows at once: it lands on a waiter of a race already over (the
    host and the SDK hand an event to the latest waiter), and the workflow must still see it."""
    run_id = start(host, "open_signal_flow", {"topic": "races"})["run_id"]
    settle(host)

    async def signal_then_cancel() -> None:
        async with httpx.AsyncClient(base_url=host.base_url, trust_env=False) as client:
            sent = await client.post(f"/api/workflows/runs/{run_id}/signals/go_ahead", json={"payload": {"n": 1}})
            assert sent.status_code == 202
        await host.engine.raise_event(run_id, "cancel", json.dumps({"reason": "right after"}))

    host.run(signal_then_cancel())
    settle(host)
    status = host.get_status(run_id)
    assert status["runtimeStatus"] in TERMINAL and status["customStatus"]["status"] == "cancelled"


def test_a_stale_decision_at_a_gate_then_the_timeout_escalates(host) -> None:
    run_id = start(host, "review_pipeline", {"topic": "stale"})["run_id"]
    settle(host)
    [gate] = view(host, run_id)["pending_approvals"]
    old = f"{run_id}.an_old_gate.approval"
    _raise(host, run_id, approval_event_name(old), {"approval_id": old})  # a duplicate delivery of an old decision
    _raise(host, run_id, "approval", {"approval_id": gate["approval_id"]})  # the shared name of old: nobody listens
    settle(host)
    assert view(host, run_id)["status"] == "requires_action"
    host.advance(DAY + 1)
    [escalated] = view(host, run_id)["pending_approvals"]
    assert escalated["approval_id"] != gate["approval_id"]
    decide(host, run_id, escalated["approval_id"])
    settle(host)
    done = view(host, run_id)
    assert done["status"] == "completed" and done["output"]["published"] is True


def test_cancel_at_the_escalated_gate(host) -> None:
    run_id = start(host, "review_pipeline", {"topic": "escalated cancel"})["run_id"]
    settle(host)
    [gate] = view(host, run_id)["pending_approvals"]
    host.advance(DAY + 1)
    assert len(view(host, run_id)["pending_approvals"]) == 1
    _raise(host, run_id, approval_event_name(gate["approval_id"]), {"approval_id": gate["approval_id"]})  # a late
    # ring of the level that expired
    settle(host)
    assert host.client.post(f"/api/workflows/runs/{run_id}/cancel").status_code == 202
    _cancelled(host, run_id)


def test_a_cancel_whose_event_the_hub_refuses_is_a_503_and_a_poll_delivers_it(model, monkeypatch) -> None:
    """The workflow waits for a signal that has no timeout; its cancel is flagged but the task hub refuses the event:
    the caller is told to send it again (503 `cancel_not_delivered`, not a 500). A client that gives up instead is
    repaired by the next poll of the workflow, as for an agent run (without it the workflow would wait on for good)."""
    with workflow_host(app_env(model, DECISION_REDELIVERY_SECONDS="0")) as host:
        run_id = start(host, "open_signal_flow", {"topic": "races"})["run_id"]
        settle(host)
        assert view(host, run_id)["active_step"]["waiting_for_signal"] == "go_ahead"

        async def unreachable(instance_id: str, name: str, input_json: str | None) -> None:
            raise RuntimeError("the task hub is unreachable")

        with monkeypatch.context() as hub_down:
            hub_down.setattr(host.engine, "raise_event", unreachable)
            refused = host.client.post(f"/api/workflows/runs/{run_id}/cancel")
            assert view(host, run_id)["status"] == "waiting"  # no poll gets through to it either
        assert (refused.status_code, refused.json()["code"]) == (503, "cancel_not_delivered"), refused.text
        settle(host)
        assert view(host, run_id)["status"] == "waiting"  # the hub is back: this poll rings the cancel again
        _cancelled(host, run_id)


def test_a_cancel_whose_event_the_hub_refused_reaches_a_workflow_a_stream_follows(model, monkeypatch) -> None:
    """As above with nobody polling: the page follows the workflow by its stream, which rings its cancel again."""
    with workflow_host(app_env(model, DECISION_REDELIVERY_SECONDS="0", STREAM_PING_SECONDS="60")) as host:
        run_id = start(host, "open_signal_flow", {"topic": "races"})["run_id"]
        settle(host)

        async def unreachable(instance_id: str, name: str, input_json: str | None) -> None:
            raise RuntimeError("the task hub is unreachable")

        with monkeypatch.context() as hub_down:
            hub_down.setattr(host.engine, "raise_event", unreachable)
            refused = host.client.post(f"/api/workflows/runs/{run_id}/cancel")
        assert (refused.status_code, refused.json()["code"]) == (503, "cancel_not_delivered"), refused.text
        settle(host)
        assert host.get_status(run_id)["customStatus"]["status"] == "waiting"

        with connect_sse(host.client, "GET", f"/api/workflows/runs/{run_id}/stream", timeout=30) as source:
            done = [e.json() for e in source.iter_sse() if e.event == "done"]
        assert done[0]["status"] == "cancelled"
        _cancelled(host, run_id)
