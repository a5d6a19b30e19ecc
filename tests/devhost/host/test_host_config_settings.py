"""host.json values that name an app setting (`"hubName": "%TASKHUB_NAME%"`) are resolved from the settings, as the
Durable extension resolves them with the host's name resolver; an unset one stops the host with the setting's name."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from devhost.http.host_config import HostConfig, HostConfigError
from devhost.testing import InProcessHost

APPS = Path(__file__).resolve().parent.parent / "apps"


def durable_host_json(hub: str) -> dict:
    return {"version": "2.0", "extensions": {"durableTask": {"hubName": hub}}}


def test_hub_name_from_an_app_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_TASK_HUB", "hubfromsettings")
    assert HostConfig.from_document(durable_host_json("%MY_TASK_HUB%")).hub_name == "hubfromsettings"
    assert HostConfig.from_document(durable_host_json("LiteralHub")).hub_name == "LiteralHub"
    assert HostConfig.from_document({}).hub_name == "TestHubName"


def test_an_unset_app_setting_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MY_TASK_HUB", raising=False)
    with pytest.raises(HostConfigError, match=r"hubName is '%MY_TASK_HUB%' but the app setting MY_TASK_HUB is not set"):
        HostConfig.from_document(durable_host_json("%MY_TASK_HUB%"))


def test_the_client_binding_carries_the_resolved_hub(tmp_path: Path) -> None:
    app_dir = tmp_path / "app"
    shutil.copytree(APPS / "http_durable", app_dir)
    (app_dir / "host.json").write_text(json.dumps(durable_host_json("%MY_TASK_HUB%")))
    (app_dir / "local.settings.json").write_text(json.dumps({"Values": {"MY_TASK_HUB": "hubfromlocalsettings"}}))
    with InProcessHost(app_dir, clock="virtual") as host:
        response = host.client.post("/api/orchestrators/hello_sequence")
        assert response.status_code == 202, response.text
        assert "taskHub=hubfromlocalsettings" in response.json()["statusQueryGetUri"]
