"""`GET /api/v1/models` and `/api/v1/models/{id}`: the agents this app serves, as OpenAI lists models (a client's
`models.list()` / `models.retrieve(...)`). A model is an agent: `model` names one in `POST /v1/responses`."""

from __future__ import annotations

from typing import Literal

import azure.functions as func
from pydantic import BaseModel

from agent_runs.services import RunServices
from agent_runtime.agents import UnknownAgentError
from http_api.adapter import json_response
from http_api.openai_responses.errors import openai_endpoint, openai_error

OWNER = "durable-agents"  # `owned_by`: this app (the agents are its code, not a provider's models)


class ModelObject(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0  # agents are code deployed with the app: no creation time of their own
    owned_by: str = OWNER


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelObject]


@openai_endpoint
async def list_models(req: func.HttpRequest) -> func.HttpResponse:
    agents = RunServices.current().agents
    return json_response(ModelList(data=[ModelObject(id=name) for name in agents.names()]))


@openai_endpoint
async def get_model(req: func.HttpRequest) -> func.HttpResponse:
    name = req.route_params["model"]
    try:
        agent = RunServices.current().agents.get(name)
    except UnknownAgentError as error:
        raise openai_error(
            404, f"The model '{name}' does not exist (models are the agents this app serves).", param="model",
            code="model_not_found",
        ) from error
    return json_response(ModelObject(id=agent.name))
