"""The page's credentials in a real browser (Debian's Chromium via Playwright): the run stream is read with fetch, so
the function key travels in the `x-functions-key` header (never in a URL, where `?code=` stayed in history and
proxies' logs), and the principal picker appears only where the server says no App Service front can exist."""

from __future__ import annotations

import test_e2e_ui as ui  # skips this module too where no Chromium is installed
from playwright.sync_api import Page, Request, expect

from scripted_model import Script, ScriptedModelServer

# The browser fixtures of the page's other tests (one browser per module, a fresh context per test).
browser, page, store_backend, start_chat = ui.chromium, ui.chromium_page, ui.store_backend, ui.start_chat
KEY = "fk-0123456789-secret"
WORDS = " ".join(f"word{i}" for i in range(40))


def _recorded(page: Page) -> list[Request]:
    requests: list[Request] = []
    page.on("request", lambda request: requests.append(request))
    return requests


def _stream_requests(requests: list[Request]) -> list[Request]:
    return [r for r in requests if r.url.split("?")[0].endswith("/stream")]


def test_the_stream_carries_the_function_key_in_a_header_never_in_the_url(app, model: ScriptedModelServer,
                                                                          page: Page) -> None:
    model.set_script(Script.of(WORDS))
    model.chunk_delay_ms = 40
    try:
        requests = _recorded(page)
        page.goto(f"{app.host.base_url}/api/ui#chat")
        page.get_by_text("Connection").click()
        page.get_by_label("Function key").fill(KEY)
        page.get_by_role("button", name="Save").click()
        start_chat(page, app, "write slowly")
        expect(page.get_by_test_id("writing")).to_contain_text("word1")  # streamed while written
        expect(page.get_by_test_id("run-status")).to_have_text("completed")
        expect(page.locator(".msg.assistant")).to_have_text(WORDS)
    finally:
        model.chunk_delay_ms = 0
    streams = _stream_requests(requests)
    assert streams, [r.url for r in requests]
    assert all(r.headers.get("x-functions-key") == KEY for r in streams)
    assert streams[0].response() is not None and streams[0].response().status == 200
    api_calls = [r for r in requests if "/api/" in r.url and "/api/ui" not in r.url]
    assert all(KEY not in r.url and "code=" not in r.url for r in api_calls), [r.url for r in api_calls]


def test_the_principal_picker_only_where_no_azure_front_can_exist(app_with, model: ScriptedModelServer,
                                                                   page: Page) -> None:
    model.set_script(Script.of(WORDS))
    with app_with(AUTH_MODE="easyauth") as app:  # devhost: nothing in front, the server offers the picker
        requests = _recorded(page)
        page.goto(f"{app.host.base_url}/api/ui#chat")
        page.get_by_label("Principal (local host)").fill("alice")
        page.get_by_role("button", name="Act as").click()
        start_chat(page, app, "hello")
        expect(page.get_by_test_id("run-status")).to_have_text("completed")
        streams = _stream_requests(requests)
        assert streams and all(r.headers.get("x-ms-client-principal-name") == "alice" for r in streams)
        assert streams[0].response() is not None and streams[0].response().status == 200
    azure = {"WEBSITE_INSTANCE_ID": "0123456789abcdef", "WEBSITE_AUTH_ENABLED": "True", "SESSION_STORE": "sqlite"}
    with app_with(AUTH_MODE="easyauth", **azure) as app:  # on Azure, behind App Service Authentication
        # A fresh load: this app may have the first one's port, and a URL differing only in its fragment would not
        # load the page again (the first app's picker would stay).
        page.goto("about:blank")
        page.goto(f"{app.host.base_url}/api/ui#inbox")
        expect(page.locator("#identity")).to_contain_text("Sign-in is unavailable")  # devhost has no /.auth/me
        expect(page.get_by_label("Principal (local host)")).to_have_count(0)
