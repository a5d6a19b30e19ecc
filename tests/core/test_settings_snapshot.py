"""Settings read per request are reused while the environment is unchanged, and rebuilt as soon as it changes."""

from __future__ import annotations

import pytest

from agent_runtime.settings_snapshot import current_settings
from notifications.settings import NotificationSettings


def test_an_unchanged_environment_reuses_the_instance() -> None:
    first = current_settings(NotificationSettings)
    assert current_settings(NotificationSettings) is first


def test_a_changed_setting_is_seen_by_the_next_call(monkeypatch: pytest.MonkeyPatch) -> None:
    field = NotificationSettings.model_fields["webhook_secret"]
    name = field.validation_alias
    assert isinstance(name, str)
    monkeypatch.delenv(name, raising=False)
    assert current_settings(NotificationSettings).webhook_secret is None
    monkeypatch.setenv(name, "s3cret-value-for-the-test")
    changed = current_settings(NotificationSettings)
    assert changed.webhook_secret is not None
    assert changed.webhook_secret.get_secret_value() == "s3cret-value-for-the-test"
    monkeypatch.delenv(name)
    assert current_settings(NotificationSettings).webhook_secret is None
