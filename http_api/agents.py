"""Agents and health over HTTP: what this app serves and whether it is up."""

from __future__ import annotations

import sys

import azure.functions as func
from pydantic import BaseModel, Field

from agent_runs.services import RunServices
from agent_runtime.agents import AgentDefinition
from agent_runtime.escalation import Escalate
from http_api.adapter import http_endpoint, json_response
from http_api.caller import public
from http_api.identity import authenticator
from http_api.runs import agent_or_404


class ToolView(BaseModel):
    name: str
    description: str
    parameters: dict[str, object]
    approval: str
    approvers: list[str] = Field(default_factory=lambda: ["owner"], description="who may decide its approvals")
    separation_of_duties: bool = False


class McpServerView(BaseModel):
    """An MCP server of the agent (its tools are listed when a run starts); no URL, header or setting is shown."""

    name: str
    transport: str
    allowed_tools: list[str] | None
    approval: str | dict[str, str]


class AgentView(BaseModel):
    name: str
    description: str
    model: str | None
    tools: list[ToolView]
    mcp_servers: list[McpServerView] = []
    structured_output: bool
    approval_timeout_seconds: float | None
    on_approval_timeout: str
    escalation: dict[str, object] | None = None

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
                ToolView(
                    name=t.name,
                    description=t.description,
                    parameters=t.parameters,
                    approval=policy(t.approval),
                    approvers=list(t.approvers),
                    separation_of_duties=t.separation_of_duties,
                )
                for t in agent.tools
            ],
            mcp_servers=[
                McpServerView(
                    name=server.name,
                    transport=server.transport,
                    allowed_tools=server.allowed_tools,
                    approval=(
                        {tool: policy(p) for tool, p in server.approval.items()}
                        if isinstance(server.approval, dict)
                        else policy(server.approval)
                    ),
                )
                for server in agent.mcp_servers
            ],
            structured_output=agent.output_type is not None,
            approval_timeout_seconds=agent.approval_timeout_seconds,
            on_approval_timeout=agent.final_timeout_action,
            escalation=policy.model_dump() if isinstance(policy := agent.on_approval_timeout, Escalate) else None,
        )


@http_endpoint
async def list_agents(req: func.HttpRequest) -> func.HttpResponse:
    registry = RunServices.current().agents
    return json_response({"agents": [AgentView.of(registry.get(n)).model_dump(mode="json") for n in registry.names()]})


@http_endpoint
async def get_agent(req: func.HttpRequest) -> func.HttpResponse:
    return json_response(AgentView.of(agent_or_404(RunServices.current(), req.route_params["agent"])))


def live_streams() -> dict[str, int]:
    """The live streams of the process answering (each process has its own watchers). A process that never served a
    stream has not imported the stream modules, and they are not imported for this (start-up stays light)."""
    watchers = sys.modules.get("http_api.streams.watchers")
    return watchers.REGISTRY.totals() if watchers is not None else {"watchers": 0, "subscribers": 0}


@http_endpoint
@public
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
            "durable_engine": report.durable_engine,
            "task_hub": report.task_hub,
            "auth_mode": report.auth_mode,
            "on_azure": report.on_azure,
            "warnings": report.warnings,
            "auth": authenticator().health(services.deployment_settings),
            "streams": live_streams(),
        }
    )
