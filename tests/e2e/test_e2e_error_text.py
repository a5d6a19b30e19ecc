"""Client-facing errors carry a stable code and a safe message, never Python exception text or Durable's failure
text; the detail goes to the log under the correlation id the message names."""

from __future__ import annotations

import logging

import pytest
from e2e_harness import InProcessApp

from agent_runs.client_errors import client_message, leaks
from scripted_model import Reply, Script, ScriptedModelServer

EMAIL = {"to": "bob@example.com", "subject": "Hi", "body": "Hello"}


def test_a_terminated_runs_reason_is_logged_not_shown(
    app: InProcessApp, model: ScriptedModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Done."))
    started = app.start(input="Email Bob")
    app.settle()
    reason = "ValueError: secret internals at /srv/app.py line 12"
    terminate = app.http.post(
        f"/runtime/webhooks/durabletask/instances/{started['run_id']}/terminate", params={"reason": reason}
    )
    assert terminate.status_code == 202
    app.settle()
    with caplog.at_level(logging.ERROR, logger="agent_runs"):
        error = app.view(started["run_id"])["error"]
    assert error["code"] == "run_terminated"
    assert "secret" not in error["message"] and "ValueError" not in error["message"]
    assert "(correlation id " in error["message"]
    correlation_id = error["message"].rsplit("correlation id ", 1)[1].rstrip(")")
    assert any(correlation_id in r.getMessage() and "secret internals" in r.getMessage() for r in caplog.records)
    again = app.view(started["run_id"])["error"]
    assert again == error  # stored once, shown the same on every poll


@pytest.mark.parametrize(
    ("code", "message", "shown"),
    [
        ("model_call_failed", "model_call_failed: Activity function 'call_model' failed:  KeyError: 'x'",
         "A model call failed after its retries."),
        ("run_crashed", "Orchestrator function 'agent_run' failed: RecursionError: maximum recursion depth exceeded",
         "The run stopped unexpectedly and was closed as failed."),
        ("weird", "Traceback (most recent call last):\n  File ...", "The run failed because of an internal error."),
        ("step_failed", "step 'x' failed: TypeError: unsupported operand",
         "The run failed because of an internal error."),
        ("model_http_400", "the prompt is not allowed", "the prompt is not allowed"),
        ("step_failed", "step 'sign_off' was rejected", "step 'sign_off' was rejected"),
        ("activity_failed", "step 'a' failed: an internal step failed (correlation id 0f1e2d3c-aa)",
         "An internal step failed after its retries. (correlation id 0f1e2d3c-aa)"),
    ],
)
def test_stored_error_messages_are_shown_safely(code: str, message: str, shown: str) -> None:
    assert client_message(code, message) == shown
    assert not leaks(client_message(code, message))
