"""What a client may send to `POST /v1/responses`: supported parameters are validated, the rest refused by name.

OpenAI clients send only the parameters their caller set, so a parameter this server cannot honour is refused with a
400 naming it (`unsupported_parameter`) instead of being ignored. A few values that change nothing here are accepted.
Query parameters likewise (`parse_query`), except those meant for the platform, not for this API (`PLATFORM_PARAMS`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

import azure.functions as func
from pydantic import BaseModel, ConfigDict, ValidationError

from agent_runtime.messages import Message, TextContent
from agent_runtime.models.types import ResponseFormat
from agent_runtime.overrides import RunOverrides, check_output_schema
from http_api.openai_responses.errors import openai_error, unsupported
from http_api.openai_responses.models import (
    ApprovalResponseItem,
    CreateResponseRequest,
    InputMessageItem,
    JsonObjectFormat,
    JsonSchemaFormat,
)
from http_api.problems import validation_problem

SUPPORTED = frozenset(CreateResponseRequest.model_fields)
# Values that ask for what this server does anyway.
HARMLESS: dict[str, tuple[Any, ...]] = {
    "tools": ([],),
    "truncation": ("disabled",),
    "include": ([],),
    "parallel_tool_calls": (True,),
}


# In the query of every request, not for this API: the Functions host's key (`?code=`, which the host passes on) and
# the API version Azure OpenAI clients add to every request (`AzureOpenAI(api_version=...)`).
PLATFORM_PARAMS = frozenset({"code", "api-version"})
QueryT = TypeVar("QueryT", bound=BaseModel)


class RawBody(BaseModel):
    model_config = ConfigDict(extra="allow")


@dataclass
class CreateRequest:
    body: CreateResponseRequest
    messages: list[Message] = field(default_factory=list)
    approvals: list[tuple[int, ApprovalResponseItem]] = field(default_factory=list)  # (input index, item)

    @property
    def overrides(self) -> RunOverrides:
        return RunOverrides(instructions=self.body.instructions, response_format=_response_format(self.body))


def parse_create(data: dict[str, Any]) -> CreateRequest:
    for name, value in data.items():
        if name in SUPPORTED or value is None or value in HARMLESS.get(name, ()):
            continue
        raise unsupported(name)
    data = {name: value for name, value in data.items() if name in SUPPORTED}  # the rest asks for nothing
    try:
        body = CreateResponseRequest.model_validate(data)
    except ValidationError as error:
        raise validation_problem(error, data=data) from error
    if body.stream_options is not None and not body.stream:
        raise openai_error(400, "'stream_options' is only valid with stream=true.", param="stream_options")
    if body.store is False:
        raise unsupported("store", "every response is stored (it is a durable run)")
    if body.text is not None and body.text.format is not None:
        _check_format(body)
    request = CreateRequest(body=body)
    if isinstance(body.input, str):
        if not body.input.strip():
            raise openai_error(400, "'input' must not be blank.", param="input")
        request.messages = [Message(role="user", contents=body.input)]
        return request
    for index, item in enumerate(body.input):
        _parse_item(request, index, item)
    if request.approvals and request.messages:
        raise openai_error(
            400,
            "Send either messages or mcp_approval_response items: an answer to approval requests continues the run "
            "that asked, new messages start the next one.",
            param="input",
        )
    if request.approvals and not body.previous_response_id:
        raise openai_error(
            400, "mcp_approval_response items need the previous_response_id they answer.", param="previous_response_id"
        )
    if request.messages and not any(m.text.strip() for m in request.messages):
        raise openai_error(400, "The input messages have no text.", param="input")
    return request


def parse_query(req: func.HttpRequest, model: type[QueryT]) -> QueryT:
    """The request's query as `model`: a parameter it does not know is refused by name, as in bodies."""
    params = {name: value for name, value in req.params.items() if name not in PLATFORM_PARAMS}
    known = {field.alias or name for name, field in model.model_fields.items()}
    for name in params:
        if name not in known:
            raise unsupported(name)
    try:
        return model.model_validate(params)
    except ValidationError as error:
        raise validation_problem(error, prefix="query", data=params) from error


def _parse_item(request: CreateRequest, index: int, item: dict[str, Any]) -> None:
    kind = item.get("type")
    param = f"input[{index}]"
    try:
        if kind == "mcp_approval_response":
            request.approvals.append((index, ApprovalResponseItem.model_validate(item)))
            return
        if kind in (None, "message") and "role" in item:
            for part_index, part in enumerate(item.get("content") if isinstance(item.get("content"), list) else []):
                part_type = part.get("type") if isinstance(part, dict) else None
                if part_type != "input_text":
                    raise unsupported(f"{param}.content[{part_index}].type", f"'{part_type}' parts are not supported")
            message = InputMessageItem.model_validate(item)
        else:
            raise unsupported(f"{param}.type", f"input items of type '{kind}' are not supported")
    except ValidationError as error:
        problem = validation_problem(error, prefix="", data=item)
        where = f"{param}.{problem.field}" if problem.field else param
        raise openai_error(400, f"Invalid '{where}': {problem.invalid_params[0].reason}", param=where) from error
    role = "system" if message.role == "developer" else message.role
    request.messages.append(Message(role=role, contents=[TextContent(text=text) for text in message.texts()]))


def _check_format(body: CreateResponseRequest) -> None:
    fmt = body.text.format if body.text else None
    if isinstance(fmt, JsonSchemaFormat):
        try:
            check_output_schema(fmt.schema_)
        except ValueError as error:
            raise openai_error(
                400, f"Invalid schema for response format '{fmt.name}': {error}", param="text.format.schema"
            ) from error


def _response_format(body: CreateResponseRequest) -> ResponseFormat | None:
    fmt = body.text.format if body.text else None
    if isinstance(fmt, JsonSchemaFormat):
        return ResponseFormat(name=fmt.name, json_schema=fmt.schema_, strict=bool(fmt.strict))
    if isinstance(fmt, JsonObjectFormat):
        return ResponseFormat.json_object()
    return None
