"""What a model call is made of: the request (conversation, tools, options) and the `ModelClient` protocol.

Everything is pydantic with a stable JSON form, so a request can be logged, hashed or carried in a payload. A
structured-output type is turned into its JSON schema here (`ResponseFormat.from_model`), so no Python class has to
travel with the request; read the answer back with `ChatResponse.parse_value(MyModel)`.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..messages import ChatResponse, ChatResponseUpdate, Message


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolSpec(_Model):
    """A tool as offered to the model (`ToolSpec.model_validate(tool.spec())` for a `@tool`)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool | None = None


class NamedToolChoice(_Model):
    """Force the model to call this one tool."""

    name: str


ToolChoiceMode = Literal["auto", "none", "required"]
ToolChoice = ToolChoiceMode | NamedToolChoice


class ResponseFormat(_Model):
    """Structured output: `json_schema` (the model must answer JSON matching `json_schema`) or `json_object` (any
    JSON object)."""

    type: Literal["json_schema", "json_object"] = "json_schema"
    name: str = Field(default="response", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    json_schema: dict[str, Any] | None = None
    strict: bool = True

    @classmethod
    def from_model(cls, model_type: type[BaseModel], *, name: str | None = None) -> ResponseFormat:
        """The strict schema of a pydantic model, exactly as the openai SDK's `parse()` would send it."""
        # A private module of the SDK, but the one `parse()` uses: same schema, same strictness. openai is pinned
        # below 4 in requirements.txt and tests/core/test_model_client_structured.py guards the import.
        from openai.lib._pydantic import to_strict_json_schema

        schema = to_strict_json_schema(model_type)
        return cls(name=_safe_name(name or model_type.__name__), json_schema=schema, strict=True)

    @classmethod
    def from_json_schema(
        cls, schema: dict[str, Any], *, name: str = "response", strict: bool = False
    ) -> ResponseFormat:
        """A caller-owned schema passed through as is (seed 002: the framework does not rewrite it). `strict=True`
        only if the schema already follows OpenAI's strict rules."""
        if schema.get("type") != "object":
            root = schema.get("type")
            raise ValueError(f"a response format schema must have type 'object' at its root, got {root!r}")
        return cls(name=_safe_name(name), json_schema=schema, strict=strict)

    @classmethod
    def json_object(cls) -> ResponseFormat:
        return cls(type="json_object")


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "response"


class ChatOptions(_Model):
    """Per-call options; None means "the provider's default"."""

    model: str | None = None
    """Model name, or the deployment name on Azure OpenAI; None = the client's default."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None
    stop: list[str] | None = None
    seed: int | None = None
    user: str | None = None
    extra_body: dict[str, Any] | None = None
    """Provider-specific request fields, sent verbatim."""

    @field_validator("response_format", mode="before")
    @classmethod
    def _accept_model_or_schema(cls, value: Any) -> Any:
        """Accept a pydantic model class, a bare JSON schema, or OpenAI's wire form as well as a `ResponseFormat`."""
        if isinstance(value, type) and issubclass(value, BaseModel):
            return ResponseFormat.from_model(value)
        if not isinstance(value, dict):
            return value
        kind = value.get("type")
        if kind not in ("json_schema", "json_object"):
            return ResponseFormat.from_json_schema(value, name=str(value.get("title", "response")))
        wire = value.get("json_schema")
        if kind == "json_schema" and isinstance(wire, dict) and "schema" in wire:
            name = _safe_name(str(wire.get("name", "response")))
            return ResponseFormat(name=name, json_schema=wire["schema"], strict=bool(wire.get("strict", False)))
        return value

    @field_validator("tool_choice", mode="before")
    @classmethod
    def _accept_named_dict(cls, value: Any) -> Any:
        """Accept OpenAI's `{"type": "function", "function": {"name": ...}}` form too."""
        if isinstance(value, dict) and isinstance(value.get("function"), dict):
            return {"name": value["function"].get("name")}
        return value

    def merged(self, overrides: ChatOptions | None) -> ChatOptions:
        """These options with every field set in `overrides` replacing them."""
        if overrides is None:
            return self
        return self.model_copy(update=overrides.model_dump(exclude_unset=True, exclude_none=True))


class ChatRequest(_Model):
    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    options: ChatOptions = Field(default_factory=ChatOptions)


@runtime_checkable
class ModelClient(Protocol):
    """A chat model. Raises `ModelError` (agent_runtime.models.errors) for every provider or transport failure.
    A client only reads the request: its messages may be shared with other readers (`ConversationLog.read`)."""

    async def get_response(self, request: ChatRequest) -> ChatResponse: ...

    def get_streaming_response(self, request: ChatRequest) -> AsyncIterator[ChatResponseUpdate]: ...
