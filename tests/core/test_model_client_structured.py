"""Structured output (`response_format` json_schema) from a pydantic model or a caller-owned JSON schema."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from pydantic import BaseModel

from agent_runtime.messages import Message
from agent_runtime.models import ChatOptions, ChatRequest, ResponseFormat, assemble_response
from scripted_model import Reply, Script


class Address(BaseModel):
    city: str
    country: str


class Person(BaseModel):
    name: str
    age: int
    role: Literal["engineer", "manager"]
    address: Address
    nickname: str | None = None


def ask(response_format) -> ChatRequest:
    return ChatRequest(
        messages=[Message.user("John Smith, 35, engineer in Oslo")],
        options=ChatOptions(response_format=response_format),
    )


async def test_pydantic_model_is_sent_as_a_strict_schema_and_parsed_back(scripted_model, model_client):
    person = {"name": "John", "age": 35, "role": "engineer", "address": {"city": "Oslo", "country": "NO"}}
    scripted_model.set_script(Script.of(Reply(json_output={**person, "nickname": None})))
    response = await model_client.get_response(ask(Person))
    sent = scripted_model.log.last.body["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["name"] == "Person" and sent["json_schema"]["strict"] is True
    schema = sent["json_schema"]["schema"]
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"name", "age", "role", "address", "nickname"}  # strict: all required
    assert schema["$defs"]["Address"]["additionalProperties"] is False
    assert response.parse_value(Person) == Person.model_validate(person)


async def test_unscripted_answer_to_a_schema_still_validates(scripted_model, model_client):
    scripted_model.set_script(Script(default=Reply()))
    response = await model_client.get_response(ask(Person))
    assert isinstance(response.parse_value(Person), Person)
    streamed = assemble_response([u async for u in model_client.get_streaming_response(ask(Person))])
    assert isinstance(streamed.parse_value(Person), Person)


async def test_a_callers_json_schema_is_passed_through_unchanged(scripted_model, model_client):
    schema = {
        "title": "Movie",
        "type": "object",
        "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
        "required": ["title"],
    }
    scripted_model.set_script(Script.of(Reply(json_output={"title": "Heat", "year": 1995})))
    response = await model_client.get_response(ask(schema))
    sent = scripted_model.log.last.body["response_format"]["json_schema"]
    assert sent == {"name": "Movie", "schema": schema, "strict": False}
    assert json.loads(response.text) == {"title": "Heat", "year": 1995}


def test_json_object_mode_and_schema_validation():
    assert ChatOptions(response_format=ResponseFormat.json_object()).response_format.type == "json_object"
    with pytest.raises(ValueError, match="type 'object'"):
        ResponseFormat.from_json_schema({"type": "array", "items": {"type": "string"}})
    assert ResponseFormat.from_model(Person, name="person info").name == "person_info"


def test_response_format_accepts_every_common_spelling():
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    wire = {"type": "json_schema", "json_schema": {"name": "X", "schema": schema, "strict": True}}
    expected = ResponseFormat(name="X", json_schema=schema, strict=True)
    assert ChatOptions(response_format=wire).response_format == expected
    assert ChatOptions(response_format=expected.model_dump()).response_format == expected
    assert ChatOptions(response_format={**schema, "title": "X"}).response_format.json_schema["title"] == "X"
    assert ChatOptions(response_format={"type": "json_object"}).response_format.type == "json_object"
