"""A workflow's steps outlast a store outage longer than an activity's own retries (three, seconds apart): the step's
activity is tried again after each wait of `OUTAGE_RETRIES` (about an hour in all), so once the store is back the
workflow goes on and ends as it would have (before: the step failed, and the workflow with it). The workflow's close
and its cancel of its children outlast one the same way (`test_workflow_cancel_races.py`)."""

from __future__ import annotations

import sys
from typing import Any

from store_outage import bug, outage, store_down
from workflow_helpers import decide, settle, start, view

from durable_steps import OUTAGE_RETRIES

TERMINAL = {"Completed", "Failed", "Terminated", "Canceled"}


def _store(host: Any) -> Any:
    return sys.modules["agent_runs.services"].RunServices.current().store  # the host's modules: the app's store


def signed_off_while_the_journal_is_down(host: Any, minutes: int, failure: Any = outage) -> tuple[str, list[str]]:
    """`review_pipeline` waits at its sign-off gate; it is approved, and for `minutes` of durable time the workflow
    cannot write its journal (`append_messages`), which recording the decision does."""
    run_id = start(host, "review_pipeline", {"topic": "an outage"})["run_id"]
    settle(host)
    [gate] = view(host, run_id)["pending_approvals"]
    with store_down(_store(host), "append_messages", failure=failure) as refused:
        decide(host, run_id, gate["approval_id"])
        settle(host)
        for _ in range(minutes):
            host.advance(60)
            settle(host)
        assert refused
    return run_id, refused


def until_ended(host: Any, run_id: str) -> str:
    for _ in range(100):
        status = host.get_status(run_id)["runtimeStatus"]
        if status in TERMINAL:
            return status
        host.advance(60)
        settle(host)
    raise AssertionError(f"workflow {run_id} still running")


def test_a_step_whose_store_is_down_for_ten_minutes_goes_on_once_it_is_back(host) -> None:
    run_id, refused = signed_off_while_the_journal_is_down(host, 10)
    assert host.get_status(run_id)["runtimeStatus"] == "Running" and len(refused) > 6
    assert until_ended(host, run_id) == "Completed"
    done = view(host, run_id)
    assert done["status"] == "completed", done
    assert [step["status"] for step in done["steps"] if step["step"] == "sign_off"] == ["ok"]


def test_a_step_whose_store_stays_down_for_hours_fails_the_workflow_after_about_an_hour(host) -> None:
    run_id, refused = signed_off_while_the_journal_is_down(host, 300)
    assert refused.count("append_messages") >= 3 * (len(OUTAGE_RETRIES) + 1)
    assert until_ended(host, run_id) == "Completed"
    failed = view(host, run_id)
    assert (failed["status"], failed["error"]["step"]) == ("failed", "sign_off"), failed


def test_a_step_that_fails_with_a_bug_fails_the_workflow_after_the_activitys_own_retries(host) -> None:
    run_id, refused = signed_off_while_the_journal_is_down(host, 3, failure=bug)
    assert refused.count("append_messages") == 3
    failed = view(host, run_id)
    assert (failed["status"], failed["error"]["step"]) == ("failed", "sign_off"), failed
