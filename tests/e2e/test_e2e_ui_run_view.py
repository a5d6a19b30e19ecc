"""The page with the offline demo, as a newcomer meets it (Debian's Chromium via Playwright): the inbox's count
follows the decisions, an email's body reads as text, and a finished run shows its course as a timeline (model
calls with tokens, the approval with who and when, the tool call). Screenshots go to `UI_SCREENSHOTS_DIR` when set
(the ones in docs/ were made with `UI_SCREENSHOTS_DIR=docs`), else to the test's temporary directory."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_harness import PROGRESS_TIMEOUT_S, InProcessApp
from e2e_settings import TOKEN_SECRET, running_app
from playwright.sync_api import Page, expect
from ui_browser import chromium, chromium_page  # noqa: F401 - the fixtures `browser` and `page`

from scripted_model import Reply, Script, ScriptedModelServer

BOB = "Email bob@example.com that the report is ready"
ALICE = "Email alice@example.com about the launch"


@pytest.fixture
def demo_app() -> Iterator[InProcessApp]:
    """The shipped agents, no model configured: the app talks to its offline demo model."""
    with running_app({"SESSION_STORE_PATH": ":memory:", "CONTINUATION_TOKEN_SECRET": TOKEN_SECRET}, "sqlite") as app:
        yield app


@pytest.fixture
def store_backend() -> str:
    return "sqlite"  # the page does not see the store


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    return Path(os.environ.get("UI_SCREENSHOTS_DIR") or tmp_path)


def test_inbox_count_follows_decisions_and_a_run_shows_its_course(demo_app: InProcessApp, page: Page,
                                                                   shots: Path) -> None:
    bob = demo_app.start(agent="assistant", input=BOB)
    demo_app.start(agent="assistant", input=ALICE)
    demo_app.settle()

    page.goto(f"{demo_app.host.base_url}/api/ui#inbox")
    status = page.get_by_role("status").first
    expect(status).to_have_text("2 waiting")
    card = page.locator(f"article.approval[data-approval-id^='{bob['run_id']}']")
    arguments = card.get_by_label("arguments", exact=True)
    expect(arguments.locator(".text-block")).to_have_text("Hi Bob,\n\nThe report is ready.\n\nBest regards")
    assert "\\n" not in arguments.inner_text()  # the body reads as an email, not as JSON
    page.screenshot(path=str(shots / "ui-inbox.png"), full_page=True)

    card.get_by_role("button", name="Approve").click()
    expect(status).to_have_text("1 waiting")
    page.locator("article.approval").filter(has_text="alice@example.com").get_by_role("button", name="Reject").click()
    expect(status).to_have_text("Nothing waits for your decision.")

    card.get_by_role("link", name="Follow the run").click()
    expect(page.get_by_test_id("run-status")).to_have_text("completed")
    timeline = page.get_by_label("timeline")
    steps = timeline.locator("li")
    expect(steps).to_have_count(4)
    expect(steps.nth(0)).to_contain_text("Model call: proposed send_email")
    expect(steps.nth(0)).to_contain_text(re.compile(r"\d+ in / \d+ out tokens"))
    expect(steps.nth(1)).to_contain_text("Approval: send_email")
    expect(steps.nth(1)).to_contain_text(re.compile(r"approved by anonymous at \d"))
    expect(steps.nth(2)).to_contain_text("Tool call: send_email")
    expect(steps.nth(3)).to_contain_text("Model call: answered")
    expect(page.locator(".timeline-summary")).to_contain_text(re.compile(r"completed · .* in all · \d+ in / \d+ out"))
    expect(page.locator(".msg.assistant")).to_have_text(
        'Done: I emailed bob@example.com with the subject "The report is ready".')
    page.screenshot(path=str(shots / "ui-run-timeline.png"), full_page=True)

    page.set_viewport_size({"width": 375, "height": 800})
    assert page.evaluate("document.documentElement.scrollWidth") <= 375  # nothing overflows a phone's width
    page.screenshot(path=str(shots / "ui-run.png"), full_page=True)


def test_a_pending_approval_is_on_the_timeline_while_the_run_waits(demo_app: InProcessApp, page: Page) -> None:
    started = demo_app.start(agent="assistant", input=BOB)
    demo_app.settle()
    page.goto(f"{demo_app.host.base_url}/api/ui#run/{started['run_id']}")
    expect(page.get_by_test_id("run-status")).to_have_text("requires action")
    steps = page.get_by_label("timeline").locator("li")
    expect(steps).to_have_count(2)
    expect(steps.nth(1)).to_contain_text("Approval: send_email")
    expect(steps.nth(1)).to_contain_text("waiting for a decision")


def test_a_long_value_is_folded_until_opened(app: InProcessApp, model: ScriptedModelServer, page: Page) -> None:
    model.set_script(Script.of(Reply.call("big_result", {"index": 1}), "Read it."))
    started = app.start(input="read the big document")
    app.settle()
    page.goto(f"{app.host.base_url}/api/ui#run/{started['run_id']}")
    expect(page.get_by_test_id("run-status")).to_have_text("completed")
    folded = page.locator(".msg.tool.result details.fold")
    expect(folded.locator("summary")).to_contain_text("characters)")
    expect(folded.locator(".text-block")).to_be_hidden()
    folded.locator("summary").click()
    expect(folded.locator(".text-block")).to_contain_text("row 0001: lorem ipsum")


def test_a_model_call_that_failed_after_streaming_shows_as_failed_with_the_runs_error(
    app: InProcessApp, model: ScriptedModelServer, page: Page
) -> None:
    """A streamed answer past what a message holds fails the call, and the draft stored while it streamed is emptied
    (`agent_runtime.steps._empty_draft`). The timeline shows that call as failed with the run's error, not as an
    answer (it showed "Model call: answered" before)."""
    model.set_script(Script.of("x" * 1_200_000))
    model.hold_mid_stream(after_chunks=2)
    started = app.start(input="write a lot")
    deadline = time.monotonic() + PROGRESS_TIMEOUT_S
    while not app.view(started["run_id"]).get("partial_output"):  # the draft is stored (its interval is real time)
        assert time.monotonic() < deadline, "no draft was stored"
        time.sleep(0.05)
    model.release_answers()
    app.settle()
    view = app.view(started["run_id"])
    assert view["status"] == "failed" and view["error"]["code"] == "model_answer_too_large", view
    assert [m["contents"] for m in app.session_messages(started["session_id"]) if m["role"] == "assistant"] == [[]]
    page.goto(f"{app.host.base_url}/api/ui#run/{started['run_id']}")
    expect(page.get_by_test_id("run-status")).to_have_text("failed")
    steps = page.get_by_label("timeline").locator("li")
    expect(steps).to_have_count(1)
    expect(steps.nth(0)).to_have_class(re.compile(r"\bfailed\b"))
    expect(steps.nth(0)).to_contain_text("Model call: failed")
    expect(steps.nth(0)).to_contain_text("at most 1,048,576 bytes")
