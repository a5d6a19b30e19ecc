"""The in-memory ConversationLog: upsert by message id keeps order and never duplicates; stored copies are isolated."""

import pytest

from agent_runtime.conversation import (
    ConversationLog,
    InMemoryConversationLog,
    approval_id,
    idempotency_key,
    model_message_id,
    model_message_prefix,
    result_message_id,
)
from agent_runtime.messages import Message


async def test_upsert_replaces_in_place_and_keeps_first_append_order() -> None:
    log = InMemoryConversationLog()
    assert isinstance(log, ConversationLog)
    await log.append(Message.user("one", message_id="a"))
    await log.append(Message.assistant("two", message_id="b"))
    await log.append(Message.user("one, edited", message_id="a"))
    assert [(m.message_id, m.text) for m in await log.messages()] == [("a", "one, edited"), ("b", "two")]


async def test_stored_messages_are_copies() -> None:
    original = Message.user("hi", message_id="a")
    log = InMemoryConversationLog([original])
    original.contents.clear()
    read = await log.messages()
    read[0].contents.clear()
    assert (await log.messages())[0].text == "hi"


async def test_messages_need_an_id() -> None:
    with pytest.raises(ValueError, match="need a message_id"):
        await InMemoryConversationLog().append(Message.user("no id"))


def test_ids_are_deterministic_and_scoped_to_the_run() -> None:
    assert model_message_id("r1", 3, 1) == "r1:model:3:1"
    assert model_message_id("r1", 3).startswith(model_message_prefix("r1", 3))
    assert not model_message_id("r1", 13).startswith(model_message_prefix("r1", 1))
    assert result_message_id("r1", "c9") == "r1:result:c9"
    assert approval_id("r1", "c9") == idempotency_key("r1", "c9") == "r1:c9"
