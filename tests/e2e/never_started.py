"""A start with an `Idempotency-Key` that writes its run and input, then can neither start the orchestration nor
close the run (it died); then the key's claim is taken for surely over, so that its retry takes the start over
(`run_lifecycle.RunStart.unstarted`). `module` finds one of the app's modules as its host imported it
(`InProcessApp.app_module`, or `sys.modules` for an in-process host)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest

AGENT_RUN = ("http_api.durable_gateway", "DurableGateway", "start_run")
WORKFLOW = ("http_api.workflow_gateway", "WorkflowGateway", "start")


def stored_never_started(
    module: Callable[[str], Any], monkeypatch: pytest.MonkeyPatch, post: Callable[[], httpx.Response],
    orchestration: tuple[str, str, str] = AGENT_RUN,
) -> None:
    """`post` the start while `orchestration` (module, gateway class, its start method) fails and the run cannot be
    closed; then age the key's claim (`monkeypatch`)."""
    where, gateway, method = orchestration

    async def dies(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("the request died before the orchestration started")

    async def cannot_close(*args: Any, **kwargs: Any) -> None:
        return None

    with pytest.MonkeyPatch.context() as dying:
        dying.setattr(getattr(module(where), gateway), method, dies)
        dying.setattr(module("http_api.run_lifecycle"), "abandon", cannot_close)
        failed = post()
    assert failed.status_code >= 500, failed.text
    monkeypatch.setattr(module("http_api.idempotency"), "ABANDONED_AFTER", timedelta(0))
