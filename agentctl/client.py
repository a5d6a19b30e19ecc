"""The HTTP API as the client sees it: one method per route, problems raised as `ApiError`; a temporary problem
is sent again first (`agentctl.retries` says when)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from agentctl import retries

DEFAULT_URL = "http://127.0.0.1:7071"


@dataclass
class ApiError(Exception):
    """An RFC 9457 problem (or any non-success answer) from the API."""

    status: int
    code: str
    detail: str
    body: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.detail}"


@dataclass(frozen=True)
class Connection:
    url: str = DEFAULT_URL
    key: str | None = None
    token: str | None = None

    @classmethod
    def from_env(cls, url: str | None, key: str | None, token: str | None) -> Connection:
        return cls(
            url=(url or os.environ.get("AGENTS_URL") or DEFAULT_URL).rstrip("/"),
            key=key or os.environ.get("AGENTS_KEY"),
            token=token or os.environ.get("AGENTS_TOKEN"),
        )

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.key:
            headers["x-functions-key"] = self.key
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers


class AgentsClient:
    def __init__(
        self, connection: Connection, *, timeout: float = 90.0, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.connection = connection
        self.http = httpx.Client(
            base_url=connection.url, headers=connection.headers(), timeout=timeout, trust_env=False
        )
        self.sleep = sleep  # between tries (tests pass one that does not wait)

    def close(self) -> None:
        self.http.close()

    # ----------------------------------------------------------------------------------------------- runs

    def start_run(self, agent: str, text: str, session_id: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"input": text}
        if session_id:
            body["session_id"] = session_id
        return self._run_answer(self._start(f"/api/agents/{agent}/runs", body))

    def poll(
        self, run_id: str, token: str | None = None, wait_seconds: float = 0, *, workflow: bool = False
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"wait_seconds": wait_seconds}
        if token:
            params["continuation_token"] = token
        return self._run_answer(self._send("GET", run_path(run_id, workflow=workflow), params=params))

    def view(self, run_id: str) -> dict[str, Any]:
        """A run's view, whatever its kind (a workflow run's has `workflow`): the run routes, and the workflow routes
        only when the app says the run is a workflow run (an agent run costs no extra request)."""
        try:
            return self.poll(run_id)
        except ApiError as error:
            if error.code != "run_is_a_workflow":
                raise
            return self.poll(run_id, workflow=True)

    def cancel(self, run_id: str) -> dict[str, Any]:
        return self._json(self._send("POST", f"/api/runs/{run_id}/cancel"))

    def rewind(self, run_id: str) -> dict[str, Any]:
        """Rewind a failed run, whatever its kind: the workflow route only when the app says it is a workflow run."""
        try:
            return self._json(self._send("POST", f"/api/runs/{run_id}/rewind", repeatable=False))
        except ApiError as error:
            if error.code != "run_is_a_workflow":
                raise
            return self._json(self._send("POST", f"/api/workflows/runs/{run_id}/rewind", repeatable=False))

    def fork(self, run_id: str, text: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {} if text is None else {"input": text}
        return self._run_answer(self._start(f"/api/runs/{run_id}/fork", body))

    def transcript(self, run_id: str) -> dict[str, Any]:
        return self._json(self._send("GET", f"/api/runs/{run_id}/transcript"))

    def decide(
        self,
        run_id: str,
        approval_id: str,
        decision: str,
        *,
        reason: str | None = None,
        arguments: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"decision": decision}
        if reason:
            body["reason"] = reason
        if arguments is not None:
            body["arguments"] = arguments
        return self._json(self._send("POST", f"/api/runs/{run_id}/approvals/{approval_id}", json=body))

    def run_approvals(self, run_id: str, status: str | None = None) -> list[dict[str, Any]]:
        params = {"status": status} if status else {}
        return self._json(self._send("GET", f"/api/runs/{run_id}/approvals", params=params))["approvals"]

    def inbox(self) -> list[dict[str, Any]]:
        """Every pending approval the caller may decide, across runs and workflows (all pages)."""
        return list(self._pages("/api/approvals", {"status": "pending"}, "approvals"))

    def runs(self, status: str | None = None, agent: str | None = None) -> list[dict[str, Any]]:
        params = {k: v for k, v in {"status": status, "agent": agent}.items() if v}
        return list(self._pages("/api/runs", params, "runs"))

    def sessions(self) -> list[dict[str, Any]]:
        return list(self._pages("/api/sessions", {}, "sessions"))

    def agent(self, name: str) -> dict[str, Any]:
        return self._json(self._send("GET", f"/api/agents/{name}"))

    # ----------------------------------------------------------------------------------------------- workflows

    def workflows(self) -> list[dict[str, Any]]:
        return self._json(self._send("GET", "/api/workflows"))["workflows"]

    def start_workflow(self, name: str, workflow_input: dict[str, Any]) -> dict[str, Any]:
        return self._run_answer(self._start(f"/api/workflows/{name}/runs", {"input": workflow_input}))

    # ----------------------------------------------------------------------------------------------- plumbing

    def _start(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """A request that starts a run, under a key of its own: sent again, it answers with the same run."""
        return self._send("POST", path, json=body, headers={"Idempotency-Key": f"agentctl-{uuid.uuid4().hex}"})

    def _send(
        self,
        method: str,
        path: str,
        *,
        json: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        repeatable: bool = True,
    ) -> httpx.Response:
        """The request, sent again while its answer is a temporary problem (`retries`); and while its connection
        breaks after it went out, if `repeatable`: the same request twice does what once would (a rewind is not: the
        second would find its run rewound and answer 409)."""
        attempt = 1
        while True:
            try:
                response = self.http.request(method, path, json=json, params=params, headers=headers)
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                wait = retries.wait_after_broken_connection(attempt) if repeatable else None
                if wait is None:
                    raise
            else:
                wait = retries.wait_before_retry(response.status_code, response.headers, attempt)
                if wait is None:
                    return response
            self.sleep(wait)
            attempt += 1

    def _pages(self, path: str, params: dict[str, Any], key: str) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            query = {**params, **({"continuation_token": token} if token else {})}
            page = self._json(self._send("GET", path, params=query))
            yield from page.get(key) or page.get("items") or []
            token = page.get("continuation_token")
            if not token:
                return

    @staticmethod
    def _run_answer(response: httpx.Response) -> dict[str, Any]:
        """A run route answers 500 with the run as its body when the run failed: that is a view, not an error."""
        if response.status_code == 500 and _is_json(response) and "status" in response.json():
            return response.json()
        return AgentsClient._json(response)

    @staticmethod
    def _json(response: httpx.Response) -> dict[str, Any]:
        if response.is_success and (_is_json(response) or not response.content):
            return response.json() if response.content else {}
        if response.is_success or (response.status_code == 404 and not _is_json(response)):
            kind = response.headers.get("content-type", "no content type").split(";")[0]
            raise ApiError(response.status_code, "not_the_api", f"HTTP {response.status_code}, {kind}")
        body = response.json() if _is_json(response) else {}
        raise ApiError(
            response.status_code,
            str(body.get("code") or f"http_{response.status_code}"),
            str(body.get("detail") or body.get("title") or response.reason_phrase),
            body,
        )


def run_path(run_id: str, *, workflow: bool = False) -> str:
    """A run's route: a workflow run is polled and streamed on the workflow routes (its gates' approvals are decided
    on the run routes, as any run's)."""
    return f"/api/workflows/runs/{run_id}" if workflow else f"/api/runs/{run_id}"


def _is_json(response: httpx.Response) -> bool:
    return "json" in response.headers.get("content-type", "")
