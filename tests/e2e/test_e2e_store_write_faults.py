"""Each store write of a run failing once, in turn: nothing lost, nothing twice, the session free at once.

Cosmos writes a run's records one item at a time (the run, its session, its messages, approvals and effects are items
of their own; no transaction spans them), so any write can fail alone: refused (a 503, nothing written) or with its
answer lost after it landed (a timeout, a host stopped right after). For every write of an approval run - start,
the approval asked, decided or cancelled, the tool, the final answer, the close - one run in which that write fails
once: the HTTP client retries a 503 (`store_unavailable` says to; the start with its `Idempotency-Key`), Durable
retries the activity. Each run must end as it would have without the fault: the email sent exactly once when
approved and never when cancelled, every approval settled, no message stored twice, every tool call answered, and
the session taken by the next start at once (not after the store's 60 s grace for a holder that ended).

The retried closing model call that found its run closed used to leave the session held by it (its release was the
write that failed): `agent_runs.finishing.ended_before`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import httpx
import pytest
from cosmos_faults import WriteFault, cosmos_write_fails
from e2e_harness import InProcessApp
from e2e_settings import watches_the_app_in_process
from test_e2e_cancel import assert_every_call_has_a_result

from scripted_model import Reply, Script, ScriptedModelServer
from scripted_model.script import Match, Rule

pytestmark = pytest.mark.parametrize("store_backend", [pytest.param("cosmos", marks=pytest.mark.cosmos)])

EMAIL = {"to": "bob@example.com", "subject": "Hi", "body": "Hello"}
# The model answers by the conversation, not in turn: a model call retried after its answer's write failed asks again.
BY_CONVERSATION = Script(
    rules=[
        Rule(match=Match(after_tool_results=True), reply=Reply.say("Sent.")),
        Rule(match=Match(last_user="Email Bob", after_tool_results=False), reply=Reply.call("send_email", EMAIL)),
        Rule(match=Match(last_user="Anything else"), reply=Reply.say("No.")),
    ]
)
MOST_WRITES = 40  # an approval run makes ~15: the loop ends at the first run no fault reaches
ACTIVITY_RETRIES_S = 30  # past an activity's retry timers (2 s, then 4 s)


def retried(request: Callable[[], httpx.Response]) -> httpx.Response:
    """What a client does with 503 `store_unavailable`: retry shortly (here: at once, at most twice)."""
    response = request()
    for _ in range(2):
        if response.status_code != 503:
            break
        response = request()
    return response


def settle_with_retries(app: InProcessApp) -> None:
    app.settle()
    for _ in range(3):  # an activity whose write failed is retried on a durable timer, up to 3 attempts
        app.advance(ACTIVITY_RETRIES_S)


def approval_run_with_a_failed_write(app: InProcessApp, fault: WriteFault, answer: str) -> tuple[str, str]:
    """An approval run, answered `answer` (approve or cancel), during which `fault` fails one write: (run, session)."""
    store = app.services().current().store
    with cosmos_write_fails(store, fault):
        fault.armed = True
        headers = {"Idempotency-Key": uuid.uuid4().hex}
        started = retried(
            lambda: app.http.post("/api/agents/helper/runs", json={"input": "Email Bob"}, headers=headers)
        )
        assert started.status_code == 202, (fault, started.text)
        run_id, session_id = started.json()["run_id"], started.json()["session_id"]
        settle_with_retries(app)
        view = app.view(run_id)
        assert view["status"] == "requires_action", (fault, view)
        approval_id = view["pending_approvals"][0]["approval_id"]
        if answer == "cancel":
            answered = retried(lambda: app.cancel(run_id))
        else:
            answered = retried(lambda: app.decide(run_id, approval_id, "approve"))
        assert answered.status_code in (200, 202), (fault, answered.text)
        settle_with_retries(app)
    return run_id, session_id


@watches_the_app_in_process  # wraps the app's store's containers
@pytest.mark.parametrize("lost", [False, True], ids=["refused", "answer_lost"])
@pytest.mark.parametrize("answer", ["approve", "cancel"])
def test_each_write_of_an_approval_run_failing_once_loses_nothing(
    app: InProcessApp, model: ScriptedModelServer, lost: bool, answer: str
) -> None:
    model.set_script(BY_CONVERSATION)
    failed: list[tuple[str, str]] = []
    for at in range(MOST_WRITES):
        fault = WriteFault(at=at, lost=lost)
        run_id, session_id = approval_run_with_a_failed_write(app, fault, answer)
        if fault.hit is None:
            break
        failed.append(fault.hit)
        view = app.view(run_id)
        approvals = [a["status"] for a in app.approvals(run_id)]
        emails = app.effects(session_id, kind="email")
        if answer == "approve":
            assert (view["status"], view["output"]["text"]) == ("completed", "Sent."), (fault, view)
            assert (approvals, len(emails)) == (["approved"], 1), fault
        else:
            assert (view["status"], view["error"]["code"]) == ("cancelled", "cancelled"), (fault, view)
            assert (approvals, emails) == (["expired"], []), fault
        messages = app.session_messages(session_id)
        assert len({m["message_id"] for m in messages}) == len(messages), fault
        assert_every_call_has_a_result(messages)
        nxt = app.http.post("/api/agents/helper/runs", json={"input": "Anything else?", "session_id": session_id})
        assert nxt.status_code == 202, (fault, nxt.text)
        app.settle()
        assert app.view(nxt.json()["run_id"])["output"]["text"] == "No.", fault
    else:
        pytest.fail(f"the run kept writing past {MOST_WRITES} writes")
    # Every kind of write was reached: the run's records, its messages, the approval, the effect, the close.
    assert {container for container, _ in failed} >= {"runs", "sessions", "messages", "approvals"}, failed
    assert answer == "cancel" or ("effects", "create_item") in failed, failed
