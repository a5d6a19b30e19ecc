"""The Responses API's wire shapes (the subset this server produces and accepts), as pydantic models."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from agent_runtime.overrides import MAX_INSTRUCTIONS_CHARS

ResponseStatus = Literal["queued", "in_progress", "completed", "failed", "cancelled", "incomplete"]
FINAL_RESPONSE_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled", "incomplete"})


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ----------------------------------------------------------------------------------------------- request


class InputText(_Wire):
    type: Literal["input_text"]
    text: str


class InputMessageItem(_Wire):
    """An input message (OpenAI's EasyInputMessage or input Message); `developer` counts as `system`."""

    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[InputText]
    id: str | None = None
    status: str | None = None

    def texts(self) -> list[str]:
        return [self.content] if isinstance(self.content, str) else [part.text for part in self.content]


class ApprovalResponseItem(_Wire):
    type: Literal["mcp_approval_response"]
    approval_request_id: Annotated[str, StringConstraints(min_length=1, max_length=255)]
    approve: bool
    reason: Annotated[str, StringConstraints(max_length=2000)] | None = None
    id: str | None = None


class _Repeated(BaseModel):
    """An item of an earlier response sent back (stateless multi-turn): the fields that must match the stored item
    are checked; the rest (status, annotations, ...) is what the client got from us and is not read."""

    model_config = ConfigDict(extra="ignore")


class OutputTextPart(_Repeated):
    type: Literal["output_text", "input_text"]
    text: str


class ConversationMessageItem(_Repeated):
    """A message of the conversation sent back: any role; an assistant's parts are `output_text`."""

    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[OutputTextPart]
    id: str | None = None

    def texts(self) -> list[str]:
        return [self.content] if isinstance(self.content, str) else [part.text for part in self.content]


class McpCallItem(_Repeated):
    type: Literal["mcp_call"]
    id: Annotated[str, StringConstraints(min_length=1, max_length=512)]
    server_label: str
    name: str
    arguments: str
    output: str | None = None


class McpApprovalRequestItem(_Repeated):
    type: Literal["mcp_approval_request"]
    id: Annotated[str, StringConstraints(min_length=1, max_length=512)]
    server_label: str
    name: str
    arguments: str


class McpListToolsItem(_Repeated):
    type: Literal["mcp_list_tools"]
    server_label: str
    id: str | None = None


class ReasoningItem(_Repeated):
    type: Literal["reasoning"]
    id: str | None = None


class FunctionCallItem(_Repeated):
    type: Literal["function_call"]
    call_id: Annotated[str, StringConstraints(min_length=1, max_length=512)]
    name: str
    arguments: str
    id: str | None = None


class FunctionCallOutputItem(_Repeated):
    type: Literal["function_call_output"]
    call_id: Annotated[str, StringConstraints(min_length=1, max_length=512)]
    output: str | list[dict[str, Any]]
    id: str | None = None


class JsonSchemaFormat(_Wire):
    type: Literal["json_schema"]
    name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
    schema_: dict[str, Any] = Field(alias="schema")
    strict: bool | None = None
    description: str | None = None


class TextFormat(_Wire):
    type: Literal["text"]


class JsonObjectFormat(_Wire):
    type: Literal["json_object"]


class TextConfig(_Wire):
    format: Annotated[TextFormat | JsonSchemaFormat | JsonObjectFormat, Field(discriminator="type")] | None = None
    verbosity: None = None


class StreamOptions(_Wire):
    # OpenAI pads deltas with random `obfuscation` text unless told not to; this server never does (its deltas are
    # cut at word boundaries, not tokens), so either value asks for what it does.
    include_obfuscation: bool | None = None


MetadataKey = Annotated[str, StringConstraints(min_length=1, max_length=64)]
MetadataValue = Annotated[str, StringConstraints(max_length=512)]


class CreateResponseRequest(_Wire):
    """`POST /v1/responses` (parameters this server supports; the others are refused by `requests.py`)."""

    model: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    input: Annotated[str, StringConstraints(min_length=1)] | Annotated[list[dict[str, Any]], Field(min_length=1)]
    # The run's own limit, checked here: past it the run's overrides could not be built (a 500, not a 400).
    instructions: Annotated[str, StringConstraints(max_length=MAX_INSTRUCTIONS_CHARS)] | None = None
    previous_response_id: str | None = None
    background: bool | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    store: bool | None = None
    metadata: Annotated[dict[MetadataKey, MetadataValue], Field(max_length=16)] | None = None
    text: TextConfig | None = None
    tools: Annotated[list[dict[str, Any]], Field(max_length=64)] | None = None  # checked by `hosted_tools`
    include: Annotated[list[str], Field(max_length=16)] | None = None  # checked by `includes`


class InputItemsQuery(_Wire):
    after: str | None = None
    before: str | None = None
    limit: Annotated[int, Field(ge=1, le=100)] = 20
    order: Literal["asc", "desc"] = "desc"
    include: str | None = Field(default=None, alias="include[]")  # every value: `includes.query_include`


class RetrieveQuery(_Wire):
    """`GET /v1/responses/{id}`: `stream=true` streams the response's events (`starting_after`: those after it)."""

    stream: bool = False
    starting_after: Annotated[int, Field(ge=0)] | None = None
    include_obfuscation: bool | None = None  # see StreamOptions
    include: str | None = Field(default=None, alias="include[]")  # every value: `includes.query_include`


# ----------------------------------------------------------------------------------------------- response


class OutputText(BaseModel):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[Any] = Field(default_factory=list)
    logprobs: list[Any] = Field(default_factory=list)


class MessageOutput(BaseModel):
    type: Literal["message"] = "message"
    id: str
    role: Literal["assistant"] = "assistant"
    status: Literal["in_progress", "completed", "incomplete"] = "completed"
    content: list[OutputText]


class McpToolExecutionError(BaseModel):
    """A tool that failed (or did not run: denied, expired, bad arguments), as MCP reports a tool error."""

    type: Literal["mcp_tool_execution_error"] = "mcp_tool_execution_error"
    content: list[dict[str, Any]]

    @classmethod
    def of(cls, text: str) -> McpToolExecutionError:
        return cls(content=[{"type": "text", "text": text}])

    @property
    def text(self) -> str:
        return "".join(str(part.get("text", "")) for part in self.content)


class McpCall(BaseModel):
    type: Literal["mcp_call"] = "mcp_call"
    id: str
    server_label: str
    name: str
    arguments: str
    output: str | None = None
    error: McpToolExecutionError | None = None
    status: Literal["in_progress", "completed", "incomplete", "calling", "failed"] = "completed"
    approval_request_id: str | None = None


class McpApprovalRequest(BaseModel):
    type: Literal["mcp_approval_request"] = "mcp_approval_request"
    id: str
    server_label: str
    name: str
    arguments: str


OutputItem = Annotated[MessageOutput | McpCall | McpApprovalRequest, Field(discriminator="type")]


class InputTokensDetails(BaseModel):
    cached_tokens: int = 0
    cache_write_tokens: int = 0


class OutputTokensDetails(BaseModel):
    reasoning_tokens: int = 0


class ResponseUsage(BaseModel):
    input_tokens: int = 0
    input_tokens_details: InputTokensDetails = Field(default_factory=InputTokensDetails)
    output_tokens: int = 0
    output_tokens_details: OutputTokensDetails = Field(default_factory=OutputTokensDetails)
    total_tokens: int = 0


class ResponseError(BaseModel):
    code: str
    message: str


class IncompleteDetails(BaseModel):
    reason: Literal["max_output_tokens", "content_filter"]


class ResponseObject(BaseModel):
    """OpenAI's `Response` (the fields the official clients read), for one turn of a run."""

    id: str
    object: Literal["response"] = "response"
    created_at: int
    completed_at: int | None = None
    status: ResponseStatus
    background: bool | None = None
    error: ResponseError | None = None
    incomplete_details: IncompleteDetails | None = None
    instructions: str | None = None
    max_output_tokens: int | None = None
    model: str
    output: list[OutputItem] = Field(default_factory=list)
    parallel_tool_calls: bool = True
    previous_response_id: str | None = None
    reasoning: dict[str, Any] | None = None
    store: bool = True
    temperature: float | None = None
    text: dict[str, Any] = Field(default_factory=lambda: {"format": {"type": "text"}})
    tool_choice: str = "auto"
    tools: list[Any] = Field(default_factory=list)
    top_p: float | None = None
    truncation: str = "disabled"
    usage: ResponseUsage | None = None
    user: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def output_text(self) -> str:
        return "".join(part.text for item in self.output if isinstance(item, MessageOutput) for part in item.content)


class InputMessageOut(BaseModel):
    type: Literal["message"] = "message"
    id: str
    role: Literal["user", "system", "developer", "assistant"]
    status: Literal["completed"] = "completed"
    content: list[dict[str, Any]]


class ApprovalResponseOut(BaseModel):
    type: Literal["mcp_approval_response"] = "mcp_approval_response"
    id: str
    approval_request_id: str
    approve: bool
    reason: str | None = None


InputItem = Annotated[InputMessageOut | ApprovalResponseOut, Field(discriminator="type")]


class InputItemList(BaseModel):
    object: Literal["list"] = "list"
    data: list[InputItem]
    first_id: str | None
    last_id: str | None
    has_more: bool


class DeletedResponse(BaseModel):
    id: str
    object: Literal["response"] = "response"
    deleted: bool = True


class OpenAIError(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class OpenAIErrorBody(BaseModel):
    """Every error of the Responses routes, in OpenAI's shape (not problem+json, so OpenAI clients parse it)."""

    error: OpenAIError
