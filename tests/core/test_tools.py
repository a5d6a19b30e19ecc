"""Tool schemas from signatures, argument validation that the model can read, approval policies, context, timeouts."""

import asyncio
import threading
from enum import StrEnum
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from agent_runtime.tools import Tool, ToolArgumentsError, ToolContext, ToolTimeoutError, as_tool, tool


class Unit(StrEnum):
    celsius = "celsius"
    fahrenheit = "fahrenheit"


class Address(BaseModel):
    street: str
    city: str = Field(description="city name")


@tool
def get_weather(city: Annotated[str, "the city to look up"], unit: Unit = Unit.celsius, days: int = 1) -> str:
    """Get the weather forecast.

    Longer explanation that is not part of the description.

    Args:
        days: how many days
            to forecast
    """
    return f"{city}:{unit.value}:{days}"


def test_schema_has_types_defaults_enums_and_descriptions() -> None:
    schema = get_weather.parameters
    assert get_weather.name == "get_weather"
    assert get_weather.description == "Get the weather forecast."
    assert schema["type"] == "object"
    assert schema["required"] == ["city"]
    assert schema["properties"]["city"] == {"type": "string", "description": "the city to look up"}
    assert schema["properties"]["days"] == {"type": "integer", "default": 1, "description": "how many days to forecast"}
    unit = schema["properties"]["unit"]
    assert unit["default"] == "celsius"
    assert schema["$defs"]["Unit"]["enum"] == ["celsius", "fahrenheit"]
    assert schema["additionalProperties"] is False
    assert "title" not in schema and "title" not in schema["properties"]["city"]


def test_schema_for_optional_literal_nested_model_and_field_annotation() -> None:
    @tool(name="ship", description="Ship a parcel")
    def ship(
        to: Address,
        speed: Literal["slow", "fast"] = "slow",
        note: str | None = None,
        weight: Annotated[float, Field(gt=0, description="kilograms")] = 1.0,
    ) -> dict:
        return {"to": to.city, "speed": speed, "note": note, "weight": weight}

    schema = ship.parameters
    assert ship.description == "Ship a parcel"
    assert schema["required"] == ["to"]
    assert schema["properties"]["speed"] == {"enum": ["slow", "fast"], "type": "string", "default": "slow"}
    assert schema["properties"]["note"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert schema["properties"]["weight"] == {
        "type": "number",
        "exclusiveMinimum": 0,
        "description": "kilograms",
        "default": 1.0,
    }
    assert schema["properties"]["to"] == {"$ref": "#/$defs/Address"}
    assert schema["$defs"]["Address"]["properties"]["city"]["description"] == "city name"
    args = ship.validate_arguments('{"to": {"street": "Main", "city": "Oslo"}, "speed": "fast"}')
    assert asyncio.run(ship.invoke(args)) == {"to": "Oslo", "speed": "fast", "note": None, "weight": 1.0}


def test_validation_errors_are_readable_for_the_model() -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        get_weather.validate_arguments({"unit": "kelvin", "days": "many"})
    message = str(caught.value)
    assert message.startswith("Invalid arguments for tool 'get_weather': ")
    assert "city: Field required" in message
    assert "unit: Input should be 'celsius' or 'fahrenheit'" in message
    assert "days: Input should be a valid integer" in message


def test_malformed_json_and_unknown_arguments_are_rejected() -> None:
    with pytest.raises(ToolArgumentsError, match="Invalid JSON"):
        get_weather.validate_arguments('{"city": ')
    with pytest.raises(ToolArgumentsError, match="country: Extra inputs are not permitted"):
        get_weather.validate_arguments({"city": "Oslo", "country": "NO"})


async def test_sync_tool_runs_off_the_event_loop_and_async_tool_is_awaited() -> None:
    loop_thread = threading.get_ident()

    @tool
    def where() -> bool:
        return threading.get_ident() != loop_thread

    @tool
    async def add(a: int, b: int = 2) -> int:
        await asyncio.sleep(0)
        return a + b

    assert await where.invoke(where.validate_arguments({})) is True
    assert await add.invoke(add.validate_arguments({"a": 1})) == 3
    assert await add(1, 5) == 6  # a decorated function stays callable


async def test_context_parameter_receives_idempotency_key_and_is_not_in_schema() -> None:
    @tool
    async def charge(amount: int, ctx: ToolContext) -> str:
        return f"{ctx.idempotency_key}:{amount}"

    assert list(charge.parameters["properties"]) == ["amount"]
    context = ToolContext(idempotency_key="run-1:call-1", call_id="call-1", tool_name="charge")
    assert await charge.invoke(charge.validate_arguments({"amount": 5}), context) == "run-1:call-1:5"
    with pytest.raises(ValueError, match="needs a ToolContext"):
        await charge.invoke(charge.validate_arguments({"amount": 5}))


async def test_timeout_raises_a_clear_error() -> None:
    never = asyncio.Event()

    @tool(timeout=0.05)
    async def hang() -> None:
        await never.wait()

    with pytest.raises(ToolTimeoutError, match=r"'hang' did not finish within 0\.05 s"):
        await hang.invoke(hang.validate_arguments({}))


def test_approval_policies() -> None:
    @tool(approval=lambda args: args.amount > 100)
    def pay(amount: int) -> None: ...

    @tool(approval="always")
    def delete() -> None: ...

    @tool
    def read() -> None: ...

    assert pay.needs_approval(pay.validate_arguments({"amount": 500})) is True
    assert pay.needs_approval(pay.validate_arguments({"amount": 5}), default="always") is False
    assert delete.needs_approval(delete.validate_arguments({})) is True
    assert read.needs_approval(read.validate_arguments({})) is False
    assert read.needs_approval(read.validate_arguments({}), default="always") is True


def test_invalid_definitions_fail_early() -> None:
    with pytest.raises(ValueError, match="approval must be"):
        Tool(lambda: None, name="x", approval="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout must be positive"):
        Tool(lambda: None, name="x", timeout=0)
    with pytest.raises(ValueError, match="must be 1-64 letters"):
        Tool(lambda: None, name="has space")
    with pytest.raises(ValueError, match=r"\*args/\*\*kwargs"):
        Tool(lambda **kw: None, name="x")
    assert as_tool(get_weather) is get_weather


async def test_callable_objects_with_async_call_are_awaited() -> None:
    class Lookup:
        """Look a key up."""

        async def __call__(self, key: str) -> str:
            return key.upper()

    lookup = Tool(Lookup())
    assert (lookup.name, lookup.description) == ("Lookup", "Look a key up.")
    assert await lookup.invoke(lookup.validate_arguments({"key": "k"})) == "K"
