"""Workflow definitions are checked when they are built (and the registry against the served agents), so a bad
workflow fails at start-up naming the step; references and conditions resolve as documented."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from app_imports import forgetting_app_imports
from pydantic import BaseModel, ValidationError

from agent_runtime.agents import AgentRegistry
from workflow_runtime import (
    AgentStep,
    BranchStep,
    Condition,
    DelayStep,
    FunctionStep,
    MonitorStep,
    ParallelStep,
    WorkflowDefinition,
    WorkflowDefinitionError,
)
from workflow_runtime.program import compile_program
from workflow_runtime.references import UnresolvedReference, render, resolve
from workflow_runtime.registry import WorkflowRegistry, load_workflows, workflows_package


class Topic(BaseModel):
    topic: str


@pytest.fixture(autouse=True)
def shipped_packages_forgotten() -> Iterator[None]:
    """The shipped agents and workflows these tests import are forgotten after each: an in-process host started later
    in this process would find them imported and not import them again under its own settings
    (`served_agents.mcp_example` reads `MCP_EXAMPLE_URL` when it is imported)."""
    with forgetting_app_imports():
        yield


def _workflow(*steps: Any, **options: Any) -> WorkflowDefinition:
    return WorkflowDefinition(name="wf", input_model=Topic, steps=list(steps), **options)


def _error(*steps: Any, **options: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        _workflow(*steps, **options)
    return str(caught.value)


def test_a_reference_to_a_later_step_fails_naming_the_step() -> None:
    message = _error(
        AgentStep(id="a", agent="writer", prompt="{{ steps.b.text }}"),
        AgentStep(id="b", agent="writer", prompt="x"),
    )
    assert "step 'a'" in message and "steps.b.text" in message


def test_a_reference_to_an_unknown_input_field_fails() -> None:
    assert "not a field of Topic" in _error(AgentStep(id="a", agent="writer", prompt="{{ input.subject }}"))


def test_duplicate_ids_and_malformed_references_fail() -> None:
    assert "used twice" in _error(
        AgentStep(id="a", agent="writer", prompt="x"), AgentStep(id="a", agent="writer", prompt="y")
    )
    with pytest.raises(ValidationError):
        Condition(ref="output.x")
    with pytest.raises(ValidationError):
        DelayStep(id="d", seconds=1, until="input.topic")
    with pytest.raises(ValidationError):
        MonitorStep(id="m", every_seconds=1, until=Condition(ref="steps.m.x"))


def test_the_workflow_session_belongs_to_one_agent_and_no_parallel_branch() -> None:
    assert "belongs to agent None" in _error(AgentStep(id="a", agent="writer", prompt="x", session="workflow"))
    parallel = ParallelStep(
        id="p",
        branches=[
            AgentStep(id="a", agent="writer", prompt="x", session="workflow"),
            AgentStep(id="b", agent="writer", prompt="x"),
        ],
    )
    assert "cannot share the workflow session" in _error(parallel, session_agent="writer")


def test_the_registry_rejects_unknown_agents() -> None:
    registry = WorkflowRegistry([_workflow(AgentStep(id="a", agent="ghost", prompt="x"))])
    with pytest.raises(WorkflowDefinitionError, match="unknown agents: ghost"):
        registry.check_agents(["writer"])


def test_the_shipped_workflows_load_and_check_against_the_shipped_agents() -> None:
    registry = WorkflowRegistry.from_package("served_workflows")
    registry.check_agents(AgentRegistry.from_package("served_agents").names())
    assert registry.names() == ["expert_panel", "follow_up", "review_pipeline"]


def test_branches_compile_to_jumps() -> None:
    workflow = _workflow(
        AgentStep(id="a", agent="writer", prompt="x"),
        BranchStep(
            id="b",
            when=Condition(ref="steps.a.value.ok"),
            then=[AgentStep(id="yes", agent="writer", prompt="x")],
            otherwise=[AgentStep(id="no", agent="writer", prompt="x")],
        ),
        FunctionStep(id="f", function=lambda data: {}),
    )
    program = [(i.op, i.step_id, i.target) for i in compile_program(workflow)]
    assert program == [
        ("agent", "a", None),
        ("test", "b", 4),
        ("agent", "yes", None),
        ("jump", "b", 5),
        ("agent", "no", None),
        ("function", "f", None),
    ]


def test_references_render_and_conditions_evaluate() -> None:
    data = {"input": {"topic": "agents"}, "steps": {"review": {"value": {"score": 7, "tags": ["a"]}, "text": "ok"}}}
    assert render("On {{ input.topic }}: {{steps.review.text}} {{ steps.review.value }}", data) == (
        'On agents: ok {"score": 7, "tags": ["a"]}'
    )
    assert resolve("steps.review.value.tags.0", data) == "a"
    assert Condition(ref="steps.review.value.score", op="ge", value=7).evaluate(data)
    assert not Condition(ref="steps.review.value.score", op="lt", value=7).evaluate(data)
    assert Condition(ref="steps.review.value.tags", op="contains", value="a").evaluate(data)
    with pytest.raises(UnresolvedReference, match=r"steps\.review\.value\.missing"):
        resolve("steps.review.value.missing", data)


def test_a_missing_workflows_package_names_the_setting_to_fix() -> None:
    with pytest.raises(WorkflowDefinitionError) as caught:
        WorkflowRegistry.from_package("no_such_workflows")
    assert str(caught.value).endswith("No module named 'no_such_workflows': set WORKFLOWS_PACKAGE to an importable "
                                      "package (default served_workflows; none serves none)")


@pytest.mark.parametrize(
    ("env", "package"),
    [
        ({}, "served_workflows"),
        ({"AGENTS_PACKAGE": "served_agents"}, "served_workflows"),
        ({"AGENTS_PACKAGE": "my_agents"}, None),  # the shipped workflows need the shipped agents
        ({"AGENTS_PACKAGE": "my_agents", "WORKFLOWS_PACKAGE": "my_workflows"}, "my_workflows"),
        ({"WORKFLOWS_PACKAGE": "none"}, None),
    ],
)
def test_which_workflows_package_is_served(monkeypatch, env: dict[str, str], package: str | None) -> None:
    for name in ("AGENTS_PACKAGE", "WORKFLOWS_PACKAGE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert workflows_package() == package
    if package is None:
        assert load_workflows(["writer"]).names() == []
