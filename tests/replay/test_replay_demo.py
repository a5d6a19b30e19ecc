"""A real demo run, saved as a transcript (`cases/demo_email.json`, made by `record_demo_case.py`), replayed as a
regression test: green as shipped, red with a readable diff when the agent's instructions or tools change."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_runtime.tools import tool
from agent_testing import TranscriptMismatch, load_transcript, replay
from served_agents.assistant import assistant

CASE = Path(__file__).resolve().parent / "cases" / "demo_email.json"


def test_the_demo_email_run_replays_green_with_recorded_tools() -> None:
    replayed = replay(CASE, assistant)
    assert replayed.result.status == "completed"
    assert replayed.result.text == load_transcript(CASE).output["text"]
    assert len(replayed.requests) == 2


def test_the_demo_email_run_replays_green_with_the_real_tools() -> None:
    replayed = replay(CASE, assistant, tools="real")  # send_email runs (into the replay's own effect ledger)
    assert replayed.result.status == "completed"


def test_changed_instructions_fail_with_a_diff_that_shows_them() -> None:
    changed = assistant.model_copy(update={"instructions": "You are a terse assistant. Never send emails."})
    with pytest.raises(TranscriptMismatch) as mismatch:
        replay(CASE, changed)
    diff = str(mismatch.value)
    assert "--- recorded run" in diff and "+++ this replay" in diff
    lines = diff.splitlines()
    assert any(line.startswith("-") and '"content": "You are a helpful assistant.' in line for line in lines)
    assert any(line.startswith("+") and '"content": "You are a terse assistant. Never send emails."' in line
               for line in lines)


def test_a_changed_tool_fails_with_a_diff_that_names_it() -> None:
    @tool(approval="always")
    async def send_email(to: str, subject: str) -> dict:  # the body parameter is gone
        """Send an email."""
        return {"status": "sent"}

    changed = assistant.model_copy(update={"tools": [assistant.tools[0], send_email]})
    with pytest.raises(TranscriptMismatch) as mismatch:
        replay(CASE, changed)
    assert "body" in str(mismatch.value)  # the schema lost it; the recorded call's body is now refused


def test_a_call_the_recording_does_not_have_is_a_mismatch_in_recorded_mode() -> None:
    transcript = load_transcript(CASE).model_copy(deep=True)
    transcript.tool_calls.clear()  # nothing recorded to answer send_email with
    replayed_or_error = None
    try:
        replayed_or_error = replay(transcript, assistant)
    except TranscriptMismatch as error:
        replayed_or_error = error
    # The stand-in raises inside the tool: the run goes on with an error result, so the next request differs.
    assert isinstance(replayed_or_error, TranscriptMismatch)
