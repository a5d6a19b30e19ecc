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
from e2e_harness import InProcessApp, parallel_calls, pending_ids, post_all_at_once
from e2e_settings import REPO_ROOT

from devhost.host import use_real_worker
from scripted_model import Reply, Script, ScriptedModelServer

STRICT = "AZURE_FUNCTIONS_DURABLE_STRICT_TYPING"
EMAIL = {"to": "bob@example.com", "subject": "Hi", "body": "Hello Bob"}
EMAIL_EVE = {"to": "eve@example.com", "subject": "Hi", "body": "Hello Eve"}


@pytest.fixture
def strict_app(app_with) -> Iterator[InProcessApp]:  # type: ignore[no-untyped-def]
    with app_with(**{STRICT: "1"}) as app:
        yield app


def _assert_strict_where_the_app_runs() -> None:
    """The setting reached the codec (in this process in devhost's own mode; the worker's is out of reach)."""
    if not use_real_worker(REPO_ROOT, None):
        from azure.functions import _durable_functions

        assert _durable_functions._is_strict_mode()


def test_a_run_with_tools_and_approvals_decided_together_and_twice_completes(
    strict_app: InProcessApp, model: ScriptedModelServer
) -> None:
    """Decisions carry their events through the strict codec too: two approvals of one batch, each sent twice at
    once (the same caller's retry is delivered again and applied once)."""
    model.set_script(Script.of(
        Reply.call("lookup", {"key": "bob"}), parallel_calls("send_email", EMAIL, EMAIL_EVE), "Sent to both.",
    ))
    view = strict_app.start_until_approval(input="Email Bob and Eve")
    _assert_strict_where_the_app_runs()
    approval_ids = pending_ids(view)
    assert len(approval_ids) == 2

    decisions = [(f"/api/runs/{view['run_id']}/approvals/{approval_id}", {"decision": "approve"})
                 for approval_id in approval_ids for _ in range(2)]
    model.hold_answers()  # the run waits until every copy is answered (a copy after its end would be a 409)
    try:
        responses = post_all_at_once(strict_app.host.base_url, decisions, {})
    finally:
        model.release_answers()
    assert [response.status_code for response in responses] == [202] * 4
    strict_app.settle()

    done = strict_app.view(view["run_id"])
    assert (done["status"], done["output"]["text"]) == ("completed", "Sent to both.")
    sent = strict_app.effects(view["session_id"], "email")
    assert sorted(sent, key=lambda e: e["to"]) == [EMAIL, EMAIL_EVE]  # each exactly once
    assert [record["status"] for record in strict_app.approvals(view["run_id"])] == ["approved", "approved"]


def test_a_waiting_run_cancelled_twice_at_once_ends_cancelled_and_its_session_goes_on(
    strict_app: InProcessApp, model: ScriptedModelServer
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Hello again."))
    started = strict_app.start(input="Email Bob")
    strict_app.settle()
    cancels = post_all_at_once(strict_app.host.base_url, [(f"/api/runs/{started['run_id']}/cancel", {})] * 2, {})
    assert [(c.status_code, c.json()["status"]) for c in cancels] == [(202, "cancelling")] * 2  # twice at once
    strict_app.settle()
    assert strict_app.view(started["run_id"])["status"] == "cancelled"
    assert strict_app.effects(started["session_id"]) == []

    following = strict_app.start(input="Hi", session_id=started["session_id"])
    strict_app.settle()
    done = strict_app.view(following["run_id"])
    assert (done["status"], done["output"]["text"]) == ("completed", "Hello again.")
