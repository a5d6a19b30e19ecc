"""Auth settings that are unsafe or mistyped refuse to start: `python -m devhost` in a child process exits with the
message naming the settings, and serves nothing (so a forged `X-MS-CLIENT-PRINCIPAL` reaches no route at all).

Azure itself is not here: `WEBSITE_INSTANCE_ID` and `WEBSITE_AUTH_ENABLED` are what the platform sets on an instance
(the second only while App Service Authentication is on), so setting them is what running there looks like to the
app; the Easy Auth headers are made by the tests, as Microsoft documents them."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from auth_people import ALICE, AUTH_DIR, CAROL, app_env, easyauth_headers
from local_issuer import AUDIENCE

from devhost.cli import EXIT_LOAD_ERROR
from devhost.testing import SubprocessHost
from devhost.testing._common import HostStartError
from scripted_model import Reply, Script, ScriptedModelServer

REPO_ROOT = AUTH_DIR.parents[1]
ON_AZURE = {"WEBSITE_INSTANCE_ID": "0123456789abcdef", "SESSION_STORE": "sqlite"}
# The developer's shell may carry some of these: each test says exactly which it wants.
UNSET = ("WEBSITE_INSTANCE_ID", "WEBSITE_AUTH_ENABLED", "ALLOW_ANONYMOUS_ON_AZURE", "AUTH_MODE",
         "AUTH_REQUIRED_SCOPES", "AUTH_REQUIRED_APP_ROLES", "AUTH_ACCEPT_ANY_CLIENT")


def _host(tmp_path: Path, model: ScriptedModelServer, **settings: str) -> SubprocessHost:
    env = app_env(model.base_url, **settings)
    env["SESSION_STORE_PATH"] = str(tmp_path / "sessions.sqlite3")
    return SubprocessHost(REPO_ROOT, state_path=tmp_path / "engine.sqlite3", env=env, clock="virtual")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in UNSET:
        monkeypatch.delenv(name, raising=False)


def _refused(host: SubprocessHost) -> str:
    with pytest.raises(HostStartError) as refused:
        host.start()
    try:
        assert host.process is not None and host.process.returncode == EXIT_LOAD_ERROR
        for path in ("/api/health", "/api/runs"):  # nothing listens: no route answers, whatever the headers claim
            with pytest.raises(httpx.TransportError):
                httpx.get(f"{host.base_url}{path}", headers=easyauth_headers(CAROL), timeout=2)
    finally:
        host.close()
    return str(refused.value)


def test_an_unknown_auth_mode_refuses_to_start_naming_the_allowed_values(tmp_path, model) -> None:
    message = _refused(_host(tmp_path, model, AUTH_MODE="EasyAuthh"))
    assert "Refusing to start: AUTH_MODE='EasyAuthh' is not a known mode" in message
    assert "none, easyauth, jwt" in message


def test_the_mode_is_case_insensitive(tmp_path, model) -> None:
    model.set_script(Script(default=Reply(text="Hi.")))
    with _host(tmp_path, model, AUTH_MODE=" EasyAuth ") as host:
        assert host.client.get("/api/health").json()["auth"]["mode"] == "easyauth"
        started = host.client.post("/api/agents/payer/runs", json={"input": "hi"}, headers=easyauth_headers(ALICE))
        assert started.status_code == 202, started.text


def test_on_azure_easyauth_without_app_service_authentication_cannot_start(tmp_path, model) -> None:
    """The finding: with Easy Auth off, a hand-made principal header was believed. Now the app does not start, so the
    forged header (Carol, an approver) reaches nothing."""
    message = _refused(_host(tmp_path, model, AUTH_MODE="easyauth", **ON_AZURE))
    assert "Refusing to start on Azure" in message
    assert "AUTH_MODE=easyauth" in message and "WEBSITE_AUTH_ENABLED" in message


def test_on_azure_easyauth_with_app_service_authentication_starts(tmp_path, model) -> None:
    """Documented behaviour with Easy Auth on: the platform validates callers, strips principal headers that come
    from outside and passes its own; the app takes the caller from them and the page gets no principal picker."""
    model.set_script(Script(default=Reply(text="Hi.")))
    with _host(tmp_path, model, AUTH_MODE="easyauth", WEBSITE_AUTH_ENABLED="True", **ON_AZURE) as host:
        auth = host.client.get("/api/health").json()["auth"]
        assert auth == {"mode": "easyauth", "warning": None, "local_principal_picker": False}
        assert host.client.get("/api/runs").status_code == 401  # no principal from the platform
        started = host.client.post("/api/agents/payer/runs", json={"input": "hi"}, headers=easyauth_headers(ALICE))
        assert started.status_code == 202, started.text
        mine = host.client.get("/api/runs", headers=easyauth_headers(ALICE)).json()
        assert [run["run_id"] for run in mine["runs"]] == [started.json()["run_id"]]


def test_on_azure_no_auth_needs_the_opt_in_setting(tmp_path, model) -> None:
    message = _refused(_host(tmp_path, model, AUTH_MODE="none", **ON_AZURE))
    assert "AUTH_MODE=none" in message and "ALLOW_ANONYMOUS_ON_AZURE=true" in message
    with _host(tmp_path, model, AUTH_MODE="none", ALLOW_ANONYMOUS_ON_AZURE="true", **ON_AZURE) as host:
        health = host.client.get("/api/health").json()
        assert "on purpose (ALLOW_ANONYMOUS_ON_AZURE=true)" in health["warnings"][-1]
        assert health["auth"]["local_principal_picker"] is False


def test_locally_easyauth_offers_the_principal_picker(tmp_path, model) -> None:
    with _host(tmp_path, model, AUTH_MODE="easyauth") as host:
        assert host.client.get("/api/health").json()["auth"]["local_principal_picker"] is True


def test_jwt_that_would_accept_any_client_of_the_issuer_needs_the_opt_out(tmp_path, model, issuer) -> None:
    """The finding: with only issuer and audience checked, any client application of an Entra tenant (an app-only
    token, no scope, no role) could call. Without a required scope or app role the app does not start, on a laptop
    too; `AUTH_ACCEPT_ANY_CLIENT=true` starts it on purpose, with a warning in `/api/health`."""
    jwt_settings = {"AUTH_MODE": "jwt", "AUTH_ISSUER": issuer.issuer, "AUTH_AUDIENCE": AUDIENCE}
    message = _refused(_host(tmp_path, model, **jwt_settings))
    assert "Refusing to start: AUTH_MODE=jwt accepts every token the issuer makes for AUTH_AUDIENCE" in message
    assert "AUTH_REQUIRED_SCOPES" in message and "AUTH_REQUIRED_APP_ROLES" in message
    assert "AUTH_ACCEPT_ANY_CLIENT=true" in message
    message = _refused(_host(tmp_path, model, **jwt_settings, AUTH_REQUIRED_SCOPES=" , "))  # a list of nothing
    assert "AUTH_ACCEPT_ANY_CLIENT=true" in message
    with _host(tmp_path, model, **jwt_settings, AUTH_ACCEPT_ANY_CLIENT="true") as host:
        health = host.client.get("/api/health").json()
        assert "on purpose (AUTH_ACCEPT_ANY_CLIENT=true)" in health["warnings"][-1]
        assert "AUTH_ACCEPT_ANY_CLIENT=true" in health["auth"]["warning"]
    with _host(tmp_path, model, **jwt_settings, AUTH_REQUIRED_APP_ROLES="Agents.Invoke") as host:
        assert host.client.get("/api/health").json()["auth"]["warning"] is None
