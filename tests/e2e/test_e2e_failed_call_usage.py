"""What the provider billed for model call attempts that failed, in the usage of durable runs, on both stores.

Every scripted attempt here reports 100 input and 10 output tokens (110, cost 0.12 at `PRICES`) before it breaks
(`Fault.billed`: the stream ends in an error after its usage chunk) or answers. A run that fails with a model error
shows what its failed call's attempts were billed, as a run whose call later answers counts them; a rewind of it counts
them once. `keep_failed_attempt` adds an attempt's usage to the run record by etag: a record that changed meanwhile is
read again and added to, and an attempt whose write went through is not added twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from e2e_harness import InProcessApp
from e2e_settings import watches_the_app_in_process

from durable_steps.activity import DEFAULT_RETRY
from http_api.openai_responses.ids import ResponseRef
from scripted_model import Fault, Match, Reply, Rule, Script, ScriptedModelServer
from scripted_model.script import ScriptedToolCall

PRICES = '{"scripted-model": {"input": 1000, "output": 2000}}'  # per 1M: 100 in + 10 out = 0.12
BILLED = {"prompt_tokens": 100, "completion_tokens": 10}
EMAIL = {"to": "bob@example.com", "subject": "Hi", "body": "Hello Bob"}
DURABLE_ATTEMPTS = DEFAULT_RETRY.max_number_of_attempts
DURABLE_RETRY_S = DEFAULT_RETRY.first_retry_interval_in_milliseconds / 1000


def step(key: str, text: str) -> Reply:
    return Reply(text=text, tool_calls=[ScriptedToolCall(name="lookup", arguments={"key": key})], usage=BILLED)


ANSWER = Reply(text="Done.", usage=BILLED)
EMAIL_CALL = Reply(tool_calls=[ScriptedToolCall(name="send_email", arguments=EMAIL)], usage=BILLED)  # needs approval
FAILING_AFTER_THE_LOOKUP = Script(rules=[  # the first call answers; every attempt of the second is billed, then breaks
    Rule(match=Match(last_tool_name="lookup"), reply=Reply.fail(Fault.billed(usage=BILLED))),
    Rule(match=Match(last_user="."), reply=step("a", "Looking up a.")),
])


@pytest.fixture
def app(app_with: Callable[..., AbstractContextManager[InProcessApp]]) -> Iterator[InProcessApp]:
    with app_with(MODEL_PRICES=PRICES) as started:
        yield started


def until_the_model_calls_give_up(app: InProcessApp) -> None:
    """The run settled, and Durable's retries of its failing model call (after 2 s, then 4 s) failed too."""
    app.settle()
    for _ in range(DURABLE_ATTEMPTS):
        app.advance(60)


def assert_usage(app: InProcessApp, view: dict[str, Any], attempts: int) -> None:
    """The run's usage is `attempts` billed attempts, in its view and its session's."""
    assert view["usage"]["total_tokens"] == 110 * attempts, view["usage"]
    assert view["usage"]["cost"] == pytest.approx(0.12 * attempts)
    session = app.http.get(f"/api/sessions/{view['session_id']}").json()
    assert session["runs"][-1]["usage"] == view["usage"]


def test_a_run_that_fails_with_a_model_error_shows_what_its_failed_attempts_were_billed(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """The first call answers (110); each of the second call's Durable attempts is billed 110 and breaks: the failed run
    shows all four. Rewound once the endpoint is back, the run counts those attempts once (not again on top of the
    failed run's usage) and its budget acts on them: 550 of 500 tokens spent after the rewound call, no call after it
    (counting only the answers, 220, would have let the next one through)."""
    model.set_script(FAILING_AFTER_THE_LOOKUP)
    started = app.start(agent="helper", input="Look up a and b.", budget={"max_total_tokens": 500})
    until_the_model_calls_give_up(app)
    failed = app.view(started["run_id"])

    assert failed["status"] == "failed" and failed["error"]["code"] == "model_call_failed", failed
    assert len(model.log.requests) == 1 + DURABLE_ATTEMPTS
    assert_usage(app, failed, 1 + DURABLE_ATTEMPTS)

    model.set_script(Script.of(step("b", "Now b."), "Never asked."))  # the endpoint is back
    assert app.http.post(f"/api/runs/{started['run_id']}/rewind").status_code == 202
    app.settle()
    done = app.view(started["run_id"])
    assert (done["status"], done["finish_reason"], done["output"]["text"]) == ("completed", "budget_exceeded", "Now b.")
    assert len(model.log.requests) == 2 + DURABLE_ATTEMPTS
    assert_usage(app, done, 2 + DURABLE_ATTEMPTS)


def test_a_run_that_fails_at_once_with_a_billed_model_error_shows_it(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer
) -> None:
    """A failure that is not retried (the endpoint refuses the request after a billed attempt the in-activity retry
    replaced) ends the run at once: what the replaced attempt was billed is the failed run's usage."""
    model.set_script(Script.of(Reply.fail(Fault.bad_request())))
    model.fail_next(Fault.billed(usage=BILLED))
    with app_with(MODEL_PRICES=PRICES, STREAM_PARTIAL_OUTPUT="false", MODEL_RETRY_INITIAL_DELAY="0") as app:
        started = app.start(agent="helper", input="Hello.")
        app.settle()
        view = app.view(started["run_id"])
        assert view["status"] == "failed", view
        assert [r.status for r in model.log.requests] == [200, 400]
        assert_usage(app, view, 1)


def test_a_run_cancelled_while_its_model_call_waits_for_a_retry_shows_its_failed_attempt(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """The call's first attempt was billed and broke; the run is cancelled while Durable waits to retry it: the call
    is never answered, and the cancelled run shows what its attempt was billed."""
    model.set_script(Script.of(ANSWER))
    model.fail_next(Fault.billed(usage=BILLED))
    started = app.start(agent="helper", input="Hello.")
    app.settle()
    assert app.cancel(started["run_id"]).status_code == 202
    app.settle()
    app.advance(60)
    view = app.view(started["run_id"])
    assert view["status"] == "cancelled", view
    assert len(model.log.requests) == 1
    assert_usage(app, view, 1)


def terminated(app: InProcessApp, run_id: str) -> dict[str, Any]:
    """Terminate the run's orchestration (Durable's HTTP API), then its view: closed by it as `run_terminated`."""
    terminate = app.http.post(f"/runtime/webhooks/durabletask/instances/{run_id}/terminate", params={"reason": "stuck"})
    assert terminate.status_code == 202
    app.settle()
    view = app.view(run_id)
    assert (view["status"], view["error"]["code"]) == ("cancelled", "run_terminated"), view
    return view


def test_a_terminated_run_shows_what_its_calls_and_failed_attempts_were_billed(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """The first call's first attempt is billed and breaks, its durable retry answers with an email to approve; once
    approved, the second call asks for another; then the orchestration is terminated. Closed by its view without its
    loop's count, the run shows all three attempts (the answers' stored usage and the failed attempt kept on the
    record; before, none of it), and its Responses turns add up to that."""
    model.set_script(Script.of(EMAIL_CALL, EMAIL_CALL, "Never asked."))
    model.fail_next(Fault.billed(usage=BILLED))
    started = app.start(agent="helper", input="Email Bob twice.")
    app.settle()
    app.advance(60)  # the durable retry of the first call
    [first] = app.approvals(started["run_id"])
    assert app.decide(started["run_id"], first["approval_id"], "approve").status_code == 202
    app.settle()
    assert len(model.log.requests) == 3 and len(app.approvals(started["run_id"])) == 2
    view = terminated(app, started["run_id"])
    assert_usage(app, view, 3)
    turns: list[int] = []
    ref = ResponseRef(started["run_id"])
    while (turn := app.http.get(f"/api/v1/responses/{ref.response_id}")).is_success:
        turns.append(turn.json()["usage"]["total_tokens"])
        ref = ref.next()
    assert turns[0] == 110 and sum(turns) == 330, turns  # the first turn's own call; the latest carries the failed one


def test_a_rewound_run_that_is_terminated_shows_its_calls_after_the_rewind_too(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """The run fails with its second call's attempts billed (closed with that usage); rewound, the call answers with
    an email to approve (110 more); then the orchestration is terminated. The run's usage counts the call made after
    the rewind too (it kept the failed close's, which the record already had)."""
    model.set_script(FAILING_AFTER_THE_LOOKUP)
    started = app.start(agent="helper", input="Look up a and b.")
    until_the_model_calls_give_up(app)
    assert_usage(app, app.view(started["run_id"]), 1 + DURABLE_ATTEMPTS)

    model.set_script(Script.of(EMAIL_CALL, "Never asked."))
    assert app.http.post(f"/api/runs/{started['run_id']}/rewind").status_code == 202
    app.settle()
    assert len(app.approvals(started["run_id"])) == 1
    view = terminated(app, started["run_id"])
    assert_usage(app, view, 2 + DURABLE_ATTEMPTS)


def changed_meanwhile(app: InProcessApp, change: Callable[..., Any]) -> Callable[[], None]:
    """Patch the app's store so that its first write of a failed attempt's usage runs through `change(update_run,
    run_id, changes)` (the real method, then what the write does instead); returns the undo."""
    store = app.services().current().store
    update_run = store.update_run
    changed: list[str] = []

    async def patched(run_id: str, **changes: Any) -> Any:
        if "failed_call_usage" in changes and not changed:
            changed.append(run_id)
            return await change(update_run, run_id, changes)
        return await update_run(run_id, **changes)

    store.update_run = patched

    def undo() -> None:
        store.update_run = update_run
        assert changed, "no failed attempt's usage was written"

    return undo


def fails_once_then_answers(app: InProcessApp, model: ScriptedModelServer, undo: Callable[[], None]) -> dict:
    """A run whose model call is billed and breaks once, then answers after Durable's retry."""
    model.set_script(Script.of(ANSWER))
    model.fail_next(Fault.billed(usage=BILLED))
    try:
        started = app.start(agent="helper", input="Hello.")
        app.settle()
        app.advance(DURABLE_RETRY_S)
        app.settle()
    finally:
        undo()
    view = app.view(started["run_id"])
    assert (view["status"], view["output"]["text"]) == ("completed", "Done."), view
    assert len(model.log.requests) == 2
    return view


@watches_the_app_in_process
def test_a_failed_attempt_kept_while_the_run_record_changed_is_not_lost(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """Between the attempt's read of the run and its write, another attempt of the same call (an activity delivered
    twice) kept its own 110 tokens: the write is refused by etag, and the attempt adds its usage to what the record
    holds now. Written over the record as it was read, the other attempt's tokens were lost."""

    async def other_attempt_first(update_run: Callable[..., Any], run_id: str, changes: dict) -> Any:
        await update_run(run_id, failed_call_usage={"1": {"input_tokens": 100, "output_tokens": 10,
                                                          "total_tokens": 110, "cost": 0.12}})
        return await update_run(run_id, **changes)

    view = fails_once_then_answers(app, model, changed_meanwhile(app, other_attempt_first))
    assert_usage(app, view, 3)  # the other attempt, this one, the answer


@watches_the_app_in_process
def test_a_failed_attempt_whose_write_went_through_unacknowledged_counts_once(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """The write of the attempt's usage went through but the store answered with a conflict (a resent request the
    etag refused): read again, the record has this attempt already, and it is not added a second time."""
    conflict = app.app_module("session_store").ConflictError

    async def written_then_refused(update_run: Callable[..., Any], run_id: str, changes: dict) -> Any:
        await update_run(run_id, **changes)
        raise conflict(f"run {run_id!r} changed since it was read (etag mismatch)")

    view = fails_once_then_answers(app, model, changed_meanwhile(app, written_then_refused))
    assert_usage(app, view, 2)
