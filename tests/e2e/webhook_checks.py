"""What a start's webhook check finds changed since a first request passed it, as the tests make it: the webhook's
host no longer resolves (to a public address: the check's DNS look-up refuses it, as on Azure), or an operator took
the host out of WEBHOOK_ALLOWED_HOSTS. `module` finds one of the app's modules as its host imported it
(`InProcessApp.app_module`, or `sys.modules` for an in-process host)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

Module = Callable[[str], Any]
FIELD_CHECK = "notifications.http.webhook_field"


def host_unresolvable(module: Module, monkeypatch: pytest.MonkeyPatch) -> None:
    destinations = module("notifications.destinations")

    async def unresolvable(url: str, *, allow_private: bool) -> None:
        raise destinations.DestinationError("the host does not resolve")

    monkeypatch.setattr(module(FIELD_CHECK), "check_resolved", unresolvable)


def host_revoked(module: Module, monkeypatch: pytest.MonkeyPatch) -> None:
    destinations = module("notifications.destinations")
    monkeypatch.setattr(module(FIELD_CHECK), "check_run_webhook",
                        lambda url, allowed: destinations.check_run_webhook(url, {"elsewhere.example"}))


CHANGES: dict[str, Callable[[Module, pytest.MonkeyPatch], None]] = {
    "unresolvable": host_unresolvable, "revoked": host_revoked,
}
