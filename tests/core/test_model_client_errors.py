"""Failures of model calls: classification into `ModelError`, our retry policy honouring `Retry-After` (end to end
through the real openai SDK and the scripted server), fast failure on caller errors, no secrets in messages."""

from __future__ import annotations

import pickle
import socket
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from agent_runtime.messages import Message, Usage
from agent_runtime.models import (
    ChatRequest,
    ModelError,
    OpenAIChatClient,
    RetryPolicy,
    call_with_retry,
    parse_retry_after,
)
from scripted_model import Fault, Reply, Script

REQUEST = ChatRequest(messages=[Message.user("hi")])


class RecordingSleep:
    """Stands in for asyncio.sleep so the test checks the waits the policy chose without spending them."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


async def failure(client: OpenAIChatClient, *, stream: bool = False) -> ModelError:
    with pytest.raises(ModelError) as info:
        if stream:
            [_ async for _ in client.get_streaming_response(REQUEST)]
        else:
            await client.get_response(REQUEST)
    return info.value


@pytest.mark.parametrize("stream", [False, True])
async def test_rate_limit_is_retryable_with_the_servers_retry_after(scripted_model, model_client, stream):
    scripted_model.set_script(Script.of(Reply.fail(Fault.rate_limited(retry_after=0.25))))
    error = await failure(model_client, stream=stream)
    assert (error.status, error.retryable, error.retry_after) == (429, True, 0.25)
    assert error.code == "rate_limit_exceeded"
    assert len(scripted_model.log) == 1  # the SDK did not retry behind our back


async def test_retry_policy_waits_retry_after_then_succeeds(scripted_model, model_client):
    scripted_model.set_script(Script.of("recovered"))
    scripted_model.fail_next(Fault.rate_limited(retry_after=0.05))
    scripted_model.fail_next(Fault.server_error(503))
    sleep = RecordingSleep()
    policy = RetryPolicy(initial_delay=0.01, jitter=0)
    response = await call_with_retry(lambda: model_client.get_response(REQUEST), policy, sleep=sleep)
    assert response.text == "recovered"
    assert sleep.delays == [0.05, 0.02]  # Retry-After exactly, then exponential backoff (0.01 * 2)
    assert [r.status for r in scripted_model.log.requests] == [429, 503, 200]


async def test_a_retry_after_longer_than_the_policy_allows_is_surfaced_not_slept(scripted_model, model_client):
    scripted_model.set_script(Script.of(Reply.fail(Fault.rate_limited(retry_after=600)), "never reached"))
    sleep = RecordingSleep()
    with pytest.raises(ModelError) as info:
        await call_with_retry(lambda: model_client.get_response(REQUEST), RetryPolicy(), sleep=sleep)
    assert info.value.retry_after == 600 and sleep.delays == []


async def test_bad_request_fails_fast_with_a_clear_message(scripted_model, model_client):
    scripted_model.set_script(Script.of(Reply.fail(Fault.bad_request("'temperature' must be <= 2")), "unused"))
    sleep = RecordingSleep()
    with pytest.raises(ModelError) as info:
        await call_with_retry(lambda: model_client.get_response(REQUEST), RetryPolicy(), sleep=sleep)
    error = info.value
    assert (error.status, error.retryable) == (400, False)
    assert "HTTP 400" in str(error) and "'temperature' must be <= 2" in str(error)
    assert sleep.delays == [] and len(scripted_model.log) == 1


@pytest.mark.parametrize(("status", "hint"), [(401, "API key"), (403, "role"), (404, "deployment name")])
async def test_auth_and_not_found_errors_say_what_to_check_without_leaking_the_key(scripted_model, status, hint):
    secret = "sk-proj-SuperSecretKey1234567890"
    client = OpenAIChatClient.openai(api_key=secret, model="m", base_url=scripted_model.base_url)
    scripted_model.fail_next(Fault(status=status, message=f"Incorrect API key provided: {secret}"))
    try:
        error = await failure(client)
    finally:
        await client.aclose()
    assert error.status == status and not error.retryable
    assert hint in str(error)
    assert secret not in str(error) and secret not in repr(error) and "SuperSecret" not in str(error)


@pytest.mark.parametrize("status", [408, 409, 500, 502, 503, 504])
async def test_transient_statuses_are_retryable(scripted_model, model_client, status):
    scripted_model.fail_next(Fault(status=status))
    error = await failure(model_client)
    assert error.status == status and error.retryable and error.retry_after is None


@pytest.mark.parametrize("stream", [False, True])
async def test_malformed_output_and_dropped_connections_are_retryable(scripted_model, model_client, stream):
    scripted_model.fail_next(Fault.malformed())
    malformed = await failure(model_client, stream=stream)
    assert (malformed.code, malformed.retryable, malformed.status) == ("malformed_response", True, None)
    scripted_model.fail_next(Fault.disconnect())
    dropped = await failure(model_client, stream=stream)
    assert (dropped.code, dropped.retryable) == ("connection_error", True)


async def test_unreachable_endpoint_is_a_retryable_connection_error():
    with socket.socket() as sock:  # a port that was free a moment ago and has no listener
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = OpenAIChatClient.compatible(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout=5)
    try:
        error = await failure(client)
    finally:
        await client.aclose()
    assert (error.code, error.retryable) == ("connection_error", True)


async def test_timeout_is_a_retryable_timeout(scripted_model):
    scripted_model.set_script(Script.of(Reply(text="too late", latency_ms=2000)))
    client = OpenAIChatClient.compatible(base_url=scripted_model.base_url, model="m", timeout=0.2)
    try:
        error = await failure(client)
    finally:
        await client.aclose()
    assert (error.code, error.retryable) == ("timeout", True)


def test_model_error_survives_pickling_and_json():
    error = ModelError("x returned HTTP 429", status=429, code="rate_limited", retryable=True, retry_after=1.5)
    copy = pickle.loads(pickle.dumps(error))
    assert copy.info() == error.info() and str(copy) == str(error)
    assert ModelError.from_info(error.info().model_dump(mode="json")).info() == error.info()


def test_the_usage_a_failed_call_was_billed_survives_pickling():
    """A worker hands the error on pickled: the usage it carries (counted against the run's budget) goes with it."""
    billed = Usage(input_tokens=100, output_tokens=10, total_tokens=110, cost=0.12)
    error = ModelError("the stream broke", status=500, code="server_error", retryable=True, usage=billed)
    assert pickle.loads(pickle.dumps(error)).usage == billed
    assert pickle.loads(pickle.dumps(ModelError("x", status=500))).usage is None


def test_retry_after_header_forms():
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "1"}) == 0.25
    in_ten = format_datetime(datetime.now(UTC) + timedelta(seconds=10), usegmt=True)
    assert 8 <= parse_retry_after({"retry-after": in_ten}) <= 10
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
