"""The app under test, driven like a client would: real HTTP to devhost, plus read-only looks into its store.

`AppClient` wraps a devhost (in-process or child process) with the routes of the HTTP API; `InProcessApp` adds what
only an in-process host can do (settle on the engine, move the virtual clock, read the app's own store). Assertions
stay in the tests; these helpers only fetch.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

from devhost.testing import InProcessHost
from scripted_model import Reply, ScriptedToolCall
from session_store import SessionStore

T = TypeVar("T")
FINAL = frozenset({"completed", "failed", "cancelled"})
# Waits for progress only bound a failure; a loaded 2-core CI machine runs several times slower than a laptop.
PROGRESS_TIMEOUT_S = 120.0
PROBLEM_JSON = "application/problem+json"


def expected_status_code(view: dict[str, Any]) -> int:
    """What a run route answers for a run in this state: 202 running, 200 completed/cancelled, 500 failed."""
    if view["status"] == "failed":
        return 500
    return 200 if view["status"] in FINAL else 202


class AppClient:
    """The HTTP API of the app, one method per route a test uses."""

    def __init__(self, client: httpx.Client) -> None:
        self.http = client

    def start(self, agent: str = "helper", input: Any = "hi", **body: Any) -> dict[str, Any]:
        response = self.http.post(f"/api/agents/{agent}/runs", json={"input": input, **body})
        assert response.status_code == expected_status_code(response.json()), response.text
        return response.json()

    def poll(self, run_id: str, token: str | None = None, wait_seconds: float = 0) -> httpx.Response:
        params: dict[str, Any] = {"wait_seconds": wait_seconds}
        if token is not None:
            params["continuation_token"] = token
        return self.http.get(f"/api/runs/{run_id}", params=params)

    def view(self, run_id: str) -> dict[str, Any]:
        response = self.poll(run_id)
        assert response.status_code == expected_status_code(response.json()), response.text
        return response.json()

    def wait_for(self, run_id: str, statuses: Iterable[str], timeout: float = PROGRESS_TIMEOUT_S) -> dict[str, Any]:
        """Long-poll until the run's status is one of `statuses` (bounded by `timeout`)."""
        wanted = set(statuses)
        deadline = time.monotonic() + timeout
        while True:
            view = self.poll(run_id, wait_seconds=1).json()
            if view["status"] in wanted:
                return view
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} is {view['status']}, not {sorted(wanted)}, after {timeout}s")

    def decide(self, run_id: str, approval_id: str, decision: str, **body: Any) -> httpx.Response:
        return self.http.post(f"/api/runs/{run_id}/approvals/{approval_id}", json={"decision": decision, **body})

    def cancel(self, run_id: str) -> httpx.Response:
        return self.http.post(f"/api/runs/{run_id}/cancel")

    def approvals(self, run_id: str) -> list[dict[str, Any]]:
        response = self.http.get(f"/api/runs/{run_id}/approvals")
        assert response.status_code == 200, response.text
        return response.json()["approvals"]

    def live_streams(self, since: dict[str, int] | None = None) -> dict[str, int]:
        """The live streams of this app (`/api/health`): watchers (one per streamed run), subscribers; `since`:
        counted from an earlier reading (this app's own earlier streams may still be closing)."""
        response = self.http.get("/api/health")
        assert response.status_code == 200, response.text
        now: dict[str, int] = response.json()["streams"]
        return {key: value - (since or {}).get(key, 0) for key, value in now.items()}

    def session_messages(self, session_id: str, run_id: str | None = None) -> list[dict[str, Any]]:
        """Every stored message of the session (all pages), optionally only those of one run."""
        messages: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            params: dict[str, Any] = {"limit": 200, **({"continuation_token": token} if token else {})}
            response = self.http.get(f"/api/sessions/{session_id}/messages", params=params)
            assert response.status_code == 200, response.text
            page = response.json()
            messages.extend(page["messages"])
            token = page["continuation_token"]
            if not token:
                return [m for m in messages if run_id is None or m["run_id"] == run_id]


@dataclass(frozen=True)
class StoreSnapshot:
    """Everything a request could have written: sessions, and per session its messages, runs, approvals, effects."""

    sessions: dict[str, dict[str, Any]]

    @classmethod
    async def take(cls, store: SessionStore) -> StoreSnapshot:
        sessions: dict[str, dict[str, Any]] = {}
        continuation: str | None = None
        while True:
            page = await store.list_sessions(limit=200, continuation=continuation)
            for session in page.items:
                sid = session.session_id
                sessions[sid] = {
                    "session": session.model_dump(mode="json", exclude={"etag"}),
                    "messages": await store.count_messages(sid),
                    "runs": [r.model_dump(mode="json", exclude={"etag"}) for r in await store.list_runs(sid)],
                    "approvals": [
                        a.model_dump(mode="json", exclude={"etag"}) for a in await store.list_approvals(session_id=sid)
                    ],
                    "effects": len(await store.list_effects(sid)),
                }
            continuation = page.continuation
            if not continuation:
                return cls(sessions)


class InProcessApp(AppClient):
    """The app on an in-process devhost (virtual clock): the HTTP API plus engine and store access."""

    def __init__(self, host: InProcessHost, store_backend: str) -> None:
        super().__init__(host.client)
        self.host = host
        self.store_backend = store_backend

    @property
    def max_body_bytes(self) -> int:
        """The documented request size limit, read from the app the host loaded.

        Test modules must not import `http_api` themselves: the host forgets the app's modules at stop, but a
        package imported before it keeps its submodule attributes, and `function_app`'s `from http_api import runs`
        would then pick up the previous host's modules.
        """
        return int(self.app_module("http_api.adapter").MAX_BODY_BYTES)

    def start_until_approval(self, agent: str = "helper", input: Any = "please", **body: Any) -> dict[str, Any]:
        """Start a run and let it reach `requires_action`; returns its view."""
        started = self.start(agent=agent, input=input, **body)
        self.settle()
        view = self.view(started["run_id"])
        assert view["status"] == "requires_action", view
        return view

    def settle(self, timeout: float = PROGRESS_TIMEOUT_S) -> None:
        """Run until nothing can progress without an event or a timer (no timer fires: the clock is virtual)."""
        self.host.wait_until_idle(timeout)

    def advance(self, seconds: float) -> None:
        """Move durable time forward (timers fire), then run until idle."""
        self.host.advance(seconds)

    def app_module(self, name: str) -> Any:
        """One of the app's modules as the host imported it; in real-worker mode this process imports it itself
        (under the host's settings) to reach the same store the workers use (a SQLite file or Cosmos)."""
        module = sys.modules.get(name)
        return module if module is not None else importlib.import_module(name)

    def services(self) -> Any:
        """The app's `RunServices` class, as the host imported it (not this process's own import, if any)."""
        return self.app_module("agent_runs.services").RunServices

    def store_call(self, call: Callable[[SessionStore], Awaitable[T]]) -> T:
        """Run `call(store)` on the app's own store, on the host's loop (where its activities use it too)."""
        return self.host.run(call(self.services().current().store))

    def snapshot(self) -> StoreSnapshot:
        return self.store_call(StoreSnapshot.take)

    def effects(self, session_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        records = self.store_call(lambda store: store.list_effects(session_id, kind=kind))
        return [record.payload for record in records]

    def history(self, run_id: str) -> dict[str, Any]:
        """The orchestration's status with its full history, inputs and outputs (what Durable stores and replays)."""
        status = self.host.run(self.host.engine.get_status(run_id, show_history=True, show_history_output=True))
        assert status is not None, f"no orchestration {run_id}"
        return status.to_json()


async def until_completed(gateway: Any, instance_id: str, timeout: float = PROGRESS_TIMEOUT_S) -> None:
    """Until the orchestration has completed, from inside the app (its `DurableGateway`): the orchestration runs on
    the same loop, so there is no event to wait on, only the state to look at again."""
    for _ in range(int(timeout / 0.02)):
        state = await gateway.state(instance_id)
        if state is not None and state.runtime_status == "Completed":
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"orchestration {instance_id} did not complete within {timeout} s")


def wait_for_file(path: Path, timeout: float = PROGRESS_TIMEOUT_S) -> None:
    """Block until a file exists (written by a tool in another process); bounded."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout}s")
        time.sleep(0.02)  # polling a file another process writes: there is no event to wait on


def completed_activities(status: dict[str, Any]) -> list[str]:
    """The activities an orchestration completed, in order, from its status with `showHistory`."""
    return [e["FunctionName"] for e in status["historyEvents"] if e["EventType"] == "TaskCompleted"]


def contents_of(message: dict[str, Any]) -> list[str]:
    """The content types of a stored message (`text`, `function_call`, `function_result`, approvals...)."""
    return [content["type"] for content in message["contents"]]


def pending_ids(view: dict[str, Any]) -> list[str]:
    return [approval["approval_id"] for approval in view["pending_approvals"]]


def unanswered_tool_calls(chat_messages: list[dict[str, Any]]) -> list[str]:
    """Tool call ids a chat-completions request leaves without their tool messages right after the assistant
    message that made them (OpenAI refuses such a request with 400)."""
    missing: list[str] = []
    for index, message in enumerate(chat_messages):
        calls = [call["id"] for call in message.get("tool_calls") or []]
        answered: set[str] = set()
        for follower in chat_messages[index + 1 :]:
            if follower.get("role") != "tool":
                break
            answered.add(follower.get("tool_call_id"))
        missing += [call for call in calls if call not in answered]
    return missing


def parallel_calls(tool: str, *arguments: dict[str, Any]) -> Reply:
    """One model answer calling `tool` once per arguments object (a batch of parallel calls)."""
    return Reply(tool_calls=[ScriptedToolCall(name=tool, arguments=args) for args in arguments])


def post_concurrently(base_url: str, count: int, path: str, body: dict, headers: dict) -> list[httpx.Response]:
    """`count` copies of one POST, all in flight at once."""
    return post_all_at_once(base_url, [(path, body)] * count, headers)


def post_all_at_once(base_url: str, requests: list[tuple[str, dict]], headers: dict) -> list[httpx.Response]:
    """POSTs of (path, JSON body), all in flight at once; the responses in the same order."""

    async def post_all() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=base_url, timeout=120, trust_env=False) as client:
            return await asyncio.gather(*(client.post(path, json=body, headers=headers) for path, body in requests))

    return asyncio.run(post_all())
