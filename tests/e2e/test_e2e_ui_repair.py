"""The page offers rewind on a failed run's view and fork on any finished run's, in a real browser (Chromium)."""

from __future__ import annotations

import pytest
from e2e_harness import InProcessApp
from ui_browser import chromium, chromium_page  # noqa: F401 - the fixtures `browser` and `page` (skips without Chromium)

from scripted_model import Fault, Match, Reply, Rule, Script, ScriptedModelServer

pytest.importorskip("playwright")
from playwright.sync_api import Page, Route, expect


@pytest.fixture
def store_backend() -> str:
    return "sqlite"  # the page does not see the store: once is enough


def test_rewind_a_failed_run_then_fork_it_from_the_page(
    app: InProcessApp, model: ScriptedModelServer, page: Page
) -> None:
    model.set_script(Script(rules=[Rule(reply=Reply.fail(Fault(status=400, message="prompt refused")))]))
    started = app.start(input="look up paris")
    app.settle()
    page.goto(f"{app.host.base_url}/api/ui#run/{started['run_id']}")
    expect(page.get_by_test_id("run-status")).to_have_text("failed")

    model.set_script(Script(rules=[Rule(match=Match(last_user="."), reply=Reply.say("Paris is lovely."))]))
    page.get_by_test_id("rewind").click()
    expect(page.get_by_test_id("run-status")).to_have_text("completed")
    expect(page.locator(".msg.assistant")).to_have_text("Paris is lovely.")
    expect(page.get_by_test_id("rewind")).to_have_count(0)  # a completed run offers fork only

    page.get_by_text("Fork from here…").click()
    page.get_by_label("Fork from before this run with").fill("look up rome")
    page.get_by_role("button", name="Fork").click()
    expect(page.locator(".msg.user")).to_have_text("look up rome")
    expect(page.get_by_test_id("run-status")).to_have_text("completed")
    assert started["run_id"] not in page.url


def test_a_rewind_whose_answer_was_lost_is_not_sent_again(
    app: InProcessApp, model: ScriptedModelServer, page: Page
) -> None:
    """Unlike a decision, a rewind sent twice is not a rewind once (the second finds the run rewound: 409): the page
    says the connection failed, and the run goes on from the one rewind that arrived."""
    model.set_script(Script(rules=[Rule(reply=Reply.fail(Fault(status=400, message="prompt refused")))]))
    started = app.start(input="look up paris")
    app.settle()
    page.goto(f"{app.host.base_url}/api/ui#run/{started['run_id']}")
    expect(page.get_by_test_id("run-status")).to_have_text("failed")
    reached: list[int] = []

    def lose_the_answer(route: Route) -> None:
        reached.append(route.fetch().status)  # the rewind reaches the app, its answer never reaches the page
        route.abort("connectionreset")

    page.route("**/api/runs/*/rewind", lose_the_answer)
    model.set_script(Script(rules=[Rule(match=Match(last_user="."), reply=Reply.say("Paris is lovely."))]))
    page.get_by_test_id("rewind").click()
    expect(page.locator(".repair-note")).not_to_be_empty()
    app.settle()
    assert reached == [202] and app.view(started["run_id"])["status"] == "completed"

