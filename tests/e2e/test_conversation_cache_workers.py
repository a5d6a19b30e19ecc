"""The conversation cache of one process while other processes run steps of the same run.

Activities of one run go to whichever worker process is free (`FUNCTIONS_WORKER_PROCESS_COUNT` > 1, or several
instances on Azure), each with its own `ConversationCache`. A step run elsewhere leaves its block unsettled in this
process's entry; what this process serves must still be what the store holds. Here "another process" is this
process's cache set aside for the span of one step (a fresh, empty one in its place): deterministic, where the pool's
least-busy choice is not, and the same as far as the cache can tell.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from e2e_harness import InProcessApp, parallel_calls, pending_ids
from e2e_settings import watches_the_app_in_process

from scripted_model import Script, ScriptedModelServer

pytestmark = watches_the_app_in_process  # swaps the app's own cache: the app must run in this process


def in_another_process(app: InProcessApp, step: Callable[[], Any]) -> None:
    """Run `step` (and let the app settle) as a worker process without this process's conversation cache would."""
    services = app.services().current()
    own = services.conversations
    services.__dict__["conversations"] = type(own)()  # (a cached_property: the instance's dict holds it)
    try:
        step()
        app.settle()
    finally:
        services.__dict__["conversations"] = own


def test_edited_arguments_applied_by_another_process_are_the_ones_run(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """The decision with edited arguments is applied in another process; the tool runs here, from this process's
    entry (the model call and the approval requests, settled here). It must run with what the person approved."""
    first, second = {"account": "GB1234", "amount": 900}, {"account": "GB5678", "amount": 5}
    model.set_script(Script.of(parallel_calls("transfer", first, second), "Done."))
    view = app.start_until_approval()
    by_account = {a["arguments"]["account"]: a["approval_id"] for a in view["pending_approvals"]}
    assert set(by_account) == {"GB1234", "GB5678"}

    edited = {"account": "GB1234", "amount": 90}
    in_another_process(app, lambda: app.decide(view["run_id"], by_account["GB1234"], "approve", arguments=edited))
    assert pending_ids(app.view(view["run_id"])) == [by_account["GB5678"]]  # applied: one still waits

    # The last decision is applied here, and the tools run here.
    assert app.decide(view["run_id"], by_account["GB5678"], "approve").status_code == 202
    app.settle()

    assert app.view(view["run_id"])["status"] == "completed"
    assert sorted(app.effects(view["session_id"], "transfer"), key=str) == sorted([edited, second], key=str)
