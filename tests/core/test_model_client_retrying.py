"""RetryingModelClient: our retry policy around a real openai-SDK client and the scripted server."""

from __future__ import annotations

import pytest

from agent_runtime.messages import ChatResponse, Message
from agent_runtime.models import OpenAIChatClient
from agent_runtime.models.errors import ModelError
from agent_runtime.models.retry import RetryPolicy
from agent_runtime.models.retrying import RetryingModelClient
from agent_runtime.models.types import ChatRequest
from scripted_model import Fault, Reply, Script, ScriptedModelServer


class RecordingSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def request() -> ChatRequest:
    return ChatRequest(messages=[Message.user("hello")])


async def test_a_throttled_stream_is_retried_before_its_first_update_honouring_retry_after(
    scripted_model: ScriptedModelServer, model_client: OpenAIChatClient
) -> None:
    scripted_model.set_script(Script.of("streamed answer"))
    scripted_model.fail_next(Fault.rate_limited(retry_after=3), times=2)
    sleep = RecordingSleep()
    client = RetryingModelClient(model_client, RetryPolicy(max_attempts=4), sleep=sleep)

    updates = [update async for update in client.get_streaming_response(request())]

    assert ChatResponse.from_updates(updates).text == "streamed answer"
    assert sleep.delays == [3, 3]  # the server's Retry-After, exactly
    assert [r.status for r in scripted_model.log.requests] == [429, 429, 200]


async def test_a_stream_that_keeps_failing_gives_up_after_the_policy(
    scripted_model: ScriptedModelServer, model_client: OpenAIChatClient
) -> None:
    scripted_model.set_script(Script.of("never"))
    scripted_model.fail_next(Fault.server_error(503), times=5)
    client = RetryingModelClient(model_client, RetryPolicy(max_attempts=2), sleep=RecordingSleep())

    with pytest.raises(ModelError) as error:
        [update async for update in client.get_streaming_response(request())]

    assert error.value.status == 503 and error.value.retryable
    assert scripted_model.log.total == 2


async def test_a_plain_call_is_retried_too(scripted_model: ScriptedModelServer, model_client: OpenAIChatClient) -> None:
    scripted_model.set_script(Script.of(Reply.say("fine")))
    scripted_model.fail_next(Fault.server_error(500))
    client = RetryingModelClient(model_client, RetryPolicy(max_attempts=3, initial_delay=0.01), sleep=RecordingSleep())

    assert (await client.get_response(request())).text == "fine"
    assert scripted_model.log.total == 2
