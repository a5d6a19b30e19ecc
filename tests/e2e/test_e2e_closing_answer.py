"""The model call whose answer ends a run's loop also closes the run (`agent_runs.finishing.close_if_final`): one
activity and one orchestrator episode less per run, with the same end state as closing in `finish_run`. A cancel
requested while that answer is awaited still cancels the run; a crash after the close is in `test_e2e_crash.py`."""

from __future__ import annotations

from typing import Any

from e2e_harness import PROGRESS_TIMEOUT_S, InProcessApp, completed_activities, contents_of

from scripted_model import Reply, Script, ScriptedModelServer


def _total_tokens(messages: list[dict[str, Any]]) -> int:
    """What the run's model calls reported (each call's usage is stored once, on its answer)."""
    return sum(m["usage"]["total_tokens"] for m in messages if m.get("usage"))


def test_a_final_answer_closes_the_run_in_the_model_call_that_received_it(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    model.set_script(Script.of(Reply.call("lookup", {"key": "k1"}), Reply.call("lookup", {"key": "k2"}), "Both."))
    started = app.start(input="Look up k1 and k2")
    app.settle()

    view = app.view(started["run_id"])
    assert (view["status"], view["output"]["text"]) == ("completed", "Both.")
    steps = ["call_model", "invoke_tool", "call_model", "invoke_tool", "call_model"]
    assert completed_activities(app.history(started["run_id"])) == steps  # no finish_run
    status = app.history(started["run_id"])
    assert status["runtimeStatus"] == "Completed"
    assert (status["output"]["status"], status["output"]["reason"]) == ("completed", "stop")
    messages = app.session_messages(started["session_id"])
    # The usage closed into the run counts the answer that closed it.
    assert view["usage"]["total_tokens"] == _total_tokens(messages) > 0
    assert len(model.log.requests) == 3
    # The session is free for the next run, which sees the whole conversation.
    model.set_script(Script.of("Again."))
    nxt = app.start(input="And now?", session_id=started["session_id"])
    app.settle()
    assert app.view(nxt["run_id"])["output"]["text"] == "Again."
    assert "Both." in str(model.log.last.messages)


def test_a_cancel_while_the_final_answer_is_awaited_still_cancels_the_run(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    model.set_script(Script.of("An answer that arrives after the cancel."))
    model.hold_answers()
    started = app.start(input="A question")
    model.log.wait_for(1, timeout=PROGRESS_TIMEOUT_S)  # the model has the request: the call is in flight

    assert app.cancel(started["run_id"]).status_code == 202
    model.release_answers()
    app.settle()

    view = app.view(started["run_id"])
    assert (view["status"], view["error"]["code"]) == ("cancelled", "cancelled")
    # The call saw the stored cancel request and left the close to the orchestrator, which took the cancel.
    assert completed_activities(app.history(started["run_id"])) == ["call_model", "finish_run"]
    assert app.history(started["run_id"])["output"]["status"] == "cancelled"
    messages = app.session_messages(started["session_id"])
    assert [contents_of(m) for m in messages] == [["text"], ["text"]]  # the answer in flight was stored: nothing lost
