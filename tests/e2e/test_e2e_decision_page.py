"""The decision page of one approval, in Chromium (Debian's, via Playwright): opened from the link a notification
carries, it shows the call with readable arguments (a multi-line string as text), the run's last messages, the expiry
and who may decide; opening it decides nothing; rejecting with a reason goes through the decision route; it offers an
edit of the arguments only where the approval is `editable` (not a workflow's gate). A link that was tampered with,
or is for another approval, is refused. `DOCS_SCREENSHOTS=1` writes docs/decision-page.png."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from e2e_harness import InProcessApp, pending_ids
from playwright.sync_api import Page, expect
from test_e2e_cli_output import review_script
from ui_browser import chromium, chromium_page  # noqa: F401 - the browser and page fixtures
from webhook_receiver import SECRET, WebhookReceiver

from scripted_model import Reply, Script, ScriptedModelServer

EMAIL = {"to": "bob@example.com", "subject": "Quarterly numbers",
         "body": "Hello Bob,\n\nthe numbers are attached.\nRegards,\nAlice"}
DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture
def store_backend() -> str:
    return "sqlite"  # the page does not see the store: once is enough


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    started = WebhookReceiver().start()
    yield started
    started.stop()


def test_the_link_opens_the_page_and_only_a_button_decides(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver, page: Page,
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Not sent."))
    with app_with(WEBHOOK_URLS=receiver.url, WEBHOOK_SECRET=SECRET) as app:
        view = app.start_until_approval(input="Please mail Bob the quarterly numbers")
        run_id = view["run_id"]
        [approval_id] = pending_ids(view)
        app.settle()
        [requested] = receiver.accepted()
        link = requested.payload["data"]["links"]["page"]  # relative: PUBLIC_BASE_URL is not set here

        page.goto(app.host.base_url + link)
        expect(page.get_by_role("heading", level=2)).to_contain_text("send_email")
        arguments = page.get_by_label("arguments", exact=True)
        expect(arguments.locator("pre")).to_have_text(EMAIL["body"])  # the multi-line string, as text
        expect(arguments).to_contain_text("bob@example.com")
        expect(page.get_by_label("last messages")).to_contain_text("Please mail Bob the quarterly numbers")
        expect(page.get_by_test_id("who")).to_have_text("owner")
        expect(page.get_by_test_id("expires")).not_to_have_text("never")
        if os.environ.get("DOCS_SCREENSHOTS"):
            page.screenshot(path=str(DOCS / "decision-page.png"), full_page=True)
        page.reload()  # opening (a mail scanner's prefetch, a second look) decides nothing
        expect(page.get_by_role("button", name="Approve")).to_be_enabled()
        expect(page.get_by_text("Edit the arguments before approving")).to_be_visible()
        assert [a["status"] for a in app.approvals(run_id)] == ["pending"]

        page.get_by_label("Reason").fill("not before the audit")
        page.get_by_role("button", name="Reject").click()
        expect(page.get_by_role("status")).to_have_text("send_email: rejected.")
        app.settle()
        [record] = app.approvals(run_id)
        assert (record["status"], record["reason"]) == ("rejected", "not before the audit")
        assert app.view(run_id)["status"] == "completed"

        page.reload()  # decided: the page says so and offers no buttons
        expect(page.get_by_role("status")).to_contain_text("Already rejected")
        expect(page.get_by_role("button", name="Approve")).to_have_count(0)

        token = link.split("link=", 1)[1]
        tampered = app.http.get(f"/api/ui/approvals/{approval_id}", params={"link": token[:-2] + "xx"})
        assert tampered.status_code == 403 and tampered.json()["field"] == "query.link"
        other = app.http.get("/api/ui/approvals/another-approval", params={"link": token})
        assert other.status_code == 403
        assert app.http.get(f"/api/ui/approvals/{approval_id}").status_code == 403


def test_the_page_needs_the_approvers_sign_in(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver, page: Page,
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Not sent."))
    with app_with(WEBHOOK_URLS=receiver.url, WEBHOOK_SECRET=SECRET, AUTH_MODE="easyauth") as app:
        alice = easyauth("oid-alice", "Alice")
        started = app.http.post("/api/agents/helper/runs", json={"input": "mail Bob"}, headers=alice)
        assert started.status_code == 202, started.text
        app.settle()
        [requested] = receiver.accepted()
        data = requested.payload["data"]
        page.goto(app.host.base_url + data["links"]["page"])  # no sign-in in this browser
        expect(page.get_by_role("alert")).to_have_text("Sign in to decide this approval.")
        context = f"/api/runs/{data['run_id']}/approvals/{data['approval_id']}/context"
        assert app.http.get(context).status_code == 401
        assert app.http.get(context, headers=easyauth("oid-mallory", "Mallory")).status_code == 404
        shown = app.http.get(context, headers=alice)
        assert shown.status_code == 200 and shown.json()["approval"]["status"] == "pending"


def test_a_gate_s_page_offers_no_edit(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    receiver: WebhookReceiver, page: Page,
) -> None:
    model.set_script(review_script())
    with app_with(AGENTS_PACKAGE="served_agents", WEBHOOK_URLS=receiver.url, WEBHOOK_SECRET=SECRET) as app:
        started = app.http.post("/api/workflows/review_pipeline/runs", json={"input": {"topic": "durable agents"}})
        assert started.status_code == 202, started.text
        app.settle()
        [opened] = [d for d in receiver.accepted() if d.payload["type"] == "workflow.gate_opened"]
        page.goto(app.host.base_url + opened.payload["data"]["links"]["page"])
        expect(page.get_by_role("heading", level=2)).to_contain_text("workflow_gate:sign_off")
        expect(page.get_by_role("button", name="Approve")).to_be_enabled()
        expect(page.get_by_text("Edit the arguments before approving")).to_have_count(0)
        page.get_by_role("button", name="Approve").click()
        expect(page.get_by_role("status")).to_have_text("workflow_gate:sign_off: approved.")


def easyauth(object_id: str, name: str) -> dict[str, str]:
    """What App Service Authentication passes to the app for a signed-in Entra ID user."""
    claims = [{"typ": "http://schemas.microsoft.com/identity/claims/objectidentifier", "val": object_id},
              {"typ": "name", "val": name}]
    principal = {"auth_typ": "aad", "claims": claims, "name_typ": "name", "role_typ": "roles"}
    return {"X-MS-CLIENT-PRINCIPAL": base64.b64encode(json.dumps(principal).encode()).decode(),
            "X-MS-CLIENT-PRINCIPAL-ID": object_id, "X-MS-CLIENT-PRINCIPAL-NAME": name,
            "X-MS-CLIENT-PRINCIPAL-IDP": "aad"}
