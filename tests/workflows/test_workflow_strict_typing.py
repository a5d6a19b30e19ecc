"""Workflows under Azure's strict Durable typing (`AZURE_FUNCTIONS_DURABLE_STRICT_TYPING=1`, azure-functions 1.26):
child runs as sub-orchestrations, parallel branches, a person's sign-off and a durable wait carry only plain JSON, so
they run as they do under the loose default (agent runs: tests/e2e/test_e2e_strict_typing.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from workflow_helpers import decide, settle, start, step_ids, view
from workflow_scripts import app_env, standard_script, workflow_host

from devhost.testing import InProcessHost
from scripted_model.server import ScriptedModelServer

DAY = 86400


@pytest.fixture
def strict_host(model: ScriptedModelServer) -> Iterator[InProcessHost]:
    with workflow_host(app_env(model, AZURE_FUNCTIONS_DURABLE_STRICT_TYPING="1")) as app:
        from azure.functions import _durable_functions

        assert _durable_functions._is_strict_mode()  # the codec the app's activities go through sees the setting
        yield app


def test_a_pipeline_with_a_revision_and_a_sign_off_completes(strict_host: InProcessHost) -> None:
    run_id = start(strict_host, "review_pipeline", {"topic": "durable agents"})["run_id"]
    settle(strict_host)
    waiting = view(strict_host, run_id)
    assert step_ids(waiting) == ["write", "review", "needs_revision", "revise", "final"]
    [gate] = waiting["pending_approvals"]

    decide(strict_host, run_id, gate["approval_id"])
    settle(strict_host)
    output = view(strict_host, run_id)["output"]
    assert output["review"] == {"verdict": "revise", "score": 6, "comments": "Tighten the intro."}
    assert (output["revised"], output["published"]) == (True, True)


def test_parallel_experts_and_a_two_day_wait_complete(strict_host: InProcessHost, model: ScriptedModelServer) -> None:
    response = strict_host.client.post(
        "/api/workflows/expert_panel/runs", json={"input": {"question": "Adopt durable agents?"}, "wait_seconds": 20}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "completed"
    assert body["output"]["legal"] == "Legal: acceptable with a DPA."
    assert len(body["steps"][0]["run_ids"]) == 3

    model.set_script(standard_script(resolved_after=1))
    run_id = start(strict_host, "follow_up", {"ticket": "T-42"})["run_id"]
    settle(strict_host)
    assert view(strict_host, run_id)["active_step"]["id"] == "wait"
    strict_host.advance(2 * DAY)
    settle(strict_host)
    assert view(strict_host, run_id)["status"] == "completed"
