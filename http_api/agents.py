"""Agents and health over HTTP: what this app serves and whether it is up."""

from __future__ import annotations

import azure.functions as func
from pydantic import BaseModel

from agent_runs.services import RunServices
from agent_runtime.agents import AgentDefinition
from http_api.adapter import http_endpoint, json_response
from http_api.runs import agent_or_404


class ToolView(BaseModel):
    name: str
    description: str
    parameters: dict[str, object]
    approval: str


class AgentView(BaseModel):
    name: str
    description: str
    model: str | None
    tools: list[ToolView]
    structured_output: bool
    approval_timeout_seconds: float | None
    on_approval_timeout: str

    @classmethod
    def of(cls, agent: AgentDefinition) -> AgentView:
        def policy(tool_policy: object) -> str:
            chosen = agent.approval if tool_policy is None else tool_policy
            return chosen if isinstance(chosen, str) else "conditional"

        return cls(
            name=agent.name,
            description=agent.description,
            model=agent.model,
            tools=[
                ToolView(name=t.name, description=t.description, parameters=t.parameters, approval=policy(t.approval))
                for t in agent.tools
            ],
            structured_output=agent.output_type is not None,
            approval_timeout_seconds=agent.approval_timeout_seconds,
            on_approval_timeout=agent.on_approval_timeout,
        )


@http_endpoint
async def list_agents(req: func.HttpRequest) -> func.HttpResponse:
    registry = RunServices.current().agents
    return json_response({"agents": [AgentView.of(registry.get(n)).model_dump(mode="json") for n in registry.names()]})


@http_endpoint
async def get_agent(req: func.HttpRequest) -> func.HttpResponse:
    return json_response(AgentView.of(agent_or_404(RunServices.current(), req.route_params["agent"])))


@http_endpoint
async def health(req: func.HttpRequest) -> func.HttpResponse:
    services = RunServices.current()
    report = services.deployment
    return json_response(
        {
            "status": "ok",
            "agents": services.agents.names(),
            "store": report.store,
            "model_provider": report.model_provider,
            "durable_backend": report.durable_backend,
            "task_hub": report.task_hub,
            "auth_mode": report.auth_mode,
            "on_azure": report.on_azure,
            "warnings": report.warnings,
        }
    )
