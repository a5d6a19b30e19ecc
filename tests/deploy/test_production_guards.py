"""Production guards: on Azure (`WEBSITE_INSTANCE_ID` set) laptop-only settings are refused, with errors that name
the setting to change; settings kept on purpose are reported as warnings by `GET /api/health`.

Azure itself is not here: `WEBSITE_INSTANCE_ID` is the variable the platform sets on every instance, so setting it is
what running there looks like to the app. The app runs on devhost with the real model client and store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from app_services import start_app_host, stop_app_host

from agent_runs.deployment import DeploymentConfigurationError, DeploymentSettings, assess, durable_backend
from agent_runs.services import RunServices
from agent_runs.settings import RunSettings
from agent_runtime.settings import ModelSettings
from devhost.app_loader import AppLoadError
from devhost.testing import InProcessHost
from scripted_model import ScriptedModelServer
from session_store import StoreSettings

REPO_ROOT = Path(__file__).resolve().parents[2]
AZURE = {"WEBSITE_INSTANCE_ID": "0123456789abcdef", "CONTINUATION_TOKEN_SECRET": "a-long-random-secret-for-tests"}
APP_SETTINGS = (
    "WEBSITE_INSTANCE_ID", "CONTINUATION_TOKEN_SECRET", "COSMOS_ENDPOINT", "COSMOS_KEY", "SESSION_STORE",
    "MODEL_PROVIDER", "SCRIPTED_MODEL_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT", "AUTH_MODE",
    "WEBSITE_AUTH_ENABLED", "ALLOW_ANONYMOUS_ON_AZURE", "WEBSITE_HOSTNAME", "PUBLIC_BASE_URL",
    "AUTH_ISSUER", "AUTH_AUDIENCE", "AUTH_REQUIRED_SCOPES", "AUTH_REQUIRED_APP_ROLES", "AUTH_ACCEPT_ANY_CLIENT",
    "AzureFunctionsJobHost__extensions__durableTask__storageProvider__type",
)


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch):
    """Start from no app settings (the developer's shell may have some), then set the ones a test names."""
    for name in APP_SETTINGS:
        monkeypatch.delenv(name, raising=False)

    def set_env(**values: str) -> None:
        for name, value in values.items():
            monkeypatch.setenv(name, value)

    return set_env


def report():
    return assess(deployment=DeploymentSettings(), store=StoreSettings(), model=ModelSettings(), run=RunSettings())


def test_a_laptop_needs_nothing(environment) -> None:
    found = report()
    assert not found.on_azure and found.errors == []
    assert (found.store, found.model_provider, found.auth_mode) == ("sqlite", "scripted", "none")


def test_on_azure_sqlite_and_the_demo_model_are_refused_by_name(environment) -> None:
    environment(**AZURE, ALLOW_ANONYMOUS_ON_AZURE="true")
    found = report()
    assert len(found.errors) == 2
    store_error, model_error = found.errors
    assert "COSMOS_ENDPOINT" in store_error and "SESSION_STORE=sqlite" in store_error
    assert "AZURE_OPENAI_ENDPOINT" in model_error and "MODEL_PROVIDER=scripted" in model_error
    with pytest.raises(DeploymentConfigurationError, match=r"Refusing to start on Azure.*COSMOS_ENDPOINT"):
        RunServices().check_deployment()


def test_on_azure_a_missing_token_secret_is_refused(environment) -> None:
    environment(WEBSITE_INSTANCE_ID="x", SESSION_STORE="sqlite", MODEL_PROVIDER="scripted",
                ALLOW_ANONYMOUS_ON_AZURE="true")
    (error,) = report().errors
    assert "CONTINUATION_TOKEN_SECRET" in error


def test_on_azure_choices_made_on_purpose_start_with_warnings(environment) -> None:
    environment(**AZURE, SESSION_STORE="sqlite", MODEL_PROVIDER="scripted", ALLOW_ANONYMOUS_ON_AZURE="true")
    found = report()
    assert found.errors == []
    assert [w.split(":")[0] for w in found.warnings] == ["SESSION_STORE=sqlite", "MODEL_PROVIDER=scripted",
                                                         "AUTH_MODE=none"]


def test_on_azure_a_production_configuration_has_no_warning_but_auth(environment) -> None:
    environment(**AZURE, COSMOS_ENDPOINT="https://account.documents.azure.com:443/",
                AZURE_OPENAI_ENDPOINT="https://account.openai.azure.com/", AUTH_MODE="easyauth",
                WEBSITE_AUTH_ENABLED="True")
    found = report()
    assert (found.errors, found.warnings) == ([], [])
    assert (found.store, found.model_provider, found.auth_mode) == ("cosmos", "azure_openai", "easyauth")


def test_auth_settings_that_let_callers_forge_identities_are_refused_by_name(environment) -> None:
    production = {**AZURE, "COSMOS_ENDPOINT": "https://account.documents.azure.com:443/",
                  "AZURE_OPENAI_ENDPOINT": "https://account.openai.azure.com/"}
    environment(**production, AUTH_MODE="easyauth")
    (error,) = report().errors  # Easy Auth mode with nothing in front to strip forged principal headers
    assert error.startswith("AUTH_MODE=easyauth but App Service Authentication is off (WEBSITE_AUTH_ENABLED")
    environment(AUTH_MODE="none")
    (error,) = report().errors
    assert error.startswith("AUTH_MODE=none") and "ALLOW_ANONYMOUS_ON_AZURE=true" in error
    environment(AUTH_MODE="jwt")
    (error,) = report().errors
    assert error.startswith("AUTH_MODE=jwt needs AUTH_ISSUER and AUTH_AUDIENCE")
    environment(AUTH_ISSUER="https://login.microsoftonline.com/t/v2.0", AUTH_AUDIENCE="api://agents")
    (error,) = report().errors  # any client application of the tenant could call
    assert error.startswith("AUTH_MODE=jwt accepts every token the issuer makes for AUTH_AUDIENCE")
    environment(AUTH_REQUIRED_SCOPES="access_as_user")
    assert report().errors == []
    environment(AUTH_MODE="EasyAuthh", WEBSITE_AUTH_ENABLED="True")
    (error,) = report().errors
    assert error == "AUTH_MODE='EasyAuthh' is not a known mode: set AUTH_MODE to one of none, easyauth, jwt."


def test_an_unknown_auth_mode_is_refused_on_a_laptop_too(environment) -> None:
    environment(AUTH_MODE="jwtt")
    with pytest.raises(DeploymentConfigurationError, match=r"^Refusing to start: AUTH_MODE='jwtt' is not a known"):
        RunServices().check_deployment()
    environment(AUTH_MODE="EASYAUTH")
    assert (report().errors, report().auth_mode) == ([], "easyauth")


def test_session_store_cosmos_needs_an_endpoint(environment) -> None:
    environment(SESSION_STORE="cosmos")
    with pytest.raises(ValueError, match="COSMOS_ENDPOINT"):
        StoreSettings()


def test_durable_backend_comes_from_host_json_unless_an_app_setting_overrides_it(environment, tmp_path) -> None:
    assert durable_backend(REPO_ROOT, DeploymentSettings()) == "azureManaged"
    (tmp_path / "host.json").write_text(json.dumps({"Extensions": {"DurableTask": {"StorageProvider": {}}}}))
    assert durable_backend(tmp_path, DeploymentSettings()) == "AzureStorage"  # the extension's default
    environment(AzureFunctionsJobHost__extensions__durableTask__storageProvider__type="AzureStorage")
    assert durable_backend(REPO_ROOT, DeploymentSettings()) == "AzureStorage"


def test_the_durable_engine_says_whether_devhost_stands_in_for_the_backend(environment, monkeypatch) -> None:
    monkeypatch.delenv("DEVHOST_ENGINE", raising=False)
    environment(**AZURE)
    assert report().durable_engine == "functions-host"  # on Azure: the Durable extension on the configured backend
    monkeypatch.setenv("DEVHOST_ENGINE", "devhost")  # what devhost sets for the app it runs
    assert (report().durable_engine, report().durable_backend) == ("devhost", "azureManaged")


# ------------------------------------------------------------------------------------------------ the app on devhost


def _start(env: dict[str, str]) -> InProcessHost:
    return start_app_host(REPO_ROOT, clock="virtual", env={"SESSION_STORE_PATH": ":memory:", **env})


def test_the_app_refuses_to_start_on_azure_without_a_store_and_a_model(environment) -> None:
    environment(**AZURE, ALLOW_ANONYMOUS_ON_AZURE="true")
    with pytest.raises(AppLoadError) as refused:  # function_app.py fails to import: the host serves nothing
        _start({})
    message = str(refused.value)
    assert "DeploymentConfigurationError: Refusing to start on Azure" in message
    assert "COSMOS_ENDPOINT" in message and "MODEL_PROVIDER=scripted" in message
    assert AZURE["CONTINUATION_TOKEN_SECRET"] not in message


def test_health_reports_the_deployment_and_its_warnings(environment) -> None:
    server = ScriptedModelServer().start()
    try:
        environment(**AZURE, ALLOW_ANONYMOUS_ON_AZURE="true")
        host = _start({"SESSION_STORE": "sqlite", "MODEL_PROVIDER": "scripted", "SCRIPTED_MODEL_URL": server.base_url})
        try:
            health = host.client.get("/api/health").json()
        finally:
            stop_app_host(host)
    finally:
        server.stop()
    assert health["on_azure"] is True and health["store"] == "sqlite" and health["model_provider"] == "scripted"
    assert health["durable_backend"] == "azureManaged" and health["task_hub"] == "tests"
    assert health["durable_engine"] == "devhost"  # devhost runs this app: its engine, not the configured backend
    assert health["auth_mode"] == "none"
    assert [w.split(":")[0] for w in health["warnings"]] == ["SESSION_STORE=sqlite", "MODEL_PROVIDER=scripted",
                                                             "AUTH_MODE=none"]


def test_links_come_from_the_platform_or_the_configured_public_url(environment) -> None:
    assert DeploymentSettings().link_base is None  # locally: the request's own URL
    environment(WEBSITE_HOSTNAME="localhost:7071")  # what `func start` sets: still local
    assert DeploymentSettings().link_base is None
    environment(WEBSITE_INSTANCE_ID="x", WEBSITE_HOSTNAME="func-a.azurewebsites.net")
    assert DeploymentSettings().link_base == "https://func-a.azurewebsites.net"
    environment(PUBLIC_BASE_URL="https://agents.contoso.com/v1/")
    assert DeploymentSettings().link_base == "https://agents.contoso.com/v1"
    for bad in ("agents.contoso.com", "ftp://x", "https://x/?a=1", "https://"):
        environment(PUBLIC_BASE_URL=bad)
        with pytest.raises(ValueError, match="PUBLIC_BASE_URL"):
            DeploymentSettings()
