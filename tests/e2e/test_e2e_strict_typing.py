"""Agent runs under Azure's strict Durable typing (`AZURE_FUNCTIONS_DURABLE_STRICT_TYPING=1`).

azure-functions 1.26 added a strict mode to the codec that carries activity inputs and results (`df_dumps`/`df_loads`):
no custom-object envelopes, nothing but plain JSON, and every run of the loose default warns "prepare for strict
typing". Users who follow that advice, or a release that makes strict the default, must find every run working: the
app passes only JSON text and plain values across the Durable boundary. Through devhost's own mode the converters
are azure-functions' (`devhost/invoke.py`); through the real worker (the Python 3.13 run) they are the worker's, in
processes that get the setting as an app setting.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from e2e_harness import InProcessApp, pending_ids
from e2e_settings import REPO_ROOT

from devhost.host import use_real_worker
from scripted_model import Reply, Script, ScriptedModelServer

STRICT = "AZURE_FUNCTIONS_DURABLE_STRICT_TYPING"
EMAIL = {"to": "bob@example.com", "subject": "Hi", "body": "Hello Bob"}


@pytest.fixture
def strict_app(app_with) -> Iterator[InProcessApp]:  # type: ignore[no-untyped-def]
    with app_with(**{STRICT: "1"}) as app:
        yield app


def _assert_strict_where_the_app_runs() -> None:
    """The setting reached the codec (in this process in devhost's own mode; the worker's is out of reach)."""
    if not use_real_worker(REPO_ROOT, None):
        from azure.functions import _durable_functions

        assert _durable_functions._is_strict_mode()


def test_a_run_with_tools_and_an_approval_completes(strict_app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(
        Reply.call("lookup", {"key": "bob"}), Reply.call("send_email", EMAIL), "Sent to Bob.",
    ))
    view = strict_app.start_until_approval(input="Email Bob")
    _assert_strict_where_the_app_runs()
    [approval_id] = pending_ids(view)
    response = strict_app.http.post(f"/api/runs/{view['run_id']}/approvals/{approval_id}", json={"decision": "approve"})
    assert response.status_code == 202
    strict_app.settle()

    done = strict_app.view(view["run_id"])
    assert (done["status"], done["output"]["text"]) == ("completed", "Sent to Bob.")
    assert strict_app.effects(view["session_id"], "email") == [EMAIL]  # exactly once
    [record] = strict_app.approvals(view["run_id"])
    assert record["status"] == "approved"


def test_a_waiting_run_is_cancelled_and_its_session_goes_on(
    strict_app: InProcessApp, model: ScriptedModelServer
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Hello again."))
    started = strict_app.start(input="Email Bob")
    strict_app.settle()
    assert strict_app.cancel(started["run_id"]).status_code == 202
    strict_app.settle()
    assert strict_app.view(started["run_id"])["status"] == "cancelled"
    assert strict_app.effects(started["session_id"]) == []

    following = strict_app.start(input="Hi", session_id=started["session_id"])
    strict_app.settle()
    done = strict_app.view(following["run_id"])
    assert (done["status"], done["output"]["text"]) == ("completed", "Hello again.")
