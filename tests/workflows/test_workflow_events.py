"""External events of workflows are never lost, duplicated or replayed stale, whatever their timing (issue 10).

Signals: a queue per name in the store, each signal rung by an event name of its own (`signal:<name>:<index>`);
the workflow consumes them in index order, exactly once, including signals sent before a wait, in a burst, and
across continue-as-new (which drops the events an execution had deferred). Gates: each level has its own approval
id and event name (`approval:<approval_id>`); the store decides, so a decision racing the escalation is the
decision, and a duplicate or stale ring changes nothing. All over the real Durable SDK on devhost (virtual clock).
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import httpx
import pytest
from httpx_sse import connect_sse
from workflow_helpers import decide, settle, start, view

from agent_runs.contracts import approval_event_name
from devhost.engine.api import InstanceGoneError

DAY = 86400
QUEUED = 30


def _ring(host, run_id: str, name: str, payload: dict) -> None:
    """An event as the durable client delivers it: a ring the API itself would not send (a duplicate, or one
    placed ahead of its waiter on purpose)."""
    host.run(host.engine.raise_event(run_id, name, json.dumps(payload)))


def _send_signals(host, run_id: str, name: str, payloads: list[dict]) -> list[dict]:
    """POST the signals all at once (concurrently); the answers, each with the index the store gave it."""

    async def burst() -> list[dict]:
        async with httpx.AsyncClient(base_url=host.base_url, trust_env=False, timeout=60) as client:
            responses = await asyncio.gather(
                *(client.post(f"/api/workflows/runs/{run_id}/signals/{name}", json={"payload": p}) for p in payloads)
            )
        assert all(r.status_code == 202 for r in responses), [r.text for r in responses]
        return [r.json() for r in responses]

    return host.run(burst())


def _consumed_in_index_order(host, run_id: str, accepted: list[dict]) -> None:
    """Step item_NN consumed signal NN: each signal exactly once, in the order the store accepted them."""
    done = view(host, run_id)
    assert done["status"] == "completed", done
    by_index = {a["index"]: a for a in accepted}
    assert sorted(by_index) == list(range(1, QUEUED + 1))
    for i in range(1, QUEUED + 1):
        assert done["output"][f"item_{i:02d}"] == by_index[i]["payload_sent"], i
    journal = [e for e in done["steps"] if e["kind"] == "signal"]
    assert [e["output"]["index"] for e in journal] == list(range(1, QUEUED + 1))
    assert [e["output"]["signal_id"] for e in journal] == [by_index[i]["signal_id"] for i in range(1, QUEUED + 1)]


def _tagged(answers: list[dict], payloads: list[dict]) -> list[dict]:
    return [{**answer, "payload_sent": payload} for answer, payload in zip(answers, payloads, strict=True)]


@pytest.mark.parametrize("store", ["sqlite", pytest.param("cosmos", marks=pytest.mark.cosmos)])
def test_a_burst_of_same_name_signals_is_delivered_exactly_once_in_order(request, store: str) -> None:
    """20 concurrent POSTs while the workflow waits, then 10 more: 30 steps consume them one each, in the order the
    store numbered them (the workflow continues as new after 24 steps, with signals still queued). On Cosmos the
    concurrent appends race for each index (create-if-absent, 409, next index)."""
    host = request.getfixturevalue("host" if store == "sqlite" else "cosmos_host")
    run_id = start(host, "signal_queue_flow", {})["run_id"]
    settle(host)
    host.advance(61)
    assert view(host, run_id)["pending_signals"] == ["item"]
    burst = [{"n": n} for n in range(20)]
    accepted = _tagged(_send_signals(host, run_id, "item", burst), burst)
    settle(host)
    assert view(host, run_id)["pending_signals"] == ["item"]  # 20 consumed, waiting for the 21st
    more = [{"n": n} for n in range(20, 30)]
    accepted += _tagged(_send_signals(host, run_id, "item", more), more)
    settle(host)
    _consumed_in_index_order(host, run_id, accepted)
    assert host.get_status(run_id)["customStatus"]["generation"] >= 1


def test_signals_sent_before_any_wait_survive_continue_as_new(host) -> None:
    """All 30 signals come during the pause: every ring is deferred (no waiter yet); the first execution consumes
    23 and continues as new, which drops the deferred rings of the other 7: they are read from the store."""
    run_id = start(host, "signal_queue_flow", {})["run_id"]
    settle(host)
    payloads = [{"n": n} for n in range(QUEUED)]
    accepted = _tagged(_send_signals(host, run_id, "item", payloads), payloads)
    settle(host)
    host.advance(61)
    settle(host)
    _consumed_in_index_order(host, run_id, accepted)


def test_signals_sent_while_a_monitor_runs_reach_the_waits_after_it(host) -> None:
    """Both signals are rung in the monitor's first execution (deferred: nobody waits for them yet), which then
    continues as new (dropping them): the waits after the monitor find them in the store, in order."""
    run_id = start(host, "monitor_then_signals_flow", {})["run_id"]
    settle(host)
    host.advance(3600)
    sent = [_send_signals(host, run_id, "go", [{"which": "first"}])[0]]
    host.advance(3600)
    sent += _send_signals(host, run_id, "go", [{"which": "second"}])
    for _ in range(31):  # the monitor runs on to its deadline, continuing as new on the way
        host.advance(3600)
    settle(host)
    assert [s["index"] for s in sent] == [1, 2]
    done = view(host, run_id)
    assert done["status"] == "completed", done
    assert done["output"] == {"first": {"which": "first"}, "second": {"which": "second"}}
    assert host.get_status(run_id)["customStatus"]["generation"] >= 1


def test_a_signal_whose_ring_was_lost_is_taken_when_the_next_one_rings(host) -> None:
    """Signal 1 is stored but its ring never comes (the API died in between: stored directly here); the ring of
    signal 2 tells the waiting workflow that signal 1 is there: both are consumed, in order."""
    run_id = start(host, "monitor_then_signals_flow", {})["run_id"]
    settle(host)
    for _ in range(31):
        host.advance(3600)
    settle(host)
    assert view(host, run_id)["pending_signals"] == ["go"]
    from workflow_runtime.contracts import control_session_id

    host.run(_store(host).append_signal(control_session_id(run_id), "go", "lost-ring", {"which": "first"}))
    settle(host)
    assert view(host, run_id)["pending_signals"] == ["go"]  # nothing rang
    [second] = _send_signals(host, run_id, "go", [{"which": "second"}])
    settle(host)
    assert second["index"] == 2
    done = view(host, run_id)
    assert done["output"] == {"first": {"which": "first"}, "second": {"which": "second"}}


def test_a_duplicate_ring_of_a_consumed_signal_is_not_consumed_again(host) -> None:
    run_id = start(host, "monitor_then_signals_flow", {})["run_id"]
    settle(host)
    for _ in range(31):
        host.advance(3600)
    [first] = _send_signals(host, run_id, "go", [{"which": "first"}])
    settle(host)
    _ring(host, run_id, "signal:go:1", {"name": "go", "index": 1})  # delivered again
    settle(host)
    assert view(host, run_id)["status"] == "waiting"  # still waiting for the second signal
    [second] = _send_signals(host, run_id, "go", [{"which": "second"}])
    settle(host)
    done = view(host, run_id)
    assert done["output"] == {"first": {"which": "first"}, "second": {"which": "second"}}
    assert (first["index"], second["index"]) == (1, 2)


# ------------------------------------------------------------------------------------------------------ gates


def _at_the_gate(host) -> tuple[str, dict]:
    run_id = start(host, "review_pipeline", {"topic": "gates"})["run_id"]
    settle(host)
    [gate] = view(host, run_id)["pending_approvals"]
    return run_id, gate


def _store(host):
    import agent_runs.services as services  # the host's modules: the app's store

    return services.RunServices.current().store


def _gate_entries(done: dict) -> list[dict]:
    return [e for e in done["steps"] if e["step"] == "sign_off"]


def test_a_gate_decision_and_a_duplicate_ring_apply_once(host) -> None:
    run_id, gate = _at_the_gate(host)
    decide(host, run_id, gate["approval_id"], **{"x-ms-client-principal-name": "ed@example.com"})
    # The engine runs in the background: the run may finish before the duplicate lands (then it is a 410, a no-op).
    with contextlib.suppress(InstanceGoneError):
        _ring(host, run_id, approval_event_name(gate["approval_id"]), {"approval_id": gate["approval_id"]})
    settle(host)
    again = host.client.post(f"/api/runs/{run_id}/approvals/{gate['approval_id']}", json={"decision": "reject"})
    assert again.status_code == 409 and again.json()["code"] == "approval_already_decided"
    settle(host)
    done = view(host, run_id)
    assert done["status"] == "completed" and done["output"]["published"] is True
    assert done["output"]["decided_by"] == "anonymous"  # AUTH_MODE=none: principal headers are ignored
    assert len(_gate_entries(done)) == 1


def test_a_decision_stored_as_the_gate_times_out_is_the_decision(host) -> None:
    """The decision won in the store but its ring has not reached the workflow when the deadline passes (stored
    directly here, with no ring): the expiry finds it and the gate takes it: no escalation, store and run agree."""
    run_id, gate = _at_the_gate(host)
    host.run(_store(host).decide_approval(gate["approval_id"], "approved", decided_by="late@example.com"))
    host.advance(DAY + 1)
    settle(host)
    done = view(host, run_id)
    assert done["status"] == "completed", done
    assert done["output"]["published"] is True and done["output"]["escalated"] is False
    assert done["output"]["decided_by"] == "late@example.com"
    approvals = host.client.get(f"/api/runs/{run_id}/approvals").json()["approvals"]
    assert [(a["approval_id"], a["status"]) for a in approvals] == [(gate["approval_id"], "approved")]


def test_decisions_during_escalation(host) -> None:
    """After the escalation: the first level's decision is refused (it expired, as the store says), a late ring of
    the first level's name changes nothing, and the new level's decision is the one that counts."""
    run_id, gate = _at_the_gate(host)
    host.advance(DAY + 1)
    [escalated] = view(host, run_id)["pending_approvals"]
    assert escalated["approval_id"] != gate["approval_id"]
    late = host.client.post(f"/api/runs/{run_id}/approvals/{gate['approval_id']}", json={"decision": "approve"})
    assert late.status_code == 410 and late.json()["code"] == "approval_expired"
    _ring(host, run_id, approval_event_name(gate["approval_id"]), {"approval_id": gate["approval_id"]})
    settle(host)
    assert view(host, run_id)["status"] == "requires_action"
    decide(host, run_id, escalated["approval_id"], "reject", **{"x-ms-client-principal-name": "chief@example.com"})
    settle(host)
    done = view(host, run_id)
    assert done["status"] == "completed"
    assert done["output"]["published"] is False and done["output"]["escalated"] is True
    assert done["output"]["decided_by"] == "anonymous"  # AUTH_MODE=none: principal headers are ignored
    statuses = {a["approval_id"]: a["status"] for a in host.client.get(f"/api/runs/{run_id}/approvals").json()[
        "approvals"]}
    assert statuses == {gate["approval_id"]: "expired", escalated["approval_id"]: "rejected"}
    assert len(_gate_entries(done)) == 1


def test_an_escalation_decision_rung_before_its_waiter_is_not_lost(host) -> None:
    """The escalated level's decision rings before the workflow waits for it (its record primed in the store and
    its event raised while the first level still waits): the SDK defers the event and the new waiter takes it."""
    from session_store import ApprovalRecord

    run_id, gate = _at_the_gate(host)
    escalation_id = gate["approval_id"].removesuffix(".approval") + ".escalation"
    first = host.run(_store(host).get_approval(gate["approval_id"]))
    primed = ApprovalRecord(
        approval_id=escalation_id, run_id=run_id, session_id=first.session_id, call_id="sign_off.1",
        tool=first.tool, arguments={**first.arguments, "escalated": True}, expires_at=first.expires_at,
    )
    host.run(_store(host).put_approvals([primed]))
    host.run(_store(host).decide_approval(escalation_id, "approved", decided_by="early@example.com"))
    _ring(host, run_id, approval_event_name(escalation_id), {"approval_id": escalation_id})
    settle(host)
    assert view(host, run_id)["status"] == "requires_action"  # the first level is still open
    host.advance(DAY + 1)
    settle(host)
    done = view(host, run_id)
    assert done["status"] == "completed", done
    assert done["output"]["escalated"] is True and done["output"]["published"] is True
    assert done["output"]["decided_by"] == "early@example.com"


def test_a_gate_activity_that_fails_ends_the_workflow_failed_with_a_code(host) -> None:
    """A ring with no decision in the store (the API never sends one: injected here) makes `workflow_record_gate`
    fail for good; the workflow ends `failed` with a stable code, the orchestration itself does not crash."""
    run_id, gate = _at_the_gate(host)
    _ring(host, run_id, approval_event_name(gate["approval_id"]), {"approval_id": gate["approval_id"]})
    settle(host)
    for _ in range(4):  # the durable retries of the activity wait on timers
        host.advance(60)
    settle(host)
    done = view(host, run_id)
    assert done["status"] == "failed", done
    assert done["error"]["code"] == "activity_failed" and done["error"]["step"] == "sign_off"
    assert "RuntimeError" not in done["error"]["message"] and "Activity function" not in done["error"]["message"]
    assert host.get_status(run_id)["runtimeStatus"] == "Completed"
    assert host.client.get(f"/api/runs/{run_id}/approvals", params={"status": "pending"}).json()["approvals"] == []


def test_a_gate_decision_whose_ring_never_came_is_rung_by_the_next_poll(host) -> None:
    """The decision is stored but its event is never raised (the API died in between: stored directly here). The
    next poll sees the workflow waiting for a decided approval and rings again: no wait until the deadline."""
    run_id, gate = _at_the_gate(host)
    host.run(_store(host).decide_approval(gate["approval_id"], "approved", decided_by="ed@example.com"))
    settle(host)
    assert host.get_status(run_id)["customStatus"]["status"] == "requires_action"  # nothing rang
    view(host, run_id)  # the poll rings
    settle(host)
    done = view(host, run_id)
    assert done["status"] == "completed" and done["output"]["published"] is True
    assert done["output"]["decided_by"] == "ed@example.com" and len(_gate_entries(done)) == 1


def test_a_gate_decision_whose_ring_never_came_is_rung_by_a_stream_that_follows_the_workflow(host) -> None:
    """As above with nobody polling: the page follows the workflow by its stream, which rings as a poll would."""
    run_id, gate = _at_the_gate(host)
    host.run(_store(host).decide_approval(gate["approval_id"], "approved", decided_by="ed@example.com"))
    settle(host)
    assert host.get_status(run_id)["customStatus"]["status"] == "requires_action"  # nothing rang
    with connect_sse(host.client, "GET", f"/api/workflows/runs/{run_id}/stream", timeout=30) as source:
        done = [e.json() for e in source.iter_sse() if e.event == "done"]
    assert done[0]["status"] == "completed" and done[0]["output"]["published"] is True


def test_a_signal_whose_ring_never_came_is_rung_by_the_next_poll(host) -> None:
    from workflow_runtime.contracts import control_session_id

    run_id = start(host, "monitor_then_signals_flow", {})["run_id"]
    settle(host)
    for _ in range(31):
        host.advance(3600)
    settle(host)
    host.run(_store(host).append_signal(control_session_id(run_id), "go", "no-ring", {"which": "first"}))
    settle(host)
    assert host.get_status(run_id)["customStatus"]["waiting"]["signal_index"] == 1  # nothing rang
    view(host, run_id)  # the poll rings signal 1
    settle(host)
    assert host.get_status(run_id)["customStatus"]["waiting"]["signal_index"] == 2
    view(host, run_id)  # nothing stored for 2: no ring
    _send_signals(host, run_id, "go", [{"which": "second"}])
    settle(host)
    assert view(host, run_id)["output"] == {"first": {"which": "first"}, "second": {"which": "second"}}


# ------------------------------------------------------------------------------------------------------ budget


def test_state_over_the_payload_budget_ends_the_workflow_failed_with_a_code(host) -> None:
    """The step references grow with every step: once a step's request would exceed 16 KB, the workflow ends
    `failed` with `payload_too_large` (no orchestrator crash, nothing half-sent)."""
    from agent_runs.budget import PAYLOAD_BUDGET_BYTES

    run_id = start(host, "many_steps_flow", {})["run_id"]
    settle(host)
    done = view(host, run_id)
    assert done["status"] == "failed", done["status"]
    assert done["error"]["code"] == "payload_too_large" and done["error"]["step"].startswith("step_")
    assert "payload budget" in done["error"]["message"] and "Exception" not in done["error"]["message"]
    status = host.get_status(run_id)
    assert status["runtimeStatus"] == "Completed"
    assert len(json.dumps(status["customStatus"])) < PAYLOAD_BUDGET_BYTES
    finished = int(done["error"]["step"][5:8])
    assert 150 < finished < 300  # it got far: the limit is the budget, not a step count


# ------------------------------------------------------------------------------------------------------ replay


def test_the_orchestrator_reads_no_setting_on_replay(host, monkeypatch) -> None:
    """The workflows package comes with the orchestration input: with `WORKFLOWS_PACKAGE` changed under a running
    workflow (the API would now serve none), it replays and goes on as started."""
    import workflow_runtime.registry as registry

    run_id = start(host, "eternal_monitor", {})["run_id"]
    settle(host)
    # Undone before the host stops: the host restores the environment it found, and an undo after that would put
    # back the host's own WORKFLOWS_PACKAGE for every later test (child-process hosts then failed to start).
    with monkeypatch.context() as patch:
        patch.setenv("WORKFLOWS_PACKAGE", "none")
        patch.setattr(registry, "_imported", {})  # no definition cached from before: loaded again on replay
        for _ in range(30):  # continues as new on the way
            host.advance(3600)
        status = host.get_status(run_id)
        assert status["runtimeStatus"] == "Running", status
        assert status["customStatus"]["iteration"] == 31 and status["customStatus"]["generation"] >= 1
        assert registry.load_workflows([]).names() == []  # what an env read would have found
