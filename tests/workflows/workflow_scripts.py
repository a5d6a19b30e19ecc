"""Shared data of the workflow tests: paths and the scripted model's answers for every shipped agent."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app_services import start_app_host, stop_app_host

from devhost.testing import InProcessHost
from scripted_model.script import Match, Reply, Rule, Script, ScriptedToolCall
from scripted_model.server import ScriptedModelServer

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES_DIR = Path(__file__).resolve().parent
TEST_WORKFLOWS_PACKAGE = "wf_fixtures"

REVIEW_REVISE = {"verdict": "revise", "score": 6, "comments": "Tighten the intro."}
REVIEW_APPROVE = {"verdict": "approve", "score": 9, "comments": "Good as it is."}


def agent_rule(system: str, reply: Reply, **match: Any) -> Rule:
    return Rule(match=Match(system=system, **match), reply=reply)


def standard_script(*, review: dict[str, Any] = REVIEW_REVISE, resolved_after: int | None = None) -> Script:
    """Answers for every shipped agent, told apart by their instructions. `resolved_after`: the status checker
    says 'resolved' from that check on (None: never)."""
    unresolved = Reply(json_output={"resolved": False, "status": "waiting for customer"})
    resolved = Reply(json_output={"resolved": True, "status": "closed"})
    checked = Match(system="check support tickets", after_tool_results=True)
    if resolved_after is None:
        checker_answers = [Rule(match=checked, reply=unresolved)]
    else:
        earlier = [Rule(match=checked, reply=unresolved, times=resolved_after - 1)] if resolved_after > 1 else []
        checker_answers = [*earlier, Rule(match=checked, reply=resolved)]
    return Script(
        rules=[
            agent_rule("You are a writer", Reply(text="Revised draft: tight and clear."), last_user="^Revise"),
            agent_rule("You are a writer", Reply(text="First draft about durable agents.")),
            agent_rule("demanding reviewer", Reply(json_output=review)),
            agent_rule("law and compliance", Reply(text="Legal: acceptable with a DPA.")),
            agent_rule("finance and cost", Reply(text="Finance: pays back in a year.")),
            agent_rule("engineering", Reply(text="Technical: feasible in a quarter.")),
            agent_rule("chair a panel", Reply(text="Recommendation: go ahead, sign a DPA first.")),
            agent_rule(
                "check support tickets",
                Reply(tool_calls=[ScriptedToolCall(name="lookup_ticket", arguments={"ticket": "T-42"})]),
                after_tool_results=False,
            ),
            *checker_answers,
            agent_rule(
                "helpful assistant",
                Reply(tool_calls=[ScriptedToolCall(
                    name="send_email", arguments={"to": "bob@example.com", "subject": "Hi", "body": "Hello"})]),
                last_user="email",
                after_tool_results=False,
            ),
            agent_rule("helpful assistant", Reply(text="Hello again! Just following up on your ticket.")),
        ],
        default=Reply(text="(unscripted)"),
    )


def stop_host(app: Any) -> None:
    """Close the services the host's modules built (their store thread), then stop the host - even when closing
    fails, so the host always restores the environment it changed (a leaked WORKFLOWS_PACKAGE breaks later hosts)."""
    stop_app_host(app)


def app_env(model: ScriptedModelServer, **extra: str) -> dict[str, str]:
    return {
        "SCRIPTED_MODEL_URL": str(model.base_url),
        "SESSION_STORE_PATH": ":memory:",
        "WORKFLOWS_PACKAGE": TEST_WORKFLOWS_PACKAGE,
        "CONTINUATION_TOKEN_SECRET": "workflow-tests-secret",
        "MODEL_RETRY_MAX_ATTEMPTS": "1",
        **extra,
    }


@contextmanager
def workflow_host(env: dict[str, str], state_path: Path | None = None) -> Iterator[InProcessHost]:
    """The app on devhost (virtual clock) with these settings and the test workflows importable; stopped at exit.
    `state_path`: the engine's state file, for a host started again on the state a killed one left."""
    if str(FIXTURES_DIR) not in sys.path:
        sys.path.insert(0, str(FIXTURES_DIR))
    app = start_app_host(REPO_ROOT, clock="virtual", env=env, **({"state_path": state_path} if state_path else {}))
    try:
        yield app
    finally:
        stop_host(app)
