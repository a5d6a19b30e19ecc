"""What a client may send to `POST /v1/responses`: supported parameters are validated, the rest refused by name.

OpenAI clients send only the parameters their caller set, so a parameter this server cannot honour is refused with a
400 naming it (`unsupported_parameter`) instead of being ignored. A few values that change nothing here are accepted.
Query parameters likewise (`parse_query`), except those meant for the platform, not for this API (`PLATFORM_PARAMS`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TypeVar

import azure.functions as func
from pydantic import BaseModel, ConfigDict, ValidationError

from agent_runtime.messages import Message, TextContent
from agent_runtime.models.types import ResponseFormat
from agent_runtime.overrides import RunOverrides, check_output_schema
from agent_runtime.tool_policy import ToolPolicy
from http_api.openai_responses.conversation import REPEAT_ONLY, Entry
from http_api.openai_responses.errors import openai_error, unsupported
from http_api.openai_responses.includes import check_include
from http_api.openai_responses.models import (
    ApprovalResponseItem,
    ConversationMessageItem,
    CreateResponseRequest,
    FunctionCallItem,
    FunctionCallOutputItem,
    JsonObjectFormat,
    JsonSchemaFormat,
    McpApprovalRequestItem,
    McpCallItem,
    McpListToolsItem,
    ReasoningItem,
)
from http_api.problems import validation_problem

SUPPORTED = frozenset(CreateResponseRequest.model_fields)
# Values that ask for what this server does anyway.
HARMLESS: dict[str, tuple[Any, ...]] = {
    "truncation": ("disabled",),
    "parallel_tool_calls": (True,),
}
# Refused parameters a client reaches for by habit, with what does the same here.
INSTEAD: dict[str, str] = {
    "conversation": (
        "there are no Conversation objects here; continue a conversation with previous_response_id (the response "
        "it goes on from), or send its earlier items again as the input"
    ),
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
    entries: list[Entry] = field(default_factory=list)  # the input items, parsed
    messages: list[Message] = field(default_factory=list)  # the new messages (`take`)
    approvals: list[tuple[int, ApprovalResponseItem]] = field(default_factory=list)  # (input index, item)
    tools: ToolPolicy | None = None  # the declared tools (`hosted_tools.tool_policy`, once the agent is known)

    @property
    def overrides(self) -> RunOverrides:
        return RunOverrides(
            instructions=self.body.instructions, response_format=_response_format(self.body), tools=self.tools
        )

    @property
    def repeats(self) -> bool:
        """Whether the input may repeat items of a stored conversation (items with ids, or only a server makes)."""
        return any(
            e.id is not None or e.kind in REPEAT_ONLY or e.kind in ("mcp_list_tools", "mcp_approval_response")
            for e in self.entries
        )

    def take(self, new: list[Entry]) -> None:
        """The new items take effect: messages start the next run, approval responses decide (checked here)."""
        self.messages = [
            Message(role=e.role, contents=[TextContent(text=t) for t in e.texts])  # type: ignore[arg-type]
            for e in new
            if e.kind == "message"
        ]
        self.approvals = [(e.index, e.approval) for e in new if e.approval is not None]
        _check_answered_once(self.approvals)
        if not self.messages and not self.approvals:
            raise openai_error(
                400,
                "The input repeats the conversation but adds nothing: send a new message or mcp_approval_response.",
                param="input",
            )
        if self.approvals and self.messages:
            raise openai_error(
                400,
                "Send either messages or mcp_approval_response items: an answer to approval requests continues the "
                "run that asked, new messages start the next one.",
                param="input",
            )
        if self.messages and not any(m.text.strip() for m in self.messages):
            raise openai_error(400, "The input messages have no text.", param="input")


def _check_answered_once(approvals: list[tuple[int, ApprovalResponseItem]]) -> None:
    """One answer per approval request: each copy would go through the whole decision path (reads and writes of the
    store, the run's event), so a body of copies would be thousands of store operations for one request."""
    answered: set[str] = set()
    for index, item in approvals:
        if item.approval_request_id in answered:
            raise openai_error(
                400,
                f"Invalid 'input[{index}]': approval request '{item.approval_request_id}' is answered twice.",
                param=f"input[{index}]",
            )
        answered.add(item.approval_request_id)


def parse_create(data: dict[str, Any]) -> CreateRequest:
    for name, value in data.items():
        if name in SUPPORTED or value is None or value in HARMLESS.get(name, ()):
            continue
        raise unsupported(name, INSTEAD.get(name))
    data = {name: value for name, value in data.items() if name in SUPPORTED}  # the rest asks for nothing
    try:
        body = CreateResponseRequest.model_validate(data)
    except ValidationError as error:
        raise validation_problem(error, data=data) from error
    if body.stream_options is not None and not body.stream:
        raise openai_error(400, "'stream_options' is only valid with stream=true.", param="stream_options")
    if body.store is False:
        raise unsupported("store", "every response is stored (it is a durable run)")
    check_include(body.include or [])
    if body.text is not None and body.text.format is not None:
        _check_format(body)
    request = CreateRequest(body=body)
    if isinstance(body.input, str):
        if not body.input.strip():
            raise openai_error(400, "'input' must not be blank.", param="input")
        request.entries = [Entry(index=0, kind="message", role="user", text=body.input, texts=(body.input,))]
    else:
        request.entries = [_parse_item(index, item) for index, item in enumerate(body.input)]
    if not request.repeats:
        request.take(request.entries)  # all new (an input that repeats a conversation: `stateless.resolve_input`)
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


def _parse_item(index: int, item: dict[str, Any]) -> Entry:
    kind = item.get("type")
    param = f"input[{index}]"
    if kind is None and "role" in item:
        kind = "message"
    model = _ITEM_MODELS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise unsupported(f"{param}.type", f"input items of type '{kind}' are not supported")
    if kind == "message":
        content = item.get("content")
        for part_index, part in enumerate(content if isinstance(content, list) else []):
            part_type = part.get("type") if isinstance(part, dict) else None
            allowed = ("input_text", "output_text") if item.get("role") == "assistant" else ("input_text",)
            if part_type not in allowed:
                raise unsupported(f"{param}.content[{part_index}].type", f"'{part_type}' parts are not supported")
    try:
        parsed = model.model_validate(item)
    except ValidationError as error:
        problem = validation_problem(error, prefix="", data=item)
        where = f"{param}.{problem.field}" if problem.field else param
        raise openai_error(400, f"Invalid '{where}': {problem.invalid_params[0].reason}", param=where) from error
    return _entry(index, parsed)


def _entry(index: int, item: BaseModel) -> Entry:
    """The parsed item as `conversation.reconcile` reads it."""
    if isinstance(item, ConversationMessageItem):
        texts = tuple(item.texts())
        role = "system" if item.role == "developer" else item.role
        return Entry(index=index, kind="message", id=item.id, role=role, text="".join(texts), texts=texts)
    if isinstance(item, ApprovalResponseItem):
        return Entry(index=index, kind="mcp_approval_response", id=item.id, approval=item)
    if isinstance(item, McpCallItem):
        return Entry(
            index=index, kind="mcp_call", id=item.id, name=item.name, arguments=item.arguments, output=item.output
        )
    if isinstance(item, McpApprovalRequestItem):
        return Entry(index=index, kind="mcp_approval_request", id=item.id, name=item.name, arguments=item.arguments)
    if isinstance(item, FunctionCallItem):
        return Entry(index=index, kind="function_call", call_id=item.call_id, name=item.name, arguments=item.arguments)
    if isinstance(item, FunctionCallOutputItem):
        output = item.output if isinstance(item.output, str) else json.dumps(item.output)
        return Entry(index=index, kind="function_call_output", call_id=item.call_id, output=output)
    kind = "mcp_list_tools" if isinstance(item, McpListToolsItem) else "reasoning"
    return Entry(index=index, kind=kind, id=getattr(item, "id", None))  # type: ignore[arg-type]


_ITEM_MODELS: dict[str, type[BaseModel]] = {
    "message": ConversationMessageItem,
    "mcp_approval_response": ApprovalResponseItem,
    "mcp_call": McpCallItem,
    "mcp_approval_request": McpApprovalRequestItem,
    "mcp_list_tools": McpListToolsItem,
    "reasoning": ReasoningItem,
    "function_call": FunctionCallItem,
    "function_call_output": FunctionCallOutputItem,
}


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
