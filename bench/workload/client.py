"""Async HTTP helpers over the app's public API (what a client does: start, poll with tokens, approve)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

FINAL = frozenset({"completed", "failed", "cancelled"})


RETRYABLE = frozenset({429, 503})
MAX_RETRIES = 20
MAX_RETRY_AFTER_SECONDS = 0.2  # honour Retry-After, capped so that fault tests stay fast


class RunStuckError(AssertionError):
    """A run did not reach the expected status before its deadline."""


async def request(client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """One API call as a well-behaved client makes it: 429/503 are retried after their `Retry-After`."""
    for _ in range(MAX_RETRIES):
        response = await client.request(method, url, **kwargs)
        if response.status_code not in RETRYABLE:
            return response
        await asyncio.sleep(min(float(response.headers.get("Retry-After", "1")), MAX_RETRY_AFTER_SECONDS))
    return response


async def start_run(
    client: httpx.AsyncClient, prompt: str, *, agent: str = "worker", session_id: str | None = None,
    wait_seconds: float = 0,
) -> dict[str, Any]:
    body: dict[str, Any] = {"input": prompt, "wait_seconds": wait_seconds}
    if session_id is not None:
        body["session_id"] = session_id
    response = await request(client, "POST", f"/api/agents/{agent}/runs", json=body)
    if not is_run_response(response):
        raise AssertionError(f"start failed: {response.status_code} {response.text[:500]}")
    return response.json()


def is_run_response(response: httpx.Response) -> bool:
    """A run route's answer: 202 running, 200 completed/cancelled, 500 with the run as body when it failed."""
    if response.status_code == 500:
        return response.headers.get("content-type", "").startswith("application/json") and (
            response.json().get("status") == "failed"
        )
    return response.status_code in (200, 202)


async def poll(
    client: httpx.AsyncClient, view: dict[str, Any], *, until: frozenset[str] = FINAL, deadline_s: float = 60,
    wait_seconds: float = 2,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Poll with continuation tokens until the status is in `until`; returns (last view, every update seen)."""
    updates = list(view.get("updates") or [])
    deadline = time.monotonic() + deadline_s
    while view["status"] not in until:
        if time.monotonic() > deadline:
            raise RunStuckError(f"run {view['run_id']} still {view['status']} after {deadline_s}s")
        params: dict[str, Any] = {"wait_seconds": wait_seconds}
        if view.get("continuation_token"):
            params["continuation_token"] = view["continuation_token"]
        response = await request(client, "GET", f"/api/runs/{view['run_id']}", params=params)
        if not is_run_response(response):
            raise AssertionError(f"poll failed: {response.status_code} {response.text[:500]}")
        view = response.json()
        updates.extend(view.get("updates") or [])
    return view, updates


async def decide_all(client: httpx.AsyncClient, view: dict[str, Any], decision: str = "approve") -> int:
    """Decide every pending approval of `view`; returns how many were accepted (202)."""
    accepted = 0
    for pending in view.get("pending_approvals") or []:
        url = f"/api/runs/{view['run_id']}/approvals/{pending['approval_id']}"
        response = await request(client, "POST", url, json={"decision": decision})
        if response.status_code != 202:
            raise AssertionError(f"decision refused: {response.status_code} {response.text[:500]}")
        accepted += 1
    return accepted


async def session_messages(client: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    """Every message of the session, following the continuation tokens."""
    messages: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 200}
    while True:
        response = await request(client, "GET", f"/api/sessions/{session_id}/messages", params=params)
        response.raise_for_status()
        page = response.json()
        messages.extend(page["messages"])
        if not page.get("continuation_token"):
            return messages
        params["continuation_token"] = page["continuation_token"]


def async_client(base_url: str, *, connections: int = 100, timeout: float = 120) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return httpx.AsyncClient(base_url=base_url, limits=limits, timeout=timeout, trust_env=False)
