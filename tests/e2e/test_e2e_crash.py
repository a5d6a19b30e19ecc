"""Crash and resume, end to end: `python -m devhost` in a child process with its state in a file and the sessions in
a SQLite file (or in Cosmos) is killed with SIGKILL mid-run and started again on the same state. The run completes,
the side effect of the tool happened exactly once (the tools record it under their idempotency key), and no message
is duplicated."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2e_harness import (
    FINAL,
    PROGRESS_TIMEOUT_S,
    AppClient,
    completed_activities,
    contents_of,
    parallel_calls,
    pending_ids,
    wait_for_file,
)
from e2e_settings import E2E_DIR, REPO_ROOT, app_settings
from step_pause import failing, paused
from test_e2e_approval_events import emails

from devhost.testing import ClockMode, SubprocessHost
from scripted_model import Reply, Script, ScriptedModelServer
from session_store import StoreSettings, open_store

EMAIL = {"to": "bob@example.com", "subject": "Hi", "body": "Hello Bob"}
ESCALATION_DEADLINE_S = 600  # the `escalating` agent's approval timeout (tests/e2e/fixture_agents/agents.py)
pytestmark = pytest.mark.slow


class CrashableApp:
    """The app in a child devhost on file state; kill it and start it again on the same state."""

    def __init__(self, tmp_path: Path, model: ScriptedModelServer, store_settings: dict[str, str],
                 clock: ClockMode = "real") -> None:
        self.marker_dir = Path(store_settings["E2E_MARKER_DIR"])
        self.store_settings = {**store_settings}
        if "SESSION_STORE_PATH" in self.store_settings:
            self.store_settings["SESSION_STORE_PATH"] = str(tmp_path / "sessions.sqlite3")
        env = app_settings(model.base_url, **self.store_settings, PYTHONPATH=str(E2E_DIR))
        self.host = SubprocessHost(REPO_ROOT, state_path=tmp_path / "devhost.sqlite3", env=env, clock=clock)
        self.api = AppClient(self.host.client)

    def crash_and_restart(self) -> None:
        self.host.kill()
        self.host.start()

    def stored(self, session_id: str) -> tuple[list[Any], list[Any]]:
        """(messages, effects) of a session, read from the app's store by this process."""
        store = open_store(StoreSettings.model_validate(self.store_settings))

        async def read() -> tuple[list[Any], list[Any]]:
            try:
                page = await store.list_messages(session_id, limit=1000)
                return page.items, await store.list_effects(session_id)
            finally:
                await store.close()

        return asyncio.run(read())


@pytest.fixture
def crashable(tmp_path: Path, model: ScriptedModelServer, store_settings: dict[str, str]) -> Iterator[CrashableApp]:
    yield from _running(CrashableApp(tmp_path, model, store_settings))


@pytest.fixture
def crashable_on_virtual_time(
    tmp_path: Path, model: ScriptedModelServer, store_settings: dict[str, str]
) -> Iterator[CrashableApp]:
    """The same, on a virtual clock (moved by the test; after a restart it goes on from where it was)."""
    yield from _running(CrashableApp(tmp_path, model, store_settings, clock="virtual"))


def _running(app: CrashableApp) -> Iterator[CrashableApp]:
    app.host.start()
    try:
        yield app
    finally:
        app.host.close()


def assert_no_duplicates(messages: list[Any]) -> None:
    ids = [m.message_id for m in messages]
    seqs = [m.seq for m in messages]
    assert len(set(ids)) == len(ids) and len(set(seqs)) == len(seqs), ids
    calls = [c["call_id"] for m in messages for c in m.payload["contents"] if c["type"] == "function_call"]
    results = [c["call_id"] for m in messages for c in m.payload["contents"] if c["type"] == "function_result"]
    assert sorted(calls) == sorted(results)  # every call answered exactly once


def approve_and_finish(crashable: CrashableApp, started: dict[str, Any], approval_id: str) -> list[Any]:
    """Approve the email, and check the run then completed with the email sent once and no message twice; returns
    the session's stored messages."""
    api = crashable.api
    assert api.decide(started["run_id"], approval_id, "approve").status_code == 202
    final = api.wait_for(started["run_id"], FINAL)
    assert (final["status"], final["output"]["text"]) == ("completed", "Sent.")
    messages, effects = crashable.stored(started["session_id"])
    assert [(e.kind, e.payload) for e in effects] == [("email", EMAIL)]
    assert_no_duplicates(messages)
    return messages


def test_killed_while_waiting_for_approval(crashable: CrashableApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Sent."))
    api = crashable.api
    started = api.start(input="Email Bob")
    [approval_id] = [
        a["approval_id"] for a in api.wait_for(started["run_id"], {"requires_action"})["pending_approvals"]
    ]

    crashable.crash_and_restart()

    assert api.view(started["run_id"])["status"] == "requires_action"  # the run survived, still waiting
    messages = approve_and_finish(crashable, started, approval_id)
    assert len(messages) == 6  # input, call, approval request, approval response, result, answer
    assert model.log.total == 2


def test_killed_while_the_approval_requests_are_recorded(crashable: CrashableApp, model: ScriptedModelServer) -> None:
    """Killed while `record_approvals` is in flight (held in `put_approvals`): polls meanwhile show the answer's text
    as its draft and not its call; after the restart the step is delivered again and the answer shows once, with its
    one request."""
    answer = Reply.call("send_email", EMAIL).model_copy(update={"text": "I will email Bob."})
    model.set_script(Script.of(answer, "Sent."))
    api = crashable.api
    with paused(crashable, "put_approvals") as recording:
        started = api.start(input="Email Bob")
        recording.wait_reached()
        during = api.view(started["run_id"])
        assert during["partial_output"] == "I will email Bob."
        assert not [u for u in during["updates"] if "function_call" in contents_of(u["message"])]
        crashable.host.kill()
    crashable.host.start()  # the pause is disarmed: the step delivered again goes through

    waiting = api.wait_for(started["run_id"], {"requires_action"})
    assert [contents_of(u["message"]) for u in waiting["updates"]][1:] == [
        ["text", "function_call"], ["function_approval_request"]
    ]
    [approval_id] = [a["approval_id"] for a in waiting["pending_approvals"]]
    approve_and_finish(crashable, started, approval_id)
    assert model.log.total == 2


def test_killed_while_a_step_waits_out_a_store_outage(
    crashable_on_virtual_time: CrashableApp, model: ScriptedModelServer
) -> None:
    """The email's exactly-once ledger (the store) is down when the approved tool runs: the tool's tries fail, and the
    run waits on durable timers between them (`orchestrators.agent_run._step`). Killed while it waits and started
    again, the store back: the next try sends the email, once, and the run completes."""
    crashable = crashable_on_virtual_time
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Sent."))
    api, host = crashable.api, crashable.host
    started = api.start(input="Email Bob")
    run_id = started["run_id"]
    [approval_id] = pending_ids(api.wait_for(run_id, {"requires_action"}))
    with failing(host, "record_effect", equal={"kind": "email"}, outage=True):
        assert api.decide(run_id, approval_id, "approve").status_code == 202
        for _ in range(3):
            host.advance(60)
        status = host.get_status(run_id, show_history=True)
        assert status is not None and status["runtimeStatus"] == "Running", status
        events = [e["EventType"] for e in status["historyEvents"]]
        # The activity's own three tries failed, and the run waits on a timer for its next try (not failed).
        assert events.count("TaskFailed") >= 3 and events[-1] == "TimerCreated", events

        crashable.crash_and_restart()
        host.advance(60)
        assert api.view(run_id)["status"] == "in_progress"
    for _ in range(30):  # the store is back: the next try comes due
        if api.view(run_id)["status"] != "in_progress":
            break
        host.advance(60)
    final = api.wait_for(run_id, FINAL)
    assert (final["status"], final["output"]["text"]) == ("completed", "Sent.")
    messages, effects = crashable.stored(started["session_id"])
    assert [(e.kind, e.payload) for e in effects] == [("email", EMAIL)]
    assert_no_duplicates(messages)
    assert model.log.total == 2


def test_killed_while_a_tool_runs(crashable: CrashableApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("slow_step", {"label": "once"}), "Done."))
    api = crashable.api
    started = api.start(input="Do the slow step")
    attempts = crashable.marker_dir / "slow_step.started"
    wait_for_file(attempts)  # the tool is running (its effect is already recorded) and holds the call

    crashable.host.kill()
    (crashable.marker_dir / "slow_step.release").touch()
    crashable.host.start()

    final = api.wait_for(started["run_id"], FINAL)
    assert (final["status"], final["output"]["text"]) == ("completed", "Done.")
    keys = attempts.read_text().split()
    assert len(keys) == 2 and keys[0] == keys[1]  # delivered again after the crash, with the same idempotency key
    messages, effects = crashable.stored(started["session_id"])
    assert [(e.kind, e.payload) for e in effects] == [("slow_step", {"label": "once"})]  # but the effect happened once
    assert_no_duplicates(messages)
    result = next(c for m in messages for c in m.payload["contents"] if c["type"] == "function_result")
    assert result["result"] == {"label": "once", "first_attempt": False}
    assert model.log.total == 2


def test_killed_while_a_model_call_runs(crashable: CrashableApp, model: ScriptedModelServer) -> None:
    """The model call is redelivered after the crash (the model is asked twice); the answer is stored once."""
    model.set_script(Script(default=Reply(text="The answer.")))
    model.hold_answers()  # the host is killed while the call is in flight (a latency would race the kill)
    api = crashable.api
    started = api.start(input="A question")
    model.log.wait_for(1, timeout=PROGRESS_TIMEOUT_S)  # the model has the request: the call_model activity is in flight

    crashable.crash_and_restart()
    model.release_answers()

    final = api.wait_for(started["run_id"], FINAL)
    assert (final["status"], final["output"]["text"]) == ("completed", "The answer.")
    assert model.log.total == 2
    messages, _ = crashable.stored(started["session_id"])
    assert_no_duplicates(messages)
    assert [m.role for m in messages] == ["user", "assistant"]


def test_killed_after_the_final_answer_closed_the_run(crashable: CrashableApp, model: ScriptedModelServer) -> None:
    """The model call whose answer ends the run also closes it. Killed after the close, before the call's completion
    is recorded: the call is delivered again, finds the run closed and returns how it was closed, without asking the
    model again or storing anything twice."""
    model.set_script(Script(default=Reply(text="The answer.")))
    pause = crashable.marker_dir / "pause"
    pause.mkdir(exist_ok=True)
    (pause / "finish_run.json").write_text('{"equal": {}, "absent": []}')  # hold the close after it is stored
    api = crashable.api
    started = api.start(input="A question")
    wait_for_file(pause / "finish_run.reached")
    assert api.view(started["run_id"])["status"] == "completed"  # closed in the store; the activity has not returned

    crashable.host.kill()
    (pause / "finish_run.json").unlink()
    crashable.host.start()

    final = api.wait_for(started["run_id"], FINAL)
    assert (final["status"], final["output"]["text"]) == ("completed", "The answer.")
    crashable.host.wait_for_status(started["run_id"], "Completed", timeout=PROGRESS_TIMEOUT_S)
    status = crashable.host.get_status(started["run_id"], show_history=True)
    assert status is not None
    assert (status["output"]["status"], status["output"]["reason"]) == ("completed", "stop")
    assert completed_activities(status) == ["call_model"]  # delivered twice, recorded once; no finish_run
    assert model.log.total == 1  # the redelivered call did not ask again
    messages, _ = crashable.stored(started["session_id"])
    assert_no_duplicates(messages)
    assert [m.role for m in messages] == ["user", "assistant"]



def test_killed_while_an_escalation_is_half_stored(
    crashable_on_virtual_time: CrashableApp, model: ScriptedModelServer
) -> None:
    """At the first deadline the escalation hands both approvals of a batch on, one store write each. Killed after
    the first write: after the restart the step is delivered again and finishes the escalation with the deadline it
    was given (the second approval gets the same one as the first; none is pushed further), the progress then
    announces that deadline, and both approvals are decided and applied once."""
    crashable = crashable_on_virtual_time
    batch = emails(2)
    model.set_script(Script.of(parallel_calls("send_email", *batch), "Done."))
    api, host = crashable.api, crashable.host
    started = api.start(agent="escalating", input="please")
    waiting = api.wait_for(started["run_id"], {"requires_action"})
    first_deadline = _progress(host, started["run_id"])["approvals_expire_at"]
    with paused(crashable, "escalate_approval") as escalating:
        advancing = threading.Thread(target=_advance_until_killed, args=(host, ESCALATION_DEADLINE_S + 1))
        advancing.start()
        escalating.wait_reached()  # the first approval is escalated in the store, the second not yet
        half = {r["approval_id"]: r["escalated_to"] for r in api.approvals(started["run_id"])}
        assert sorted(half.values(), key=str) == [None, "role:Supervisors"]
        host.kill()
        advancing.join()
    host.start()  # its clock goes on from the moment of the kill: the escalation's deadline is an hour away

    host.wait_until_idle(timeout=PROGRESS_TIMEOUT_S)
    announced = _progress(host, started["run_id"])["approvals_expire_at"]
    records = api.approvals(started["run_id"])
    assert [(r["status"], r["escalated_to"]) for r in records] == [("pending", "role:Supervisors")] * 2
    assert {datetime.fromisoformat(r["expires_at"]) for r in records} == {datetime.fromisoformat(announced)}
    assert announced != first_deadline
    assert sorted(pending_ids(api.view(started["run_id"]))) == sorted(pending_ids(waiting))

    for approval_id in pending_ids(waiting):
        assert api.decide(started["run_id"], approval_id, "approve").status_code == 202
    final = api.wait_for(started["run_id"], FINAL)
    assert (final["status"], final["output"]["text"]) == ("completed", "Done.")
    messages, effects = crashable.stored(started["session_id"])
    assert sorted(e.payload["to"] for e in effects if e.kind == "email") == sorted(e["to"] for e in batch)
    assert_no_duplicates(messages)
    assert model.log.total == 2


def _progress(host: SubprocessHost, run_id: str) -> dict[str, Any]:
    """The run's progress as its orchestration publishes it (while it waits on approvals)."""
    status = host.get_status(run_id)
    assert status is not None and "approvals_expire_at" in status["customStatus"], status
    return status["customStatus"]


def _advance_until_killed(host: SubprocessHost, seconds: float) -> None:
    """Move the virtual clock; the request runs until the host is idle, which a held step never lets it be: the
    kill ends it."""
    try:
        host.advance(seconds)
    except httpx.TransportError:
        return
    raise AssertionError("the host became idle with the escalation held")
