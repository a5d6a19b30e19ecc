"""Links the app hands out (`Location`, `links`) and continuation tokens, over HTTP against the app on devhost.

Links come from the platform's host name on Azure (`WEBSITE_HOSTNAME`) or a configured `PUBLIC_BASE_URL`, never
from the request's `Host` header there (a caller must not make the app point clients at a host of its choosing);
locally (devhost, `func start`) the request's own URL is used. Tokens are HMAC-SHA256; a token signed with
HMAC-SHA1 before the change still polls until it expires. Decision page links follow a rotation of
`CONTINUATION_TOKEN_SECRET` as tokens do: the first secret signs, the others only verify. Azure itself is not here:
`WEBSITE_INSTANCE_ID` and `WEBSITE_HOSTNAME` are what the platform sets."""

from __future__ import annotations

import hashlib

from auth_people import TOKEN_SECRET
from itsdangerous import URLSafeTimedSerializer
from webhook_receiver import SECRET as WEBHOOK_SECRET
from webhook_receiver import WebhookReceiver

from scripted_model import Reply, Script

EVIL = {"Host": "evil.example:8443", "X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "http"}
AZURE = {"WEBSITE_INSTANCE_ID": "0123456789abcdef", "WEBSITE_HOSTNAME": "func-agents.azurewebsites.net",
         "SESSION_STORE": "sqlite", "ALLOW_ANONYMOUS_ON_AZURE": "true"}


def _waiting_run(app, headers: dict[str, str]):
    """A run that waits for an approval (202 with a Location), started with `headers`."""
    started = app.http.post("/api/agents/payer/runs", json={"input": "note it"}, headers=headers)
    assert started.status_code == 202, started.text
    return started


def _links(response) -> list[str]:
    body = response.json()
    return [response.headers["Location"], *body["links"].values()]


def test_on_azure_links_use_the_platform_host_name_not_the_host_header(app_in, model) -> None:
    model.set_script(Script(default=Reply.call("note", {"text": "hi"})))
    with app_in("none", **AZURE) as (app, _):
        started = _waiting_run(app, EVIL)
        links = _links(started)
        assert links and all(link.startswith("https://func-agents.azurewebsites.net/api/") for link in links), links
        assert "evil" not in started.text
        listed = app.http.get("/api/runs", headers=EVIL).json()
        assert listed["runs"][0]["link"].startswith("https://func-agents.azurewebsites.net/api/runs/")


def test_a_configured_public_url_wins_everywhere(app_in, model) -> None:
    model.set_script(Script(default=Reply.call("note", {"text": "hi"})))
    with app_in("none", PUBLIC_BASE_URL="https://agents.contoso.com/") as (app, _):
        links = _links(_waiting_run(app, EVIL))
        assert all(link.startswith("https://agents.contoso.com/api/") for link in links), links


def test_locally_links_follow_the_request(app_in, model) -> None:
    model.set_script(Script(default=Reply.call("note", {"text": "hi"})))
    with app_in("none") as (app, _):
        links = _links(_waiting_run(app, {}))
        assert all(link.startswith(f"{app.host.base_url}/api/") for link in links), links


def test_a_sha1_token_issued_before_the_change_still_polls(app_in, model) -> None:
    model.set_script(Script(default=Reply.call("note", {"text": "hi"})))
    with app_in("none") as (app, _):
        started = _waiting_run(app, {})
        app.settle()
        run_id = started.json()["run_id"]
        token = started.json()["continuation_token"]
        signer = URLSafeTimedSerializer([TOKEN_SECRET], salt="continuation-token",
                                        signer_kwargs={"digest_method": hashlib.sha256}, fallback_signers=[])
        payload = signer.loads(token)  # what the app issues now: HMAC-SHA256
        legacy = URLSafeTimedSerializer([TOKEN_SECRET], salt="continuation-token").dumps(payload)  # HMAC-SHA1
        polled = app.http.get(f"/api/runs/{run_id}", params={"continuation_token": legacy})
        assert polled.status_code == 202, polled.text
        assert polled.json()["status"] == "requires_action"
        forged = URLSafeTimedSerializer(["not-the-secret"], salt="continuation-token").dumps(payload)
        refused = app.http.get(f"/api/runs/{run_id}", params={"continuation_token": forged})
        assert refused.status_code == 401 and refused.json()["code"] == "token_invalid"


def test_decision_links_are_signed_with_the_current_secret_while_the_old_one_is_retired(app_in, model) -> None:
    """A rotation: `CONTINUATION_TOKEN_SECRET=<new>,<old>`. The links sent meanwhile must still open once `<old>` is
    removed (they were signed with `<old>`, the last of the list, and were refused with 403 `decision_link_invalid`
    as soon as the rotation ended); a link sent before the rotation opens during it."""
    model.set_script(Script(default=Reply.call("note", {"text": "hi"})))
    receiver = WebhookReceiver().start()
    hooks = {"WEBHOOK_URLS": receiver.url, "WEBHOOK_SECRET": WEBHOOK_SECRET}

    def page_link(secrets: str) -> str:
        """The decision page link of a new approval, from a deployment signing with `secrets`."""
        with app_in("none", CONTINUATION_TOKEN_SECRET=secrets, **hooks) as (app, _):
            _waiting_run(app, {})
            app.settle()
            requested = [d.payload for d in receiver.accepted() if d.payload["type"] == "approval.requested"]
            link = requested[-1]["data"]["links"]["page"]
            assert app.http.get(link).status_code == 200
            return link

    def opens(link: str, secrets: str) -> int:
        with app_in("none", CONTINUATION_TOKEN_SECRET=secrets) as (app, _):
            return app.http.get(link).status_code

    try:
        before = page_link("old-secret")
        during = page_link("new-secret,old-secret")
        assert opens(before, "new-secret,old-secret") == 200  # the old secret still verifies while listed
        assert opens(during, "new-secret") == 200  # the rotation is over: what was sent during it still opens
        assert opens(before, "new-secret") == 403  # the retired secret signs nothing any more
    finally:
        receiver.stop()
