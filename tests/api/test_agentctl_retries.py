"""`agentctl` sends a request again itself when the app's answer says the problem passes (503 / 429, or a
`Retry-After`; a stream it follows, too), and a start under one `Idempotency-Key` throughout, so a start sent twice
starts one run. The requests go through httpx's own transport for tests (`MockTransport`); the real app's 503s are
met end to end in `tests/e2e/test_e2e_cli.py`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from agentctl import retries
from agentctl.client import AgentsClient, ApiError, Connection
from agentctl.follow import follow

Answer = httpx.Response | Exception


def problem(status: int, code: str, retry_after: str | None = None) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return httpx.Response(status, json={"code": code, "detail": code.replace("_", " ")}, headers=headers)


class Scripted:
    """Answers the client's requests in order, and keeps what it was sent and how long it slept."""

    def __init__(self, *answers: Answer) -> None:
        self._answers: Iterator[Answer] = iter(answers)
        self.requests: list[httpx.Request] = []
        self.slept: list[float] = []
        self.client = AgentsClient(Connection(), sleep=self.slept.append)
        self.client.http = httpx.Client(base_url="http://app.test", transport=httpx.MockTransport(self._answer))

    def _answer(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        answer = next(self._answers)
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.fixture
def scripted() -> Iterator[Callable[..., Scripted]]:
    made: list[Scripted] = []

    def make(*answers: Answer) -> Scripted:
        made.append(Scripted(*answers))
        return made[-1]

    yield make
    for each in made:
        each.client.close()


def test_a_decision_stored_but_not_delivered_is_sent_again_after_the_wait_the_app_asks(
    scripted: Callable[..., Scripted],
) -> None:
    app = scripted(problem(503, "decision_not_delivered", "1"), httpx.Response(200, json={"status": "approved"}))
    assert app.client.decide("r1", "a1", "approve", reason="fine") == {"status": "approved"}
    assert app.slept == [1.0]
    first, second = app.requests
    assert (second.method, second.url.path) == ("POST", "/api/runs/r1/approvals/a1")
    assert json.loads(second.content) == json.loads(first.content) == {"decision": "approve", "reason": "fine"}


def test_a_start_keeps_its_idempotency_key_through_a_throttled_store_and_a_broken_connection(
    scripted: Callable[..., Scripted],
) -> None:
    app = scripted(
        problem(503, "store_unavailable", "1"),
        httpx.RemoteProtocolError("Server disconnected without sending a response."),
        httpx.Response(202, json={"run_id": "r1", "status": "running"}, headers={"Retry-After": "1"}),
    )
    assert app.client.start_run("helper", "hi", "s1") == {"run_id": "r1", "status": "running"}
    assert app.slept == [1.0, retries.backoff(2)]  # the 202's Retry-After means "poll later": not sent again
    keys = {request.headers["Idempotency-Key"] for request in app.requests}
    assert len(app.requests) == 3 and len(keys) == 1 and keys.pop().startswith("agentctl-")


def test_every_start_has_a_key_of_its_own(scripted: Callable[..., Scripted]) -> None:
    created = httpx.Response(202, json={"run_id": "r"})
    app = scripted(created, created, created)
    app.client.start_run("helper", "hi")
    app.client.fork("r0", "again")
    app.client.start_workflow("review", {})
    assert len({request.headers["Idempotency-Key"] for request in app.requests}) == 3


def test_it_gives_up_after_a_few_tries_with_the_apps_problem(scripted: Callable[..., Scripted]) -> None:
    app = scripted(*[problem(503, "cancel_not_delivered", "1")] * retries.ATTEMPTS)
    with pytest.raises(ApiError) as raised:
        app.client.cancel("r1")
    assert (raised.value.status, raised.value.code) == (503, "cancel_not_delivered")
    assert len(app.requests) == retries.ATTEMPTS and app.slept == [1.0] * (retries.ATTEMPTS - 1)


@pytest.mark.parametrize(
    ("answer", "retried"),
    [
        (problem(409, "idempotency_key_busy", "1"), True),  # the first request with the key is still starting
        (problem(429, "too_many_requests"), True),  # no Retry-After: backs off on its own
        (problem(503, "store_unavailable", "Wed, 21 Oct 2026 07:28:00 GMT"), True),  # a date: backs off on its own
        (problem(503, "auth_unavailable", "60"), False),  # longer than a person should wait unawares
        (problem(409, "run_finished"), False),
        (problem(400, "validation_error"), False),
        (problem(404, "run_not_found"), False),
        (problem(500, "internal_error"), False),
    ],
)
def test_which_answers_are_sent_again(scripted: Callable[..., Scripted], answer: httpx.Response, retried: bool) -> None:
    ok = httpx.Response(200, json={"approvals": []})
    app = scripted(answer, ok)
    try:
        assert app.client.run_approvals("r1") == []
    except ApiError as error:
        assert not retried and error.status == answer.status_code
    assert len(app.requests) == (2 if retried else 1)


def test_a_failed_runs_view_is_an_answer_not_a_problem(scripted: Callable[..., Scripted]) -> None:
    app = scripted(httpx.Response(500, json={"run_id": "r1", "status": "failed"}))
    assert app.client.poll("r1")["status"] == "failed"
    assert len(app.requests) == 1


def test_a_rewind_whose_connection_broke_is_not_sent_again(scripted: Callable[..., Scripted]) -> None:
    """The rewind may have happened: sent again it would answer 409 `run_not_failed`, which tells the person less
    than the broken connection does (`agentctl show` says where the run is)."""
    app = scripted(httpx.ReadError("connection reset"), httpx.Response(202, json={}))
    with pytest.raises(httpx.ReadError):
        app.client.rewind("r1")
    assert len(app.requests) == 1 and app.slept == []


def test_a_rewind_the_app_answered_503_is_sent_again(scripted: Callable[..., Scripted]) -> None:
    app = scripted(problem(503, "store_unavailable", "1"), httpx.Response(202, json={"run_id": "r1"}))
    assert app.client.rewind("r1") == {"run_id": "r1"}
    assert len(app.requests) == 2


def test_nothing_answers_at_all_is_not_waited_for(scripted: Callable[..., Scripted]) -> None:
    """A refused connection is an app that is not running (`agentctl` says how to start it): no wait first."""
    app = scripted(httpx.ConnectError("connection refused"))
    with pytest.raises(httpx.ConnectError):
        app.client.runs()
    assert app.slept == []


def test_the_policy_never_resends_a_success() -> None:
    for status in (200, 201, 202, 204, 302):
        assert retries.wait_before_retry(status, httpx.Headers({"Retry-After": "1"}), 1) is None


def sse(*events: tuple[str, dict[str, Any]]) -> httpx.Response:
    body = "".join(f"event: {name}\ndata: {json.dumps(data)}\nid: {i}\n\n" for i, (name, data) in enumerate(events))
    return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})


def test_a_stream_the_app_could_not_open_for_now_is_opened_again(scripted: Callable[..., Scripted]) -> None:
    done = {"run_id": "r1", "status": "completed"}
    app = scripted(problem(503, "store_unavailable", "1"), sse(("done", done)))
    assert [type(e).__name__ for e in follow(app.client, {"run_id": "r1"})] == ["Done"]
    assert app.slept == [1.0] and [r.url.path for r in app.requests] == ["/api/runs/r1/stream"] * 2


def test_a_stream_refused_for_too_many_viewers_is_followed_by_polls(scripted: Callable[..., Scripted]) -> None:
    """The app says: poll the run instead. So the client does, at once."""
    done = {"run_id": "r1", "status": "completed", "updates": []}
    app = scripted(problem(429, "too_many_stream_viewers"), httpx.Response(200, json=done))
    events = list(follow(app.client, {"run_id": "r1", "status": "in_progress"}))
    assert [(type(e).__name__, getattr(e, "status", None)) for e in events] == [
        ("Status", "in_progress"), ("Status", "completed"), ("Done", None)
    ]
    assert app.slept == [] and [r.url.path for r in app.requests] == ["/api/runs/r1/stream", "/api/runs/r1"]
