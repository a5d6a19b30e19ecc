"""The offline demo, end to end: the shipped `assistant` agent with no model configured, so the app starts the demo
brain itself (a scripted server driven through the real `openai` client). The README's two example prompts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from e2e_harness import InProcessApp, pending_ids
from e2e_settings import TOKEN_SECRET, running_app


@pytest.fixture
def demo_app() -> Iterator[InProcessApp]:
    """The shipped agents and no model settings at all (only an in-memory store and a known token secret)."""
    with running_app({"SESSION_STORE_PATH": ":memory:", "CONTINUATION_TOKEN_SECRET": TOKEN_SECRET}, "sqlite") as app:
        yield app


def test_weather_question_is_answered_with_the_tool(demo_app: InProcessApp) -> None:
    started = demo_app.start(agent="assistant", input="What's the weather in Paris?")
    demo_app.settle()

    view = demo_app.view(started["run_id"])
    assert view["status"] == "completed"
    calls = [c for u in view["updates"] for c in u["message"]["contents"] if c["type"] == "function_call"]
    assert [(c["name"], c["arguments"]) for c in calls] == [("get_weather", {"city": "Paris"})]
    assert "Paris" in view["output"]["text"]
    assert demo_app.http.get("/api/health").json()["model_provider"] == "scripted"


def test_email_waits_for_approval_then_is_sent_once(demo_app: InProcessApp) -> None:
    started = demo_app.start(agent="assistant", input="Email bob@example.com to say hi")
    demo_app.settle()
    view = demo_app.view(started["run_id"])
    assert view["status"] == "requires_action"
    [approval] = view["pending_approvals"]
    assert (approval["tool"], approval["arguments"]["to"]) == ("send_email", "bob@example.com")

    assert demo_app.decide(started["run_id"], pending_ids(view)[0], "approve").status_code == 202
    demo_app.settle()

    assert demo_app.view(started["run_id"])["status"] == "completed"
    [email] = demo_app.effects(started["session_id"], "email")
    assert email["to"] == "bob@example.com"


def test_the_email_follows_the_request_and_a_follow_up_in_the_session_continues_it(demo_app: InProcessApp) -> None:
    """The README tour's story: an email that says what was asked, then questions in the same session."""
    started = demo_app.start(agent="assistant", input="Email bob@example.com that the report is ready")
    demo_app.settle()
    [approval] = demo_app.view(started["run_id"])["pending_approvals"]
    assert approval["arguments"] == {
        "to": "bob@example.com",
        "subject": "The report is ready",
        "body": "Hi Bob,\n\nThe report is ready.\n\nBest regards",
    }
    assert demo_app.decide(started["run_id"], approval["approval_id"], "approve").status_code == 202
    demo_app.settle()
    assert demo_app.view(started["run_id"])["output"]["text"] == (
        'Done: I emailed bob@example.com with the subject "The report is ready".'
    )

    asked = demo_app.start(agent="assistant", input="What did you send?", session_id=started["session_id"])
    demo_app.settle()
    answer = demo_app.view(asked["run_id"])["output"]["text"]
    assert answer.startswith('I sent an email to bob@example.com with the subject "The report is ready"')

    weather = demo_app.start(agent="assistant", input="What is the weather in Paris?")
    demo_app.settle()
    rome = demo_app.start(agent="assistant", input="And in Rome?", session_id=weather["session_id"])
    demo_app.settle()
    assert demo_app.view(rome["run_id"])["output"]["text"].startswith("In Rome it is ")
