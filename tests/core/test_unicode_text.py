"""`unicode_text`: what a model sends that is not text becomes text that every encoder takes."""

from __future__ import annotations

from agent_runtime.messages import ChatResponseUpdate, FunctionCallContent, TextContent
from agent_runtime.models.openai_wire import assemble_response
from agent_runtime.unicode_text import utf8, well_formed


def test_a_lone_surrogate_becomes_the_replacement_character_and_a_pair_its_character() -> None:
    assert well_formed("plain text ä €") == "plain text ä €"
    assert well_formed("a \ud800 b") == "a \ufffd b"
    assert well_formed("\ude00 late, \ud83d" + "\ude00 met") == "\ufffd late, \U0001f600 met"
    assert utf8("a \ud800") == "a \ufffd".encode()


def test_a_streamed_answer_is_assembled_into_text_the_store_can_keep() -> None:
    """A pair split across two deltas meets in the assembled text; a lone half, in the text or in a tool call's name
    or arguments, is U+FFFD (storing the answer failed otherwise, on every retry)."""
    updates = [
        ChatResponseUpdate(role="assistant", contents=[TextContent(text="smile \ud83d")]),
        ChatResponseUpdate(contents=[TextContent(text="\ude00 and \udfff")]),
        ChatResponseUpdate(
            contents=[FunctionCallContent(call_id="c1", name="look\ud800", arguments='{"q": "x\ud800"}')]
        ),
    ]
    [message] = assemble_response(updates).messages
    text, call = message.contents
    assert text.text == "smile \U0001f600 and \ufffd"
    assert call.name == "look\ufffd" and call.arguments == {"q": "x\ufffd"}
    message.model_dump_json()  # what the store does with it
