"""One conformance table of seed 000's middleware semantics (plus structured output), run against both runners.

Every row is an agent of `fixture_agents/semantics.py` and a model script; the in-process `AgentRunner` and a durable
run through the HTTP API on devhost must end it the same way: same status, same error code, same output text, the
same number of model calls, the same run-middleware phases (each once), and the same stored conversation shape.
The restart tests kill a child devhost between the run middleware's pre- and post-processing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2e_harness import FINAL, InProcessApp, wait_for_file
from semantics_agents import agents as semantics
from test_e2e_cancel import CANCELLED_BY_CLIENT, final_answer_after_its_cancel_was_flagged
from test_e2e_crash import CrashableApp

from agent_runs.contracts import MiddlewareBeforeResult
from agent_runtime.messages import Message
from agent_runtime.models import OpenAIChatClient
from agent_runtime.runner import AgentRunner
from scripted_model import Reply, Script, ScriptedModelServer

BOTH = ("outer.before", "outer.after")
BEFORE = ("outer.before",)


@dataclass(frozen=True)
class Case:
    agent: str
    replies: tuple[Reply | str, ...]
    status: str
    code: str | None
    text: str | None  # None: not checked (a failed run has no answer)
    model_calls: int
    phases: tuple[str, ...]
    input: str = "hello"
    model_sees: str | None = None  # a text the (last) model request must contain
    stored_answer: str | None = None  # the last assistant text stored in the conversation, when it differs

    @property
    def id(self) -> str:
        return self.agent


CASES = [
    # run middleware returns without call_next: no model call, upstream post-processing still runs
    Case("mw_short_str", (), "completed", None, "cached answer", 0, BOTH),
    Case("mw_short_message", (), "completed", None, "cached message", 0, BOTH),
    Case("mw_short_result", (), "completed", None, "cached result", 0, BOTH),
    # MiddlewareTermination before call_next: no model call, no upstream post-processing
    Case("mw_terminate_before", (), "completed", None, "blocked answer", 0, BEFORE),
    Case("mw_terminate_before_bare", (), "failed", "middleware_terminated", None, 0, BEFORE),
    # MiddlewareTermination after call_next: the run happened, upstream post-processing is skipped
    Case("mw_terminate_after", ("Hello.",), "completed", None, "stopped answer", 1, BEFORE, stored_answer="Hello."),
    Case("mw_terminate_after_bare", ("Hello.",), "completed", None, "Hello.", 1, BEFORE),
    # post-processing replaces the output (the stored answer stays the model's)
    Case("mw_upper", ("Hello.",), "completed", None, "HELLO.", 1, BOTH, stored_answer="Hello."),
    # metadata set by an outer layer before the run is read by an inner layer after it
    Case("mw_metadata", ("Hello.",), "completed", None, "Hello. [outer-was-here]", 1, BOTH, stored_answer="Hello."),
    # pre-processing rewrites the input: the model sees the rewritten text
    Case("mw_guard", ("Hello.",), "completed", None, "Hello.", 1, BOTH, input="my secret", model_sees="[redacted]"),
    # any other exception: failed with a stable code, no model call
    Case("mw_error", (), "failed", "run_middleware_error", None, 0, BEFORE),
    Case("mw_error_after", ("Hello.",), "failed", "run_middleware_error", None, 1, BEFORE),
    # chat middleware terminating with a result: that is the answer, the loop ends
    Case("mw_chat_answer", (), "completed", None, "the chat layer answered", 0, ()),
    # ... even after the model proposed a tool call: the call is not stored and the tool never runs
    Case(
        "mw_chat_overrule", (Reply.call("lookup", {"key": "k"}),), "completed", None, "the chat layer answered", 1, ()
    ),
    # chat middleware terminating without a result: failed, not retried
    Case("mw_chat_bare", (), "failed", "middleware_terminated", None, 0, ()),
    # chat middleware returning without calling the model or setting a result: failed, not retried
    Case("mw_chat_empty", (), "failed", "chat_middleware_no_result", None, 0, ()),
    # structured output that does not validate: failed, the answer's text kept
    Case(
        "mw_structured",
        (Reply(json_output={"city": "Oslo"}),),
        "failed",
        "invalid_structured_output",
        '{"city": "Oslo"}',
        1,
        (),
    ),
]


@dataclass
class Outcome:
    status: str
    code: str | None
    text: str
    stored: list[dict[str, Any]]  # the run's stored messages (as JSON)


def check(case: Case, outcome: Outcome, model: ScriptedModelServer, phases: list[str]) -> None:
    assert outcome.status == case.status, outcome
    assert outcome.code == case.code, outcome
    if case.text is not None:
        assert outcome.text == case.text
    assert model.log.total == case.model_calls
    assert tuple(phases) == case.phases  # each phase at most once
    if case.model_sees is not None:
        assert case.model_sees in str(model.log.last.body["messages"])
        assert case.model_sees in _text(outcome.stored[0])  # and it is what the conversation keeps as the input
    answers = [m for m in outcome.stored if m["role"] == "assistant" and _text(m)]
    if case.status == "completed":
        assert _text(answers[-1]) == (case.stored_answer or case.text)
    stored_calls = [c for m in outcome.stored for c in m["contents"] if c["type"] == "function_call"]
    assert stored_calls == []  # no case here runs (or leaves) a tool call
    assert outcome.stored[0]["role"] == "user"  # the input is stored however the run ended


def _text(message: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in message["contents"] if c["type"] == "text")


AGENTS = {"AGENTS_PACKAGE": "semantics_agents"}


@pytest.fixture
def app(app_with: Callable[..., AbstractContextManager[InProcessApp]]) -> Iterator[InProcessApp]:
    """The app serving the conformance agents, in-process on the virtual clock."""
    with app_with(**AGENTS) as started:
        yield started


@pytest.fixture
async def model_client(model: ScriptedModelServer) -> AsyncIterator[OpenAIChatClient]:
    client = OpenAIChatClient.compatible(base_url=model.base_url, model="scripted-model", timeout=10)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_in_process_runner(
    case: Case,
    model: ScriptedModelServer,
    model_client: OpenAIChatClient,
    marker_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("E2E_MARKER_DIR", str(marker_dir))
    model.set_script(Script.of(*case.replies))
    agent = getattr(semantics, case.agent)
    result = await AgentRunner(agent, model_client).run(case.input)
    stored = [m.model_dump(mode="json") for m in result.messages]
    outcome = Outcome(result.status, result.code, result.text, stored)
    check(case, outcome, model, semantics.traced(marker_dir, result.run_id))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_durable_run(case: Case, app: InProcessApp, model: ScriptedModelServer, marker_dir: Path) -> None:
    model.set_script(Script.of(*case.replies))
    started = app.start(agent=case.agent, input=case.input)
    app.settle()
    view = app.view(started["run_id"])
    assert view["status"] in FINAL and view["continuation_token"] is None
    output = view["output"] or {}
    code = view["error"]["code"] if view["error"] else None
    stored = [m["message"] for m in view["updates"]]
    outcome = Outcome(view["status"], code, output.get("text", ""), stored)
    check(case, outcome, model, semantics.traced(marker_dir, started["run_id"]))


def test_redelivered_middleware_activities_do_not_run_it_again(
    app: InProcessApp, model: ScriptedModelServer, marker_dir: Path
) -> None:
    """Durable delivers an activity at least once: the pre-processing and finish activities delivered again with
    their recorded inputs find their phase's recorded outcome and do not run the middleware again."""
    model.set_script(Script.of("Hello."))
    started = app.start(agent="mw_upper", input="hello")
    app.settle()
    run_id = started["run_id"]
    scheduled = {  # each activity's input as Durable recorded it (a list holding the JSON text of the payload)
        event["FunctionName"]: json.loads(json.loads(event["Input"])[0])
        for event in app.history(run_id)["historyEvents"]
        if event["EventType"] == "TaskCompleted"
    }
    activities = {
        "run_middleware_before": sys.modules["activities.run_middleware"].run_middleware_before.execute,
        "finish_run": sys.modules["activities.finish"].finish_run.execute,
    }
    again = {name: app.host.run(activity(scheduled[name])) for name, activity in activities.items()}

    # read as the orchestrator reads it (a field at its default is left out of the payload)
    assert MiddlewareBeforeResult.model_validate(again["run_middleware_before"]) == MiddlewareBeforeResult(proceed=True)
    assert again["finish_run"]["status"] == "completed"
    assert semantics.traced(marker_dir, run_id) == list(BOTH)
    view = app.view(run_id)
    assert (view["status"], view["output"]["text"]) == ("completed", "HELLO.")


def test_post_processing_of_a_run_whose_cancel_was_flagged_sees_it_cancelled(
    app: InProcessApp, model: ScriptedModelServer, marker_dir: Path
) -> None:
    """A cancel is flagged while the run's last model call is in flight, and the final answer reaches the
    orchestration before the cancel event: the run ends `cancelled` (the flag decides, `rules.finish`), and the run
    middleware's post-processing is given that outcome. Before, it was given the run `completed` with the answer, and
    the store then wrote the run cancelled: a layer that audits or notifies reported an end the run did not have."""
    started = final_answer_after_its_cancel_was_flagged(app, model, agent="mw_outcome")

    view = app.view(started["run_id"])
    assert (view["status"], view["error"]) == ("cancelled", CANCELLED_BY_CLIENT)
    assert semantics.traced(marker_dir, started["run_id"]) == ["after:cancelled"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("agent", "text", "phases"),
    [
        ("mw_slow", "DONE. [OUTER-WAS-HERE]", BOTH),  # post-processing replaces the output, reads the metadata
        ("mw_slow_stop", "stopped answer", BEFORE),  # termination after the run skips the outer post-processing
    ],
)
def test_restart_between_pre_and_post_processing(
    tmp_path: Path,
    model: ScriptedModelServer,
    store_settings: dict[str, str],
    agent: str,
    text: str,
    phases: tuple[str, ...],
) -> None:
    """The host is killed while the run's tool runs (after the pre-processing, before the post-processing) and
    started again: each phase ran once, and the post-processing saw the metadata the pre-processing left."""
    model.set_script(Script.of(Reply.call("slow_step", {"label": "once"}), "Done."))
    app = CrashableApp(tmp_path, model, {**store_settings, **AGENTS})
    app.host.start()
    try:
        started = app.api.start(agent=agent, input="go")
        wait_for_file(app.marker_dir / "slow_step.started")
        assert semantics.traced(app.marker_dir, started["run_id"]) == ["outer.before"]

        app.host.kill()
        (app.marker_dir / "slow_step.release").touch()
        app.host.start()

        final = app.api.wait_for(started["run_id"], FINAL)
        assert (final["status"], final["output"]["text"]) == ("completed", text)
        assert semantics.traced(app.marker_dir, started["run_id"]) == list(phases)
        messages, _ = app.stored(started["session_id"])
        assert Message.model_validate(messages[-1].payload).text == "Done."  # the stored answer is the model's
    finally:
        app.host.close()
