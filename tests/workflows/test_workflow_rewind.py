"""Rewind a failed workflow run: its failed step runs again as a new attempt (new child runs, new keys); the steps
before it keep their results; the same run goes on to the end. A child run rewound on its own while its step still
waits for other children is waited for by the step, as its other children are."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from workflow_helpers import PROGRESS_TIMEOUT_S, decide, model_prompts, settle, start, step_ids, view
from workflow_scripts import standard_script

from scripted_model import Fault, Match, Reply, Rule

E2E_DIR = str(Path(__file__).resolve().parents[1] / "e2e")
if E2E_DIR not in sys.path:
    sys.path.insert(0, E2E_DIR)
from e2e_settings import watches_the_app_in_process  # noqa: E402

from workflow_runtime.driver import LOOKS_PER_EXECUTION, REWOUND_CHILD_LOOKS  # noqa: E402


def test_a_workflow_whose_signal_never_came_is_rewound_and_then_signalled(host, model) -> None:
    run_id = start(host, "signal_flow", {"at": host.engine.now().isoformat()})["run_id"]
    settle(host)
    host.advance(1)
    host.advance(3601)
    failed = view(host, run_id)
    assert failed["status"] == "failed" and failed["error"]["step"] == "data"
    writer_prompts = len(model_prompts(model, "You are a writer"))

    rewound = host.client.post(f"/api/workflows/runs/{run_id}/rewind")
    assert rewound.status_code == 202, rewound.text
    body = rewound.json()
    assert body["rewind"]["from_step"] == "data" and body["rewind"]["iteration"] == 1
    assert body["links"]["self"].endswith(f"/api/workflows/runs/{run_id}")
    settle(host)
    waiting = view(host, run_id)
    assert waiting["status"] == "waiting" and waiting["pending_signals"] == ["data_ready"]

    sent = host.client.post(f"/api/workflows/runs/{run_id}/signals/data_ready", json={"payload": {"fact": "late"}})
    assert sent.status_code == 202, sent.text
    settle(host)
    done = view(host, run_id)
    assert done["status"] == "completed" and done["output"]["fact"] == "late"
    assert len(model_prompts(model, "You are a writer")) == writer_prompts + 1  # only the steps after it ran

    again = host.client.post(f"/api/workflows/runs/{run_id}/rewind")
    assert again.status_code == 409 and again.json()["code"] == "run_not_failed"


def test_a_failed_agent_step_is_run_again_as_a_new_child_run(host, model) -> None:
    refusing = standard_script().model_copy(
        update={"rules": [Rule(match=Match(system="You are a writer"), reply=Reply(fault=Fault.bad_request()))]}
    )
    model.set_script(refusing)
    run_id = start(host, "failing_flow", {})["run_id"]
    settle(host)
    assert view(host, run_id)["error"]["step"] == "write"

    model.set_script(standard_script())  # the model is back
    assert host.client.post(f"/api/workflows/runs/{run_id}/rewind").status_code == 202
    settle(host)
    after = view(host, run_id)
    assert after["error"]["step"] == "add_up"  # `write` passed this time; the flow's own bug comes next
    assert "write" in step_ids(after)
    child = host.client.get(f"/api/runs/{run_id}.write.r1")
    assert child.status_code == 200 and child.json()["status"] == "completed"
    assert host.client.get(f"/api/runs/{run_id}.write").json()["status"] == "failed"  # the first attempt stays


def test_the_agent_rewind_route_points_workflow_runs_to_their_own(host) -> None:
    run_id = start(host, "failing_flow", {})["run_id"]
    settle(host)
    wrong = host.client.post(f"/api/runs/{run_id}/rewind")
    assert wrong.status_code == 409 and wrong.json()["code"] == "run_is_a_workflow"
    assert host.client.post("/api/workflows/runs/nosuch/rewind").status_code == 404


def test_a_failed_child_run_rewound_on_its_own_leaves_its_failed_workflow_failed(host, model) -> None:
    """The workflow recorded the step's outcome when its child runs ended: a child rewound directly afterwards goes on
    as its own run, the workflow stays failed, and the workflow's own rewind runs the step as a new child run."""
    refusing = standard_script().model_copy(
        update={"rules": [Rule(match=Match(system="You are a writer"), reply=Reply(fault=Fault.bad_request()))]}
    )
    model.set_script(refusing)
    run_id = start(host, "failing_flow", {})["run_id"]
    settle(host)
    child = f"{run_id}.write"
    assert view(host, run_id)["error"]["step"] == "write"

    model.set_script(standard_script())
    assert host.client.post(f"/api/runs/{child}/rewind").status_code == 202
    settle(host)
    assert host.client.get(f"/api/runs/{child}").json()["status"] == "completed"
    still = view(host, run_id)
    assert still["status"] == "failed" and still["error"]["step"] == "write"

    assert host.client.post(f"/api/workflows/runs/{run_id}/rewind").status_code == 202
    settle(host)
    assert view(host, run_id)["error"]["step"] == "add_up"  # `write` passed, as the new attempt `write.r1`
    assert host.client.get(f"/api/runs/{run_id}.write.r1").json()["status"] == "completed"


def until_finished(host, run_id: str) -> dict:
    """The workflow's view once it has finished, by long polls (the view answers at once when it has)."""
    deadline = time.monotonic() + PROGRESS_TIMEOUT_S
    while (seen := view(host, run_id, wait_seconds=5))["status"] not in ("completed", "failed", "cancelled"):
        assert time.monotonic() < deadline, seen
    return seen


def crashing(monkeypatch, run_id: str) -> None:
    """The orchestration of run `run_id` crashes at its next episode (an unhandled error in the orchestrator)."""
    module = sys.modules["orchestrators.agent_run"]  # the host's modules: the app's orchestrator
    events = module.ExternalEvents

    def crash(context, *args):
        if context.instance_id == run_id:
            raise RuntimeError("the orchestrator crashed")
        return events(context, *args)

    monkeypatch.setattr(module, "ExternalEvents", crash)


def waiting_for_a_rewound_child(host, model, crash=None) -> tuple[str, str, str]:
    """A parallel step whose failed branch was rewound on its own and is at its model call (held) when the last other
    branch (cancelled; its orchestration crashes instead when `crash` is given a monkeypatch) ends; checks that the
    step waits for it. Returns (workflow run, that other branch, rewound)."""
    standard = standard_script()
    refusing = [Rule(match=Match(system="law and compliance"), reply=Reply(fault=Fault.bad_request())), *standard.rules]
    model.set_script(standard.model_copy(update={"rules": refusing}))
    run_id = start(host, "parallel_wait_flow", {"topic": "a DPA"})["run_id"]
    settle(host)
    children = view(host, run_id)["active_step"]["child_runs"]
    mailer, legal, _ = children

    model.set_script(standard)
    model.hold_answers()
    calls = model.log.total
    assert host.client.post(f"/api/runs/{legal}/rewind").status_code == 202  # reopened: in_progress in the store
    if crash is not None:
        crashing(crash, mailer)
    assert host.client.post(f"/api/runs/{mailer}/cancel").status_code == 202  # the last other branch ends
    model.log.wait_for(calls + 1, timeout=PROGRESS_TIMEOUT_S)  # the rewound run is at its model call, held
    waiting = view(host, run_id, wait_seconds=5)  # long enough for the step to record (it failed within it)
    assert waiting["status"] == "in_progress" and waiting["active_step"]["child_runs"] == children, waiting
    return run_id, mailer, legal


def test_a_child_run_rewound_on_its_own_is_waited_for_by_its_step(host, model) -> None:
    """A failed branch rewound on its own is still running when the last other branch ends: the step waits for it,
    as for any of its children, and records it once it has ended. It failed the step at once (`ended in_progress`),
    and the rewound run went on unattended, its result never used."""
    run_id, mailer, legal = waiting_for_a_rewound_child(host, model)
    model.release_answers()
    settle(host)
    assert host.client.get(f"/api/runs/{legal}").json()["status"] == "completed"
    host.advance(60)  # the step's next look
    failed = until_finished(host, run_id)
    assert failed["status"] == "failed", failed
    assert f"'{mailer}'" in failed["error"]["message"] and legal not in failed["error"]["message"], failed


@watches_the_app_in_process  # crashes a child run's orchestration in the app's worker
def test_a_child_run_rewound_on_its_own_is_waited_for_when_a_sibling_crashed(host, model, monkeypatch) -> None:
    """The last other branch's orchestration crashed (the step fails): the step still waits for the rewound branch
    before it fails, rather than leave it running unattended (before, it failed at once, `ended in_progress`)."""
    run_id, mailer, legal = waiting_for_a_rewound_child(host, model, crash=monkeypatch)
    model.release_answers()
    settle(host)
    assert host.client.get(f"/api/runs/{legal}").json()["status"] == "completed"
    host.advance(60)  # the step's next look
    failed = until_finished(host, run_id)
    assert failed["status"] == "failed" and f"'{mailer}'" in failed["error"]["message"], failed
    assert legal not in failed["error"]["message"], failed


def test_a_workflow_cancelled_while_its_step_waits_for_a_rewound_child_cancels_it(host, model) -> None:
    """The rewound child is one of the step's children while the step waits for it: the workflow's cancel reaches it,
    and the workflow ends cancelled, nothing left running."""
    run_id, _, legal = waiting_for_a_rewound_child(host, model)
    cancelled = host.client.post(f"/api/workflows/runs/{run_id}/cancel")
    assert cancelled.status_code == 202 and cancelled.json()["cancelled_child_runs"] == [legal], cancelled.text
    model.release_answers()
    settle(host)
    assert until_finished(host, run_id)["status"] == "cancelled"
    assert host.client.get(f"/api/runs/{legal}").json()["status"] in ("cancelled", "completed")
    # The cancel reached the rewound run itself: its cancel event was queued before its held model call's answer
    # was let go, and its run races every wait with cancel, so it took the cancel first and its answer went unused.
    assert host.client.get(f"/api/runs/{legal}").json()["status"] == "cancelled"


@watches_the_app_in_process  # crashes a child run's orchestration in the app's worker
def test_a_rewound_child_whose_orchestration_crashed_fails_its_step_at_the_next_look(host, model, monkeypatch) -> None:
    """The rewound branch's own orchestration crashes (its record stays open): the step's look sees its orchestration
    Failed, closes the child `failed` (as its view would) and fails the step, nobody having read the child's view
    (before, the step held until someone cancelled the child or read its view)."""
    standard = standard_script()
    refusing = [Rule(match=Match(system="law and compliance"), reply=Reply(fault=Fault.bad_request())), *standard.rules]
    model.set_script(standard.model_copy(update={"rules": refusing}))
    run_id = start(host, "parallel_wait_flow", {"topic": "a DPA"})["run_id"]
    settle(host)
    mailer, legal, _ = view(host, run_id)["active_step"]["child_runs"]
    crashing(monkeypatch, legal)  # its continuation crashes at once
    assert host.client.post(f"/api/runs/{legal}/rewind").status_code == 202
    assert host.client.post(f"/api/runs/{mailer}/cancel").status_code == 202  # the last other branch ends
    settle(host)
    host.advance(60)  # the step's next looks, if its first did not see the crash
    failed = view(host, run_id, wait_seconds=5)
    assert failed["status"] == "failed", failed
    assert f"'{legal}'" in failed["error"]["message"] and "run_crashed" in failed["error"]["message"], failed
    child = host.client.get(f"/api/runs/{legal}").json()
    assert child["status"] == "failed" and child["error"]["code"] == "run_crashed", child


@watches_the_app_in_process  # crashes a child run's orchestration in the app's worker
def test_a_child_whose_orchestration_crashed_while_its_siblings_run_fails_its_step_not_its_workflow(
    host, model, monkeypatch
) -> None:
    """A branch's orchestration crashes while the others are at their model calls: the step waits for them (the
    host's WhenAll does: going on before it did made the workflow's own orchestration fail as non-deterministic),
    then fails with that branch's error, the crashed branch closed `failed` without anyone reading its view."""
    model.hold_answers()
    run_id = start(host, "parallel_wait_flow", {"topic": "a DPA"})["run_id"]
    model.log.wait_for(3, timeout=PROGRESS_TIMEOUT_S)  # every branch is at its model call, held
    mailer, legal, finance = view(host, run_id)["active_step"]["child_runs"]
    crashing(monkeypatch, mailer)
    poked = host.client.post(f"/runtime/webhooks/durabletask/instances/{mailer}/raiseEvent/poke", json={})
    assert poked.status_code == 202, poked.text  # an episode of its orchestration: it crashes
    model.release_answers()
    settle(host)
    failed = view(host, run_id)
    assert failed["status"] == "failed" and failed["error"]["step"] == "fan", failed
    message = failed["error"]["message"]
    assert f"'{mailer}'" in message and "run_crashed" in message, failed
    assert legal not in message and finance not in message, failed
    assert host.get_status(run_id)["runtimeStatus"] == "Completed"  # the workflow's orchestration ended it
    assert [host.client.get(f"/api/runs/{c}").json()["status"] for c in (legal, finance)] == ["completed"] * 2


def _pending_approval(host, run_id: str) -> str:
    pending = host.client.get(f"/api/runs/{run_id}/approvals", params={"status": "pending"}).json()
    [approval] = pending["approvals"] if isinstance(pending, dict) else pending
    return approval["approval_id"]


def waiting_long_for_a_rewound_child(host, model, looks: int) -> tuple[str, str]:
    """A parallel step whose branch `carol` failed and was rewound on its own, then waits for its email's approval,
    while the step has looked at it `looks` times (the other branch, `bob`, completed). Returns (workflow, carol)."""
    standard = standard_script()
    to_carol = Match(system="helpful assistant", last_user="carol")
    carol_refused = Rule(match=to_carol, reply=Reply(fault=Fault.bad_request()))
    model.set_script(standard.model_copy(update={"rules": [carol_refused, *standard.rules]}))
    run_id = start(host, "parallel_mail_flow", {"topic": "the launch"})["run_id"]
    settle(host)
    bob, carol = view(host, run_id)["active_step"]["child_runs"]
    assert host.client.get(f"/api/runs/{carol}").json()["status"] == "failed"

    model.set_script(standard)
    assert host.client.post(f"/api/runs/{carol}/rewind").status_code == 202
    settle(host)  # the rewound branch waits for its email's approval
    decide(host, bob, _pending_approval(host, bob))
    settle(host)  # bob ended: the step now only looks at carol
    last = REWOUND_CHILD_LOOKS[-1]
    for delay in [*REWOUND_CHILD_LOOKS, *[last] * (looks - len(REWOUND_CHILD_LOOKS))]:  # each look in turn
        host.advance(delay.total_seconds())
    return run_id, carol


def test_a_step_waiting_long_for_a_rewound_child_continues_as_new_and_goes_on_when_it_ends(host, model) -> None:
    """The rewound branch waits for its email's approval for most of a day: the step looks at it hourly, continuing
    as new every dozen looks (each execution's history stays short), and records the step once it was approved."""
    run_id, carol = waiting_long_for_a_rewound_child(host, model, looks=2 * LOOKS_PER_EXECUTION)  # 14 hours
    generation = host.get_status(run_id)["customStatus"]["generation"]
    assert generation >= 2, generation  # continued as new while it waited
    history = host.get_status(run_id, show_history=True)["historyEvents"]
    assert len(history) < 120, len(history)  # this execution's looks only
    assert view(host, run_id)["status"] == "in_progress"

    decide(host, carol, _pending_approval(host, carol))
    settle(host)
    host.advance(3600)  # the next look
    done = until_finished(host, run_id)
    assert done["status"] == "completed", done
    assert set(done["output"]) == {"bob", "carol"}


def test_a_workflow_cancelled_after_its_waiting_step_continued_as_new_cancels_the_rewound_child(host, model) -> None:
    """The step carried its children across continue-as-new: the workflow's cancel still reaches the rewound child,
    and the workflow ends cancelled, nothing left running."""
    run_id, carol = waiting_long_for_a_rewound_child(host, model, looks=LOOKS_PER_EXECUTION + 1)
    assert host.get_status(run_id)["customStatus"]["generation"] >= 1
    cancelled = host.client.post(f"/api/workflows/runs/{run_id}/cancel")
    assert cancelled.status_code == 202 and cancelled.json()["cancelled_child_runs"] == [carol], cancelled.text
    settle(host)
    assert until_finished(host, run_id)["status"] == "cancelled"
    assert host.client.get(f"/api/runs/{carol}").json()["status"] == "cancelled"


def test_a_failed_branch_fails_its_parallel_step_at_once_and_cancels_the_branches_still_running(host, model) -> None:
    """Fail-fast (a parallel step's default): the legal branch fails while the mailer waits for a person; the step
    fails at once with the legal branch's error and cancels the mailer (before, it waited for the mailer's approval,
    for up to a day). `parallel_wait_flow`, the same branches with `on_branch_failure="wait"`, still waits."""
    standard = standard_script()
    refusing = [Rule(match=Match(system="law and compliance"), reply=Reply(fault=Fault.bad_request())), *standard.rules]
    model.set_script(standard.model_copy(update={"rules": refusing}))
    run_id = start(host, "parallel_fail_fast_flow", {"topic": "a DPA"})["run_id"]
    settle(host)
    mailer, legal = f"{run_id}.fan.mailer", f"{run_id}.fan.legal"
    failed = view(host, run_id)
    assert failed["status"] == "failed" and failed["error"]["step"] == "fan", failed
    assert f"'{legal}'" in failed["error"]["message"] and mailer not in failed["error"]["message"], failed
    assert host.client.get(f"/api/runs/{mailer}").json()["status"] == "cancelled"
    pending = host.client.get(f"/api/runs/{mailer}/approvals", params={"status": "pending"}).json()
    assert not (pending["approvals"] if isinstance(pending, dict) else pending), pending

    waiting = start(host, "parallel_wait_flow", {"topic": "a DPA"})["run_id"]
    settle(host)
    assert view(host, waiting)["status"] == "in_progress"  # the step waits: the mailer waits for its approval
    assert host.client.get(f"/api/runs/{waiting}.fan.mailer").json()["status"] == "requires_action"


def _until(check, what: str) -> None:
    deadline = time.monotonic() + PROGRESS_TIMEOUT_S
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _runtime(host, run_id: str) -> str | None:
    status = host.get_status(run_id)
    return status.get("runtimeStatus") if status else None


def _took_its_cancel(host, run_id: str) -> bool:
    """The run's orchestration took its cancel: it waits for its model call, within the grace timer it set."""
    status = host.get_status(run_id, show_history=True) or {}
    return any(event["EventType"] == "TimerCreated" for event in status.get("historyEvents") or [])


def _start_with_legal_refused(host, model) -> str:
    """Start `parallel_fail_fast_flow`, its legal branch's model call refused, the mailer's and finance's answers to
    stop half-written; returns once every branch is at its model call, every answer held (the caller sends legal's
    refusal with `release_answers(keep_mid_stream=True)`). A branch still on its way to its model call when the step
    cancels it would end at once, without the call the test holds it on."""
    standard = standard_script()
    refusing = [Rule(match=Match(system="law and compliance"), reply=Reply(fault=Fault.bad_request())), *standard.rules]
    model.set_script(standard.model_copy(update={"rules": refusing}))
    model.hold_answers()
    model.hold_mid_stream(after_chunks=1)
    run_id = start(host, "parallel_fail_fast_flow", {"topic": "a DPA"})["run_id"]
    model.log.wait_for(3, timeout=PROGRESS_TIMEOUT_S)
    return run_id


def test_a_fail_fast_step_whose_failed_branch_was_rewound_and_completed_still_fails(host, model) -> None:
    """The legal branch fails and the step cancels the others; while they end, the legal branch is rewound on its own
    and completes. The step still fails, naming the branches it cancelled (before, with its failure gone and the
    cancelled branches left out, it completed `ok` with their empty outputs)."""
    run_id = _start_with_legal_refused(host, model)
    mailer, legal, finance = (f"{run_id}.fan.{branch}" for branch in ("mailer", "legal", "finance"))
    model.release_answers(keep_mid_stream=True)  # legal's fault is sent; the others stop half-written
    _until(lambda: _runtime(host, legal) == "Completed", "the legal branch failed and rang")  # the ring is its last
    model.set_script(standard_script())
    calls = model.log.total
    assert host.client.post(f"/api/runs/{legal}/rewind").status_code == 202
    model.log.wait_for(calls + 1, timeout=PROGRESS_TIMEOUT_S)  # the rewound run is at its model call
    assert view(host, run_id, wait_seconds=2)["status"] == "in_progress"  # the step waits for its cancelled branches
    model.release_answers()
    settle(host)
    assert host.client.get(f"/api/runs/{legal}").json()["status"] == "completed"
    host.advance(60)  # the step's next look, if it saw the rewound branch running
    failed = until_finished(host, run_id)
    assert failed["status"] == "failed" and failed["error"]["step"] == "fan", failed
    message = failed["error"]["message"]
    assert "branch 'mailer'" in message and "cancelled after a sibling failed" in message, failed
    assert [host.client.get(f"/api/runs/{c}").json()["status"] for c in (mailer, finance)] == ["cancelled"] * 2


def _crash(host, monkeypatch, run_id: str) -> None:
    """Branch `run_id`'s orchestration, waiting on its model call, crashes at an episode of its own (an event it does
    not expect) and ends `Failed`."""
    module = sys.modules["orchestrators.agent_run"]  # the host's modules: the app's orchestrator
    events = module.ExternalEvents

    def crash(context, *args):
        if context.instance_id == run_id:
            raise RuntimeError("the orchestrator crashed")
        return events(context, *args)

    monkeypatch.setattr(module, "ExternalEvents", crash)
    poked = host.client.post(f"/runtime/webhooks/durabletask/instances/{run_id}/raiseEvent/poke", json={})
    assert poked.status_code == 202, poked.text
    _until(lambda: _runtime(host, run_id) == "Failed", "the branch's orchestration crashed")


@watches_the_app_in_process  # crashes a child run's orchestration in the app's worker
@pytest.mark.parametrize("crash", ["before_the_ring", "while_cancelled"])
def test_a_fail_fast_step_waits_for_its_cancelled_branches_when_one_crashes(host, model, monkeypatch, crash) -> None:
    """The legal branch fails and rings while the mailer's and finance's answers are held half-written; finance's
    orchestration crashes, before the ring or while it is cancelled. The step still waits for the mailer to end, then
    fails (before, its wait ended at the crash: the step was recorded with the mailer running, or the workflow failed
    as non-deterministic, the host's WhenAll waiting for every child)."""
    run_id = _start_with_legal_refused(host, model)
    mailer, legal, finance = (f"{run_id}.fan.{branch}" for branch in ("mailer", "legal", "finance"))
    if crash == "before_the_ring":
        # Legal's refusal is still held. Nothing rings: the crash's own ring, scheduled where finance's history holds
        # its model call, ends it as non-deterministic instead.
        _crash(host, monkeypatch, finance)
    model.release_answers(keep_mid_stream=True)  # legal's refusal is sent; the others stop half-written
    _until(lambda: _runtime(host, legal) == "Completed", "the legal branch failed and rang")
    if crash == "while_cancelled":
        # At an episode of its own once it took the cancel (the cancel's episode would crash it, in place of the poke).
        _until(lambda: _took_its_cancel(host, finance), "finance took its cancel")
        _crash(host, monkeypatch, finance)
    waiting = view(host, run_id, wait_seconds=2)
    assert waiting["status"] == "in_progress", waiting  # the mailer, cancelled, has not ended yet
    model.release_answers()
    settle(host)
    failed = until_finished(host, run_id)
    assert failed["status"] == "failed" and failed["error"]["step"] == "fan", failed
    assert f"'{legal}'" in failed["error"]["message"] and mailer not in failed["error"]["message"], failed
    assert host.client.get(f"/api/runs/{mailer}").json()["status"] == "cancelled"
    assert host.get_status(run_id)["runtimeStatus"] == "Completed"  # the workflow's orchestration ended it


@watches_the_app_in_process  # refuses the store's writes of notification events in the app's worker
def test_a_failed_branch_rings_its_workflow_before_its_end_is_recorded_for_notifications(
    notifying_host, model, monkeypatch
) -> None:
    """Notifications are configured and the store refuses the legal branch's events: its failed end is recorded
    again on durable timers (for up to days), yet the step cancels the mailer at once (before, the ring waited for
    that recording: the mailer went on waiting for its approval)."""
    host = notifying_host
    standard = standard_script()
    refusing = [Rule(match=Match(system="law and compliance"), reply=Reply(fault=Fault.bad_request())), *standard.rules]
    model.set_script(standard.model_copy(update={"rules": refusing}))
    model.hold_answers()
    run_id = start(host, "parallel_fail_fast_flow", {"topic": "a DPA"})["run_id"]
    model.log.wait_for(3, timeout=PROGRESS_TIMEOUT_S)  # every branch is at its model call
    store = sys.modules["session_store.sqlite_store"].SqliteSessionStore  # the host's modules: the app's store
    record_effect = store.record_effect

    async def refused(self, session_id, key, kind, payload):
        if kind == "notify_event" and payload["event"]["run_id"].endswith(".fan.legal"):
            raise RuntimeError("the store is unreachable")
        return await record_effect(self, session_id, key, kind, payload)

    monkeypatch.setattr(store, "record_effect", refused)
    model.release_answers()
    settle(host)
    mailer, legal = f"{run_id}.fan.mailer", f"{run_id}.fan.legal"
    assert host.client.get(f"/api/runs/{legal}").json()["status"] == "failed"
    assert host.get_status(legal)["runtimeStatus"] == "Running"  # still trying to record its end
    assert host.client.get(f"/api/runs/{mailer}").json()["status"] == "cancelled"
