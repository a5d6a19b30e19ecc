"""Agent definitions are checked when built; the registry loads a package of agent modules and fails clearly."""

import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from agent_runtime.agents import AgentDefinition, AgentDefinitionError, AgentRegistry, UnknownAgentError
from agent_runtime.loop_types import LoopConfig, RequiredFunction
from agent_runtime.models.types import NamedToolChoice
from agent_runtime.tools import tool


@tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


class Forecast(BaseModel):
    city: str
    summary: str


def test_definition_derives_loop_config_options_and_specs() -> None:
    agent = AgentDefinition(
        name="assistant",
        instructions="be helpful",
        model="gpt-x",
        tools=[get_weather, lambda_free_tool],
        temperature=0.2,
        max_tokens=100,
        tool_choice=RequiredFunction(required_function_name="get_weather"),
        max_iterations=5,
        output_type=Forecast,
    )
    assert agent.loop_config() == LoopConfig(
        max_iterations=5, tool_choice=RequiredFunction(required_function_name="get_weather")
    )
    options = agent.chat_options()
    assert options.tool_choice == NamedToolChoice(name="get_weather")
    assert (options.model, options.temperature, options.max_tokens) == ("gpt-x", 0.2, 100)
    assert options.response_format.name == "Forecast"
    assert agent.chat_options(tool_choice="none").tool_choice == "none"
    assert [s.name for s in agent.tool_specs()] == ["get_weather", "lambda_free_tool"]
    assert agent.tool("lambda_free_tool").description == "A plain function becomes a tool."
    assert agent.parse_output('{"city": "Oslo", "summary": "rain"}') == Forecast(city="Oslo", summary="rain")


def lambda_free_tool(x: int) -> int:
    """A plain function becomes a tool."""
    return x


def test_agent_without_tools_sends_no_tool_choice() -> None:
    assert AgentDefinition(name="plain").chat_options().tool_choice is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "has space"}, "String should match pattern"),
        ({"name": "a", "tools": [get_weather, get_weather]}, "duplicate tool names: get_weather"),
        (
            {"name": "a", "tool_choice": RequiredFunction(required_function_name="nope"), "tools": [get_weather]},
            "'nope'",
        ),
        ({"name": "a", "tool_choice": "required"}, "agent has no tools"),
        ({"name": "a", "max_iterations": 0}, "greater than or equal to 1"),
        ({"name": "a", "approval": "sometimes"}, "Input should be 'never' or 'always'"),
        ({"name": "a", "output_type": {"type": "array"}}, "type 'object' at its root"),
        ({"name": "a", "chat_middleware": [object()]}, "is not a middleware"),
        ({"name": "a", "temperature": 5}, "less than or equal to 2"),
    ],
)
def test_invalid_definitions_fail_with_a_clear_message(fields: dict, message: str) -> None:
    with pytest.raises((ValidationError, TypeError)) as caught:
        AgentDefinition(**fields)
    assert message in str(caught.value)


@pytest.fixture
def agent_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Writes a throwaway agents package under a unique name and makes it importable."""
    created: list[str] = []

    def make(name: str, modules: dict[str, str]) -> str:
        root = tmp_path / name
        root.mkdir()
        (root / "__init__.py").write_text(modules.pop("__init__", ""))
        for module, source in modules.items():
            (root / f"{module}.py").write_text(textwrap.dedent(source))
        created.append(name)
        return name

    monkeypatch.syspath_prepend(str(tmp_path))
    yield make
    for name in created:
        for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
            del sys.modules[module]


GOOD = """
from agent_runtime.agents import AgentDefinition
from agent_runtime.tools import tool

@tool
def echo(text: str) -> str:
    return text

agent = AgentDefinition(name="{name}", instructions="echo things", tools=[echo])
"""


def test_registry_loads_every_agent_module(agent_package) -> None:
    package = agent_package(
        "agents_ok",
        {"one": GOOD.format(name="one"), "two": GOOD.format(name="two"), "__init__": "from .one import agent"},
    )
    registry = AgentRegistry.from_package(package)
    assert registry.names() == ["one", "two"]
    assert registry.get("one").tool("echo") is not None
    with pytest.raises(UnknownAgentError, match="no agent named 'three' \\(known: one, two\\)"):
        registry.get("three")


@pytest.mark.parametrize(
    ("modules", "message"),
    [
        ({"bad": GOOD.format(name="bad agent")}, "invalid agent module 'agents_bad.bad': name: String should match"),
        ({"broken": "import not_a_module_anywhere"}, "invalid agent module 'agents_bad.broken': ModuleNotFoundError"),
        (
            {"a": GOOD.format(name="same"), "b": GOOD.format(name="same")},
            "agent 'same' is defined twice (in agents_bad.b)",
        ),
        ({"empty": "x = 1"}, "defines no AgentDefinition"),
    ],
)
def test_registry_fails_at_start_up_with_a_clear_message(agent_package, modules: dict, message: str) -> None:
    package = agent_package("agents_bad", modules)
    with pytest.raises(AgentDefinitionError) as caught:
        AgentRegistry.from_package(package)
    assert message in str(caught.value)


def test_a_missing_package_names_the_setting_to_fix(agent_package) -> None:
    with pytest.raises(AgentDefinitionError) as caught:
        AgentRegistry.from_package("no_such_agents")
    assert str(caught.value) == (
        "cannot load agent package 'no_such_agents': ModuleNotFoundError: No module named 'no_such_agents': "
        "set AGENTS_PACKAGE to an importable package (default served_agents)"
    )
    # A package that exists but imports a missing module: its import is at fault, not the setting.
    package = agent_package("agents_importing", {"__init__": "import not_a_module_anywhere"})
    with pytest.raises(AgentDefinitionError) as caught:
        AgentRegistry.from_package(package)
    assert "not_a_module_anywhere" in str(caught.value) and "AGENTS_PACKAGE" not in str(caught.value)


async def _chat_layer(context, call_next) -> None:
    await call_next(context)


def test_tools_offered_to_chat_middleware_are_copies_and_without_it_the_definitions_own() -> None:
    """Chat middleware may change the tools of one call: it gets copies, so the next call is offered the originals.
    Without chat middleware nothing changes them (model clients only read), so no copy is made per call."""
    with_layer = AgentDefinition(name="edited", tools=[get_weather], chat_middleware=[_chat_layer])
    offered = with_layer.offered_tools()
    offered[0].description = "changed for one call"
    offered[0].parameters["properties"]["city"]["description"] = "changed too"
    again = with_layer.offered_tools()[0]
    assert again.description == "Weather for a city." and "description" not in again.parameters["properties"]["city"]

    plain = AgentDefinition(name="plain", tools=[get_weather])
    assert plain.offered_tools()[0] is plain.offered_tools()[0]
    assert plain.offered_tools() == with_layer.offered_tools()
