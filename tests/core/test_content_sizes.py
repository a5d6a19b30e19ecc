"""What one stored message holds of a tool's result or a model's answer (`agent_runtime.content_sizes`), and the
in-process runner meeting an oversized answer as the durable run does (`tests/e2e/test_e2e_oversized.py`)."""

from __future__ import annotations

from agent_runtime.agents import AgentDefinition
from agent_runtime.content_sizes import (
    MAX_CONTENT_BYTES,
    fit_result,
    json_bytes,
    oversized_answer,
    streamed_chars,
)
from agent_runtime.messages import FunctionCallContent, Message, TextContent
from agent_runtime.runner import AgentRunner
from scripted_model import Reply, Script


def answer(*contents: object) -> list[Message]:
    return [Message(role="assistant", contents=list(contents))]


def test_a_result_within_the_limit_is_kept_as_it_is_and_one_past_it_is_cut_json_text() -> None:
    small = {"rows": [1, 2, 3], "text": "é" * 1000}
    assert fit_result(small) is small and fit_result("short") == "short"
    large = {"rows": list(range(10)), "text": "x" * (2 * MAX_CONTENT_BYTES)}
    cut = fit_result(large)
    assert isinstance(cut, str) and cut.startswith('{"rows": [0, 1, 2')
    assert json_bytes(cut) <= MAX_CONTENT_BYTES and cut.endswith(f"kept to {MAX_CONTENT_BYTES} bytes]")
    text = fit_result("\x01" * MAX_CONTENT_BYTES)  # six bytes of JSON each
    assert json_bytes(text) <= MAX_CONTENT_BYTES and "more characters omitted" in text


def test_an_answer_is_measured_as_stored_escapes_and_multibyte_characters_included() -> None:
    assert oversized_answer(answer(TextContent(text="a" * (MAX_CONTENT_BYTES - 100)))) is None
    assert oversized_answer(answer(TextContent(text="a" * MAX_CONTENT_BYTES))) is not None  # with its JSON around
    fits = MAX_CONTENT_BYTES // 6 - 100
    assert oversized_answer(answer(TextContent(text="\x01" * fits))) is None
    over = oversized_answer(answer(TextContent(text="\x01" * (MAX_CONTENT_BYTES // 6 + 100))))
    assert over is not None and over > MAX_CONTENT_BYTES
    emoji = oversized_answer(answer(TextContent(text="😀" * (MAX_CONTENT_BYTES // 4 + 10))))  # 4 bytes each
    assert emoji is not None
    call = FunctionCallContent(call_id="c", name="f", arguments={"key": "k" * (MAX_CONTENT_BYTES + 1)})
    assert oversized_answer(answer(TextContent(text="calling"), call)) is not None
    # Thousands of calls with small arguments: their names, ids and JSON keys are what is large.
    many = [FunctionCallContent(call_id=f"call_{i:06d}", name="n" * 40, arguments={}) for i in range(15_000)]
    size = oversized_answer(answer(*many))
    assert size is not None and size == json_bytes([c.model_dump(mode="json", exclude_none=True) for c in many])
    assert oversized_answer(answer(*many[:1000])) is None


def test_a_streamed_chunk_counts_its_text_and_argument_deltas() -> None:
    chunk = [TextContent(text="abc"), FunctionCallContent(call_id="c", name="f", arguments='{"k": "v"}')]
    assert streamed_chars(chunk) == 3 + len("c") + len("f") + len('{"k": "v"}')
    assert streamed_chars([]) == 0


async def test_the_in_process_runner_fails_an_oversized_answer_without_asking_again(scripted_model, model_client):
    scripted_model.set_script(Script.of(Reply.call("f", {"key": "k" * 2_000_000}), "never asked"))
    result = await AgentRunner(AgentDefinition(name="a", instructions="x"), model_client).run("go")
    assert result.status == "failed" and "the model's answer is 2,000,0" in result.reason, result.reason
    assert f"holds at most {MAX_CONTENT_BYTES:,} bytes" in result.reason
    assert len(scripted_model.log.requests) == 1 and [m.role for m in result.messages] == ["user"]
