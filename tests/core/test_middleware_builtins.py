"""Built-in middleware: retry honouring Retry-After, history truncation, guardrails, audit records, usage accounting.

The innermost operation here is a small scripted function standing in for the model call, so that each layer's rule
can be pinned exactly; the same layers run around the real openai client in test_steps.py / test_runner.py.
"""

from collections.abc import Callable

import pytest

from agent_runtime.messages import ChatResponse, FunctionCallContent, FunctionResultContent, Message, Usage
from agent_runtime.middleware import (
    AuditLogMiddleware,
    ChatContext,
    GuardrailMiddleware,
    HistoryTruncationMiddleware,
    MiddlewarePipeline,
    RetryMiddleware,
    UsageAccountingMiddleware,
    UsageBudgetExceeded,
    truncate_history,
)
from agent_runtime.models.errors import ModelError
from agent_runtime.models.retry import RetryPolicy
from agent_runtime.models.types import ChatOptions


def chat_context(*messages: Message, run_id: str = "run-1") -> ChatContext:
    return ChatContext(messages=list(messages), options=ChatOptions(model="m"), tools=[], run_id=run_id, agent_name="a")


def model_answering(text: str, *, failures: list[Exception] | None = None, usage: Usage | None = None):
    pending = list(failures or [])
    seen: list[list[Message]] = []

    async def operation(context: ChatContext) -> None:
        seen.append(list(context.messages))
        if pending:
            raise pending.pop(0)
        context.result = ChatResponse(message=Message.assistant(text), usage=usage)

    operation.seen = seen  # type: ignore[attr-defined]
    return operation


class FakeSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


async def test_retry_waits_the_servers_retry_after_then_succeeds() -> None:
    sleep = FakeSleep()
    throttled = ModelError("rate limited", status=429, retryable=True, retry_after=7.0)
    operation = model_answering("ok", failures=[throttled])
    context = await MiddlewarePipeline([RetryMiddleware(sleep=sleep)]).execute(
        chat_context(Message.user("hi")), operation
    )
    assert context.result.text == "ok"
    assert sleep.delays == [7.0]
    assert context.metadata["retries"] == [{"attempt": 1, "delay": 7.0, "status": 429, "code": None}]


async def test_retry_backs_off_exponentially_and_gives_up_after_max_attempts() -> None:
    sleep = FakeSleep()
    errors: list[Exception] = [ModelError("boom", status=500, retryable=True) for _ in range(3)]
    policy = RetryPolicy(max_attempts=3, initial_delay=1.0, multiplier=2.0, jitter=0.0)
    with pytest.raises(ModelError, match="boom"):
        await MiddlewarePipeline([RetryMiddleware(policy, sleep=sleep)]).execute(
            chat_context(Message.user("hi")), model_answering("never", failures=errors)
        )
    assert sleep.delays == [1.0, 2.0]


@pytest.mark.parametrize(
    "error",
    [
        ModelError("bad request", status=400, retryable=False),
        ModelError("come back tomorrow", status=429, retryable=True, retry_after=86400.0),
        RuntimeError("a bug, not a transient failure"),
    ],
)
async def test_retry_fails_fast_on_non_retryable_errors_and_overlong_retry_after(error: Exception) -> None:
    sleep = FakeSleep()
    operation = model_answering("never", failures=[error])
    with pytest.raises(type(error)):
        await MiddlewarePipeline([RetryMiddleware(sleep=sleep)]).execute(chat_context(Message.user("hi")), operation)
    assert sleep.delays == []
    assert len(operation.seen) == 1


def conversation() -> list[Message]:
    call = FunctionCallContent(call_id="c1", name="lookup", arguments={"q": "x"})
    return [
        Message.system("be brief"),
        Message.user("first question"),
        Message(role="assistant", contents=[call]),
        Message.tool_result(FunctionResultContent(call_id="c1", result="x" * 400)),
        Message.assistant("first answer"),
        Message.user("second question"),
    ]


def test_truncation_keeps_system_and_newest_and_never_orphans_tool_results() -> None:
    messages = conversation()
    kept = truncate_history(messages, max_messages=3)
    # the 3 newest would start with the tool result, whose call was cut: it goes too
    assert [m.role for m in kept] == ["system", "assistant", "user"]
    assert kept[0].text == "be brief"
    assert truncate_history(messages, max_messages=10) == messages


def test_truncation_to_a_token_budget() -> None:
    messages = conversation()
    one_token_per_char: Callable[[Message], int] = lambda m: len(m.text) or 100  # noqa: E731
    kept = truncate_history(messages, max_tokens=40, count_tokens=one_token_per_char)
    # system (8) + "second question" (15) + "first answer" (12) = 35; the tool result (100) does not fit
    assert [m.text for m in kept] == ["be brief", "first answer", "second question"]
    # the newest message is kept even when it alone is over budget
    assert [m.text for m in truncate_history(messages, max_tokens=1, count_tokens=one_token_per_char)] == [
        "be brief",
        "second question",
    ]


async def test_truncation_middleware_changes_what_is_sent_only() -> None:
    messages = conversation()
    operation = model_answering("ok")
    context = await MiddlewarePipeline([HistoryTruncationMiddleware(max_messages=1)]).execute(
        chat_context(*messages), operation
    )
    assert [m.text for m in operation.seen[0]] == ["be brief", "second question"]
    assert context.metadata["truncated_messages"] == 4
    assert len(messages) == 6


async def test_guardrail_blocks_input_without_calling_the_model_or_post_processing() -> None:
    after: list[str] = []

    async def outer(context: ChatContext, call_next) -> None:
        await call_next()
        after.append("post-processed")

    operation = model_answering("secret plans")
    guard = GuardrailMiddleware([r"(?i)\bpassword\b"], action="block")
    context = await MiddlewarePipeline([outer, guard]).execute(
        chat_context(Message.user("what is the PASSWORD?")), operation
    )
    assert operation.seen == []
    assert context.terminated is True
    assert context.result.text == "I can't help with that request."
    assert context.result.finish_reason == "content_filter"
    assert after == []


async def test_guardrail_redacts_input_and_output() -> None:
    operation = model_answering("call me at 555-1234")
    guard = GuardrailMiddleware([r"\d{3}-\d{4}"], action="redact")
    context = await MiddlewarePipeline([guard]).execute(chat_context(Message.user("my number is 555-9876")), operation)
    assert operation.seen[0][0].text == "my number is [REDACTED]"
    assert context.result.text == "call me at [REDACTED]"


async def test_guardrail_blocks_output() -> None:
    guard = GuardrailMiddleware(["forbidden"], action="block", apply_to=["output"])
    context = await MiddlewarePipeline([guard]).execute(
        chat_context(Message.user("forbidden?")), model_answering("forbidden!")
    )
    assert context.result.text == "I can't help with that request."
    assert context.metadata["guardrail"] == {"action": "blocked", "where": "output"}


async def test_audit_records_each_call_once_around_retries() -> None:
    records: list[dict] = []
    ticks = iter([10.0, 10.25])
    audit = AuditLogMiddleware(records.append, clock=lambda: next(ticks))
    operation = model_answering(
        "ok",
        failures=[ModelError("busy", status=503, retryable=True, retry_after=0.0)],
        usage=Usage(input_tokens=3, output_tokens=4, total_tokens=7),
    )
    await MiddlewarePipeline([audit, RetryMiddleware(sleep=FakeSleep())]).execute(
        chat_context(Message.user("hi")), operation
    )
    assert records == [
        {
            "event": "model_call",
            "run_id": "run-1",
            "agent": "a",
            "iteration": 0,
            "model": "m",
            "messages": 1,
            "outcome": "ok",
            "duration_ms": 250.0,
            "usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
        }
    ]


async def test_audit_records_errors() -> None:
    records: list[dict] = []
    with pytest.raises(ModelError):
        await MiddlewarePipeline([AuditLogMiddleware(records.append)]).execute(
            chat_context(Message.user("hi")), model_answering("x", failures=[ModelError("no", status=401)])
        )
    assert (records[0]["outcome"], records[0]["error"]) == ("error", "ModelError")


async def test_usage_accounting_sums_per_run_and_enforces_a_budget() -> None:
    accounting = UsageAccountingMiddleware(max_total_tokens=15)
    pipeline = MiddlewarePipeline([accounting])
    operation = model_answering("ok", usage=Usage(input_tokens=6, output_tokens=2, total_tokens=8))
    await pipeline.execute(chat_context(Message.user("1")), operation)
    context = await pipeline.execute(chat_context(Message.user("2")), operation)
    assert context.metadata["usage_total"] == Usage(input_tokens=12, output_tokens=4, total_tokens=16)
    assert accounting.ledger.calls("run-1") == 2
    with pytest.raises(UsageBudgetExceeded, match="token budget of 15 used up"):
        await pipeline.execute(chat_context(Message.user("3")), operation)
    await pipeline.execute(chat_context(Message.user("other run"), run_id="run-2"), operation)
    assert accounting.ledger.total("run-2").total_tokens == 8


async def test_guardrail_judges_only_the_newest_input_so_a_session_can_go_on() -> None:
    guard = GuardrailMiddleware([r"(?i)password"], action="block")
    history = [Message.user("what is the password?"), Message.assistant("I can't help with that request.")]
    operation = model_answering("Sure, here is a poem.")
    context = await MiddlewarePipeline([guard]).execute(chat_context(*history, Message.user("a poem then")), operation)
    assert (context.terminated, context.result.text) == (False, "Sure, here is a poem.")
