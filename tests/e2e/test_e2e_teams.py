"""Microsoft Teams, end to end: a Teams Workflows "webhook request received" URL (a loopback receiver here) gets one
message per approval whose Adaptive Card (1.5) holds the tool, the arguments, the expiry and buttons that open the
decision page. The card is checked by Microsoft's own `adaptivecards` library (npm, run by node)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from e2e_harness import InProcessApp, pending_ids
from webhook_receiver import WebhookReceiver

from scripted_model import Reply, Script, ScriptedModelServer

E2E_DIR = Path(__file__).resolve().parent
REPO_ROOT = E2E_DIR.parents[1]
NODE = shutil.which("node")
CHECKER = E2E_DIR / "adaptive_card_check.js"
EMAIL = {"to": "bob@example.com", "subject": "Hi", "body": "Hello Bob,\nsee you."}
if NODE is None or not (REPO_ROOT / "node_modules" / "adaptivecards").is_dir():  # pragma: no cover - CI has both
    pytest.skip("NO NODE or adaptivecards: run npm ci", allow_module_level=True)


def adaptive_cards_check(card: dict[str, Any]) -> dict[str, Any]:
    """Parse and validate `card` with the `adaptivecards` library: its parse events and validation issues."""
    done = subprocess.run([NODE or "node", str(CHECKER)], input=json.dumps(card), capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=60, check=True)
    return json.loads(done.stdout)


@pytest.fixture
def store_backend() -> str:
    return "sqlite"


@pytest.fixture
def teams() -> Iterator[WebhookReceiver]:
    started = WebhookReceiver().start()
    yield started
    started.stop()


def test_the_checker_reports_a_broken_card() -> None:
    broken = {"type": "AdaptiveCard", "version": "1.5", "body": [{"type": "NoSuchElement"}],
              "actions": [{"type": "Action.OpenUrl", "title": "no url"}]}
    checked = adaptive_cards_check(broken)
    assert checked["parse"] and checked["validation"]


def test_an_approval_reaches_teams_as_a_valid_adaptive_card(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer, teams: WebhookReceiver,
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Sent."))
    settings = {"TEAMS_WEBHOOK_URL": teams.url, "PUBLIC_BASE_URL": "https://agents.example.com",
                "WEBHOOK_INCLUDE_ARGUMENTS": "true"}
    with app_with(**settings) as app:
        view = app.start_until_approval()
        [approval_id] = pending_ids(view)
        app.settle()
        [message] = teams.accepted()
        [attachment] = message.payload["attachments"]
        assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
        card = attachment["content"]
        checked = adaptive_cards_check(card)
        assert checked == {"parse": [], "validation": [], "version": "1.5"}

        facts = {f["title"]: f["value"] for f in card["body"][1]["facts"]}
        assert facts["Tool"] == "send_email" and facts["Who may decide"] == "owner"
        assert facts["Expires"] == view["pending_approvals"][0]["expires_at"].replace("+00:00", "Z")
        assert "body:\nHello Bob,\nsee you." in card["body"][2]["text"]  # the arguments, multi-line as text
        urls = {a["url"] for a in card["actions"]}
        assert [a["type"] for a in card["actions"]] == ["Action.OpenUrl", "Action.OpenUrl"] and len(urls) == 1
        [url] = urls
        assert url.startswith(f"https://agents.example.com/api/ui/approvals/{approval_id}?link=")
        parts = urlsplit(url)
        opened = app.http.get(f"{parts.path}?{parts.query}")  # the button's link opens the decision page
        assert opened.status_code == 200 and "text/html" in opened.headers["content-type"]
        assert [a["status"] for a in app.approvals(view["run_id"])] == ["pending"]  # opening decided nothing
