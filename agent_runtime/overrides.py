"""Per-run changes to an agent: extra instructions and a structured output format that apply to one run only.

A client may start a run with its own instructions (added after the agent's) and its own output schema (e.g. the
OpenAI Responses surface's `instructions` and `text.format`). They change that run's model calls and the check of its
answer, never the agent definition or later runs of the session. They travel in the run's store record (read by the
model and finish steps), not in orchestration payloads: a schema can be large, and history must stay small.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from . import json_limits
from .agents import AgentDefinition
from .loop_types import ToolChoice
from .models.types import ChatOptions, ResponseFormat
from .tool_policy import ToolPolicy

MAX_INSTRUCTIONS_CHARS = 64_000


class OutputSchemaError(ValueError):
    """The answer is not JSON matching the run's output schema."""


class RunOverrides(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    instructions: str | None = Field(default=None, max_length=MAX_INSTRUCTIONS_CHARS)
    """Extra system instructions for this run, after the agent's own."""
    response_format: ResponseFormat | None = None
    """Structured output for this run, replacing the agent's `output_type`."""
    tools: ToolPolicy | None = None
    """Fewer tools, more approvals for this run (never fewer approvals: see `tool_policy`)."""

    @classmethod
    def from_record(cls, stored: dict[str, Any] | None) -> RunOverrides:
        return cls.model_validate(stored or {})

    def to_record(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    def system_prompt(self, agent: AgentDefinition) -> str:
        return "\n\n".join(part for part in (agent.instructions, self.instructions) if part)

    def chat_options(self, agent: AgentDefinition, tool_choice: ToolChoice | None = None) -> ChatOptions:
        options = agent.chat_options(tool_choice)
        if self.response_format is None:
            return options
        return options.model_copy(update={"response_format": self.response_format.model_copy(deep=True)})

    @property
    def has_output_format(self) -> bool:
        return self.response_format is not None

    def parse_output(self, agent: AgentDefinition, text: str) -> Any:
        """The structured answer (the agent's own `output_type` without a per-run format); raises a ValueError when
        the answer does not fit."""
        fmt = self.response_format
        if fmt is None:
            return agent.parse_output(text)
        # jsonschema is loaded by the first run with a format of its own, not at start-up (tests/deploy).
        from .json_schemas import MAX_INSTANCE_CHARS, SchemaRefusedError, best_error, safe_validator

        if len(text) > MAX_INSTANCE_CHARS:
            raise OutputSchemaError(
                f"the answer is too large to check ({len(text)} characters, at most {MAX_INSTANCE_CHARS})"
            )
        try:
            value = json_limits.loads(text)
        except json_limits.JsonLimitError as error:
            raise OutputSchemaError(f"the answer cannot be checked: {error}") from error
        except json.JSONDecodeError as error:
            raise OutputSchemaError(f"the answer is not JSON: {error}") from error
        if not isinstance(value, dict):
            raise OutputSchemaError("the answer is not a JSON object")
        if fmt.type == "json_schema" and fmt.json_schema is not None:
            try:  # never fetches: only references inside the schema resolve (`json_schemas`)
                error = best_error(safe_validator(fmt.json_schema), value, value_chars=len(text))
            except SchemaRefusedError as refused:
                raise OutputSchemaError(f"the answer cannot be checked against the schema: {refused}") from refused
            if error is not None:
                where = "/".join(str(part) for part in error.absolute_path) or "(root)"
                raise OutputSchemaError(f"the answer does not match the schema at {where}: {error.message}")
        return value


def check_output_schema(schema: dict[str, Any]) -> None:
    """Raise a ValueError when `schema` is not a usable JSON schema with an object root (before a run starts): invalid,
    too large or deep, or referring to anything outside itself (`json_schemas.check_schema`)."""
    from .json_schemas import check_schema as check_json_schema  # deferred, as in `parse_output`

    check_json_schema(schema)
    ResponseFormat.from_json_schema(schema)  # the object root check


__all__ = ["OutputSchemaError", "RunOverrides", "check_output_schema"]
