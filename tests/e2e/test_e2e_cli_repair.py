"""`agentctl rewind`, `fork` and `export` as a script uses them: a real `python -m agentctl` process against the app
on devhost, without a terminal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_harness import InProcessApp
from test_e2e_cli import run_cli
from test_e2e_cli_output import review_script

from scripted_model import Fault, Match, Reply, Rule, Script, ScriptedModelServer


@pytest.fixture
def store_backend() -> str:
    return "sqlite"  # the client does not see the store: once is enough


def test_rewind_fork_and_export_from_the_command_line(
    app: InProcessApp, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.set_script(Script(rules=[Rule(reply=Reply.fail(Fault(status=400, message="prompt refused")))]))
    started = app.start(input="look up paris")
    app.settle()
    assert app.view(started["run_id"])["status"] == "failed"
    run_id = started["run_id"]

    model.set_script(Script(rules=[Rule(match=Match(last_user="."), reply=Reply.say("Paris is lovely."))]))
    rewound = run_cli(app, "rewind", run_id)
    assert rewound.returncode == 0, rewound.stderr
    assert f"Run {run_id} goes on from call_model" in rewound.stdout
    app.settle()
    shown = run_cli(app, "show", run_id)
    assert shown.returncode == 0 and "completed" in shown.stdout and "Paris is lovely." in shown.stdout

    again = run_cli(app, "--json", "rewind", run_id)
    assert again.returncode == 8 and json.loads(again.stdout)["error"]["code"] == "run_not_failed"  # 409: conflict

    forked = run_cli(app, "--json", "fork", run_id, "look up rome", "--wait")
    assert forked.returncode == 0, forked.stderr
    view = json.loads(forked.stdout.strip().splitlines()[-1])
    assert view["status"] == "completed" and view["session_id"] != started["session_id"]

    case = tmp_path / "case.json"
    exported = run_cli(app, "export", run_id, "-o", str(case))
    assert exported.returncode == 0, exported.stderr
    transcript = json.loads(case.read_text())
    assert transcript["run_id"] == run_id and transcript["model_calls"][0]["answer"]["text"] == "Paris is lovely."


def test_rewind_takes_a_workflow_run_id_and_follows_it(app_with, model: ScriptedModelServer) -> None:
    """`agentctl rewind` takes a workflow run's id as `show` does (the app rewinds those on the workflow routes), and
    `--follow` attaches to the workflow as `show --follow` would: here up to its sign-off gate (no terminal: exit 4)."""
    model.set_script(Script(rules=[Rule(reply=Reply.fail(Fault(status=400, message="prompt refused")))]))
    with app_with(AGENTS_PACKAGE="served_agents") as app:
        failed = run_cli(app, "--json", "workflows", "run", "review_pipeline", "--input", '{"topic": "durable agents"}',
                         "--wait")
        view = json.loads(failed.stdout.strip().splitlines()[-1])
        assert view["status"] == "failed" and view["workflow"] == "review_pipeline", failed.stdout + failed.stderr
        run_id = view["run_id"]

        model.set_script(review_script())
        followed = run_cli(app, "rewind", run_id, "--follow")
        assert followed.returncode == 4, followed.stdout + followed.stderr
        assert "step write (agent) ok" in followed.stdout and "workflow_gate:sign_off" in followed.stdout
        assert "Waiting for approval. Decide with: agentctl approvals (run " in followed.stdout

        again = run_cli(app, "--json", "rewind", run_id)
        assert again.returncode == 8 and json.loads(again.stdout)["error"]["code"] == "run_not_failed"  # 409
