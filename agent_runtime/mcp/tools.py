"""MCP tools as ordinary `Tool`s: the schema the server listed, its approval policy, a remote call as `invoke`.

`McpToolSpec` is what discovery records for a run (JSON, in the run's store record): the server's tool name, the
name the model sees and the input schema. `McpTool` rebuilds a callable tool from it and the agent's `McpServer`,
so every step of the run offers and validates exactly what was discovered, whatever the server lists later.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from jsonschema.protocols import Validator
from pydantic import BaseModel, ConfigDict, Field

from .. import json_limits
from ..json_schemas import InvalidSchemaError, SchemaRefusedError, safe_validator, schema_errors_of
from ..tools import Tool, ToolArgumentsError, ToolContext, ToolReportedError
from .config import McpServer
from .connection import call_remote_tool
from .results import error_text, result_value

logger = logging.getLogger(__name__)

MAX_DESCRIPTION_CHARS = 1024


class McpToolSpec(BaseModel):
    """One discovered tool, as recorded for a run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    server: str
    remote_name: str
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="what the model calls it")
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class McpArguments(BaseModel):
    """Validated arguments of an MCP tool call: the JSON object, with each argument readable as an attribute (so an
    approval predicate reads `args.path` as for a Python tool)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__pydantic_extra__ or {})


class McpTool(Tool):
    """A tool of an MCP server, as discovered for a run. `server` is None when the agent no longer configures the
    server the run discovered it on (the call then fails with a message for the model)."""

    def __init__(self, spec: McpToolSpec, server: McpServer | None) -> None:
        # Tool.__init__ derives everything from a Python function; a remote tool has its schema already.
        self.spec_record = spec
        self.server = server
        self.func = self._call_remote
        self.name = spec.name
        self.description = spec.description[:MAX_DESCRIPTION_CHARS]
        self.approval = server.policy_for(spec.remote_name) if server is not None else "always"
        self.timeout = None  # the server's timeout_seconds and attempts bound the call
        self.is_async = True
        self.arguments_model = McpArguments
        self.context_parameter = "context"
        self.parameters = _model_facing_schema(spec.input_schema)
        self._refused: str | None = None
        try:
            self._validator = _validator_for(spec.input_schema, spec.name)
        except SchemaRefusedError as error:
            self._validator, self._refused = None, str(error)
        # The server's schema is checked under a deadline of up to seconds: off the event loop (`steps`). Without one
        # (invalid or refused schema) the check is a JSON parse, as for a Python tool.
        self.costly_argument_check = self._validator is not None

    def __repr__(self) -> str:
        return f"McpTool({self.name!r}, server={self.spec_record.server!r})"

    def validate_arguments(self, arguments: dict[str, Any] | str) -> BaseModel:
        """Parse the arguments and check them against the server's input schema (JSON Schema)."""
        if isinstance(arguments, str):
            try:
                parsed = json_limits.loads(arguments or "{}")
            except json_limits.JsonLimitError as exc:
                raise ToolArgumentsError(f"Invalid arguments for tool '{self.name}': {exc}") from None
            except json.JSONDecodeError as exc:
                raise ToolArgumentsError(
                    f"Invalid arguments for tool '{self.name}': not valid JSON ({exc.msg} at position {exc.pos})"
                ) from None
        else:
            parsed = arguments
        if not isinstance(parsed, dict):
            raise ToolArgumentsError(f"Invalid arguments for tool '{self.name}': arguments must be a JSON object")
        if self._refused is not None:
            raise ToolArgumentsError(f"Tool '{self.name}' cannot check its arguments: {self._refused}")
        if self._validator is not None:
            try:
                size = len(arguments) if isinstance(arguments, str) else None
                problems = schema_errors_of(self._validator, parsed, value_chars=size)
            except SchemaRefusedError as error:
                raise ToolArgumentsError(f"Tool '{self.name}' cannot check its arguments: {error}") from None
            if problems:
                described = "; ".join(
                    f"{'.'.join(str(p) for p in e.absolute_path) or 'arguments'}: {e.message}" for e in problems[:10]
                )
                raise ToolArgumentsError(f"Invalid arguments for tool '{self.name}': {described}")
        return McpArguments.model_validate(parsed)

    async def invoke(self, arguments: BaseModel, context: ToolContext | None = None) -> Any:
        if context is None:
            raise ValueError(f"tool {self.name!r} needs a ToolContext (its idempotency key goes to the server)")
        values = arguments.as_dict() if isinstance(arguments, McpArguments) else arguments.model_dump()
        return await self._call_remote(values, context)

    async def _call_remote(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        if self.server is None:
            raise ToolReportedError(
                f"Tool '{self.name}' belongs to MCP server '{self.spec_record.server}', which this agent no longer"
                " configures."
            )
        result = await call_remote_tool(self.server, self.spec_record.remote_name, arguments, context.idempotency_key)
        if result.is_error:
            raise ToolReportedError(f"Tool '{self.name}' reported an error: {error_text(result)}")
        return result_value(result)


def _validator_for(schema: dict[str, Any], name: str) -> Validator | None:
    """A JSON Schema validator for the server's input schema that never fetches (`json_schemas`); None (accept any
    object) if the schema is invalid. A schema refused for what it would make the app do (a reference outside it,
    too large or deep) raises: discovery leaves such tools out, and a call of one recorded before fails."""
    try:
        return safe_validator(schema)
    except InvalidSchemaError:
        logger.warning("MCP tool %r lists an invalid input schema; its arguments are not checked", name)
        return None


def _model_facing_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The input schema as offered to the model: an object schema without the generator's root `title`."""
    offered = {k: v for k, v in schema.items() if k not in ("title", "$schema")}
    offered.setdefault("type", "object")
    if offered.get("type") == "object":
        offered.setdefault("properties", {})
    return offered
