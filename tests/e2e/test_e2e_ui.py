"""The page at `/api/ui` in a real browser: Debian's Chromium driven by Playwright (no browser download).

Approve from the page and see the run complete; reject with a reason; edit the arguments with a schema error
first; a workflow's sign-off gate offers no edit (its view says `editable: false`); the answer's text appears while
it is written; the layout works at 375 px. Skipped, loudly, only where no
Chromium is installed (`make install-browser` installs it with apt; CI runs it)."""

from __future__ import annotations

import pytest
from e2e_harness import InProcessApp
from e2e_settings import watches_the_app_in_process
from playwright.sync_api import Page, Route, expect
from test_e2e_cli import hub_refuses_the_first_event
from test_e2e_cli_output import review_script
from ui_browser import chromium, chromium_page  # the fixtures `browser` and `page`

from scripted_model import Reply, Script, ScriptedModelServer

TRANSFER = {"account": "GB1234", "amount": 10}
# The fixtures under their old names here, for test modules that import them from this one.
browser, page = chromium, chromium_page


@pytest.fixture
def store_backend() -> str:
    return "sqlite"  # the page does not see the store: once is enough


def start_chat(page: Page, app: InProcessApp, text: str) -> None:
    page.goto(f"{app.host.base_url}/api/ui#chat")
    page.get_by_label("Agent").select_option("helper")
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()


def test_approve_on_the_page_and_watch_the_run_complete(
    app: InProcessApp, model: ScriptedModelServer, page: Page
) -> None:
    model.set_script(Script.of(Reply.call("transfer", TRANSFER), "Transferred 10 euros."))
    start_chat(page, app, "pay GB1234")
    card = page.locator("article.approval")
    expect(card.get_by_role("heading")).to_contain_text("transfer")
    expect(card.get_by_label("arguments", exact=True)).to_contain_text("accountGB1234")
    card.get_by_role("button", name="Approve").click()
    expect(page.get_by_test_id("run-status")).to_have_text("completed")
    expect(page.locator(".msg.assistant")).to_have_text("Transferred 10 euros.")
    [session] = app.snapshot().sessions.values()
    assert [a["status"] for a in session["approvals"]] == ["approved"] and session["effects"] == 1


@watches_the_app_in_process
def test_a_decision_and_a_cancel_the_app_could_not_deliver_at_once_are_sent_again(
    app: InProcessApp, model: ScriptedModelServer, page: Page, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app answers 503 `decision_not_delivered` / `cancel_not_delivered` (Retry-After: 1) when the task hub
    refuses the event: the page sends the same request again itself, and the person sees it done, not an error."""
    model.set_script(Script.of(Reply.call("transfer", TRANSFER), "Transferred 10 euros."))
    start_chat(page, app, "pay GB1234")
    answers: list[tuple[str, int]] = []
    page.on("response", lambda response: answers.append((response.request.method, response.status))
            if "/approvals/" in response.url or response.url.endswith("/cancel") else None)
    card = page.locator("article.approval")
    refused = hub_refuses_the_first_event(app, monkeypatch)
    card.get_by_role("button", name="Approve").click()
    expect(page.get_by_test_id("run-status")).to_have_text("completed")
    assert answers == [("POST", 503), ("POST", 202)]  # sent again, once: no error shown to the person
    expect(page.get_by_text("has not been told yet")).to_have_count(0)
    [session] = app.snapshot().sessions.values()
    assert len(refused) == 1 and [a["status"] for a in session["approvals"]] == ["approved"]
    assert session["effects"] == 1

    model.set_script(Script.of(Reply.call("transfer", TRANSFER), "Transferred again."))
    run_id = app.start(input="pay GB1234 again")["run_id"]
    app.settle()
    page.goto(f"{app.host.base_url}/api/ui#run/{run_id}")
    refused = hub_refuses_the_first_event(app, monkeypatch)
    answers.clear()
    page.get_by_role("button", name="Cancel run").click()
    expect(page.get_by_test_id("run-status")).to_have_text("cancelled")
    assert answers == [("POST", 503), ("POST", 202)] and len(refused) == 1
    assert app.view(run_id)["status"] == "cancelled"


def test_a_decision_whose_answer_was_lost_is_sent_again_and_applied_once(
    app: InProcessApp, model: ScriptedModelServer, page: Page
) -> None:
    """The decision reaches the app and its answer is lost on the way back (the connection reset): the page cannot
    tell whether it arrived, so it sends it again, and the app takes the same decision twice as once."""
    model.set_script(Script.of(Reply.call("transfer", TRANSFER), "Transferred 10 euros."))
    start_chat(page, app, "pay GB1234")
    reached: list[int] = []

    def lose_the_first_answer(route: Route) -> None:
        if route.request.method != "POST":
            route.continue_()
            return
        response = route.fetch()  # the decision reaches the app...
        reached.append(response.status)
        if len(reached) == 1:
            route.abort("connectionreset")  # ...and its answer never reaches the page
        else:
            route.fulfill(response=response)

    page.route("**/api/runs/*/approvals/*", lose_the_first_answer)
    page.locator("article.approval").get_by_role("button", name="Approve").click()
    expect(page.get_by_test_id("run-status")).to_have_text("completed")  # the first one went through...
    for _ in range(200):  # ...and the page, told nothing, sends it again (after 0.5 s)
        if len(reached) == 2:
            break
        page.wait_for_timeout(50)  # lets Playwright dispatch the route handler
    assert reached == [202, 202]
    expect(page.locator(".error:not(:empty)")).to_have_count(0)  # no error shown to the person
    [session] = app.snapshot().sessions.values()
    assert [a["status"] for a in session["approvals"]] == ["approved"] and session["effects"] == 1


def test_reject_with_a_reason(app: InProcessApp, model: ScriptedModelServer, page: Page) -> None:
    model.set_script(Script.of(Reply.call("transfer", TRANSFER), "Not paid, as you wish."))
    start_chat(page, app, "pay GB1234")
    card = page.locator("article.approval")
    card.get_by_label("Reason").fill("budget is frozen")
    card.get_by_role("button", name="Reject").click()
    expect(page.get_by_test_id("run-status")).to_have_text("completed")
    expect(page.locator(".transcript")).to_contain_text("rejected: budget is frozen")
    [session] = app.snapshot().sessions.values()
    [approval] = session["approvals"]
    assert (approval["status"], approval["reason"], session["effects"]) == ("rejected", "budget is frozen", 0)


def test_edit_the_arguments_a_schema_error_first(app: InProcessApp, model: ScriptedModelServer, page: Page) -> None:
    model.set_script(Script.of(Reply.call("transfer", TRANSFER), "Done."))
    start_chat(page, app, "pay GB1234")
    card = page.locator("article.approval")
    card.get_by_role("button", name="Edit arguments").click()
    editor = card.get_by_label("Arguments (JSON)")
    editor.fill('{"account": "GB1234", "amount": 5000}')  # over the tool's limit of 1000
    card.get_by_role("button", name="Approve").click()
    expect(card.get_by_role("alert")).to_contain_text("The tool refuses these arguments")
    editor.fill('{"account": "GB1234", "amount": 900}')
    card.get_by_role("button", name="Approve").click()
    expect(page.get_by_test_id("run-status")).to_have_text("completed")
    [session] = app.snapshot().sessions.values()
    assert session["approvals"][0]["edited_arguments"] == {"account": "GB1234", "amount": 900}
    assert app.effects(session["session"]["session_id"], "transfer") == [{"account": "GB1234", "amount": 900}]


def test_a_workflow_gate_is_approved_on_the_page_without_an_edit_offered(
    app_with, model: ScriptedModelServer, page: Page
) -> None:
    model.set_script(review_script())
    with app_with(AGENTS_PACKAGE="served_agents") as app:
        started = app.http.post("/api/workflows/review_pipeline/runs", json={"input": {"topic": "durable agents"}})
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        app.settle()
        for hash_ in (f"workflow/{run_id}", "inbox"):  # the workflow run's page, then the inbox: the same card
            page.goto(f"{app.host.base_url}/api/ui#{hash_}")
            card = page.locator("article.approval")
            expect(card.get_by_role("heading")).to_contain_text("workflow_gate:sign_off")
            expect(card.get_by_role("button", name="Approve")).to_be_visible()
            expect(card.get_by_role("button", name="Edit arguments")).to_have_count(0)
        card.get_by_role("button", name="Approve").click()
        expect(card).to_contain_text("approved")
        app.settle()
        assert app.http.get(f"/api/workflows/runs/{run_id}").json()["status"] == "completed"


def test_the_answer_appears_while_it_is_written(app: InProcessApp, model: ScriptedModelServer, page: Page) -> None:
    words = " ".join(f"word{i}" for i in range(60))
    model.set_script(Script.of(words))
    model.chunk_delay_ms = 80  # about five seconds of streaming
    try:
        page.set_viewport_size({"width": 375, "height": 800})
        start_chat(page, app, "write slowly")
        writing = page.get_by_test_id("writing")
        expect(writing).to_contain_text("word1")  # part of the answer, while the run still runs
        expect(page.get_by_test_id("run-status")).not_to_have_text("completed")
        expect(page.get_by_test_id("run-status")).to_have_text("completed")
        expect(page.locator(".msg.assistant")).to_have_text(words)
        assert page.evaluate("document.documentElement.scrollWidth") <= 375  # nothing overflows a phone's width
    finally:
        model.chunk_delay_ms = 0


def test_approve_from_the_inbox_then_follow_the_run(app: InProcessApp, model: ScriptedModelServer, page: Page) -> None:
    model.set_script(Script.of(Reply.call("transfer", TRANSFER), "Paid from the inbox."))
    started = app.start(input="pay GB1234")
    app.settle()
    page.goto(f"{app.host.base_url}/api/ui#inbox")
    card = page.locator(f"article.approval[data-approval-id^='{started['run_id']}']")
    expect(card).to_contain_text("transfer")
    expect(card).to_contain_text("left")  # the expiry countdown
    card.get_by_role("button", name="Approve").click()
    card.get_by_role("link", name="Follow the run").click()
    expect(page.get_by_test_id("run-status")).to_have_text("completed")
    expect(page.locator(".msg.assistant")).to_have_text("Paid from the inbox.")
    page.get_by_role("link", name="Approvals").click()
    # The run view's own status lines stay until the inbox has loaded: wait for the inbox's.
    expect(page.get_by_role("heading", name="Approvals waiting for you")).to_be_visible()
    expect(page.get_by_role("status").filter(has_text="Nothing waits for your decision.")).to_be_visible()


def test_a_run_view_offers_a_decision_once_the_approval_is_escalated_to_the_viewer(
    app_with, model: ScriptedModelServer, page: Page
) -> None:
    """Alice, a supervisor, follows her run: its call waits for a reviewer (not her: no buttons); at its first
    deadline it is escalated to the supervisors, the stream says it is now hers to decide, and the card offers it."""
    import base64
    import json

    from rights_agents import FIRST_DEADLINE_SECONDS

    model.set_script(Script.of(Reply.call("publish", {"text": "hello"}), "Published."))
    picked = "alice+Supervisors"  # as the page's local principal picker sends it
    claims = [{"typ": "name", "val": picked}, {"typ": "oid", "val": picked}, {"typ": "roles", "val": "Supervisors"}]
    principal = {"auth_typ": "aad", "name_typ": "name", "role_typ": "roles", "claims": claims}
    headers = {"X-MS-CLIENT-PRINCIPAL": base64.b64encode(json.dumps(principal).encode()).decode(),
               "X-MS-CLIENT-PRINCIPAL-ID": "alice", "X-MS-CLIENT-PRINCIPAL-NAME": "alice"}
    with app_with(AUTH_MODE="easyauth", AGENTS_PACKAGE="rights_agents") as app:
        started = app.http.post("/api/agents/reviewed/runs", json={"input": "publish it"}, headers=headers)
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        app.settle()
        page.goto(f"{app.host.base_url}/api/ui#chat")
        page.get_by_label("Principal (local host)").fill(picked)
        page.get_by_role("button", name="Act as").click()
        page.goto(f"{app.host.base_url}/api/ui#run/{run_id}")
        card = page.locator("article.approval")
        expect(card).to_contain_text("waits for an approver")
        expect(card.get_by_role("button", name="Approve")).to_have_count(0)

        app.advance(FIRST_DEADLINE_SECONDS + 1)
        app.settle()
        expect(card.get_by_role("button", name="Approve")).to_be_visible()
        card.get_by_role("button", name="Approve").click()
        expect(page.get_by_test_id("run-status")).to_have_text("completed")
