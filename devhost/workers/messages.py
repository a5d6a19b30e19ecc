"""The host <-> worker wire: length-prefixed JSON frames over a loopback TCP connection.

One connection per worker process, multiplexed: the host sends calls tagged with an id, the worker answers each
when it is done, in any order (async activities of one worker interleave, as in the Python worker).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, TypeAdapter, field_serializer

from devhost.http.conversion import HttpRequestData, HttpResponseData
from devhost.invoke import ActivityOutcome
from devhost.protocol.actions import OrchestratorOutput
from devhost.protocol.entity_messages import BatchResult

_HEADER_BYTES = 4
MAX_FRAME_BYTES = 256 * 1024 * 1024  # far above any payload Durable or HTTP allow; a guard against a corrupt stream


class _Frame(BaseModel):
    model_config = ConfigDict(frozen=True)


class Hello(_Frame):
    """The worker's first frame: its own token, which proves this host started it and says which worker it is."""

    type: Literal["hello"] = "hello"
    token: str


class ActivityCall(_Frame):
    type: Literal["activity"] = "activity"
    id: int
    function: str
    input: str | None
    client_binding: str | None = None  # the `durableClient` binding's JSON, for an activity that takes one


class HttpCall(_Frame):
    type: Literal["http"] = "http"
    id: int
    function: str
    request: HttpRequestData
    client_binding: str | None


class OrchestratorCall(_Frame):
    """One orchestrator episode: the trigger JSON the extension would send."""

    type: Literal["orchestrator"] = "orchestrator"
    id: int
    function: str
    trigger: str


class OrchestratorDone(_Frame):
    type: Literal["orchestrator_done"] = "orchestrator_done"
    id: int
    output: OrchestratorOutput

    @field_serializer("output", mode="wrap")
    def _without_action_texts(self, output: OrchestratorOutput, serialize: SerializerFunctionWrapHandler) -> Any:
        """The SDK's action JSON serves only the next episode's parse in the same process (the worker parsed these);
        sent along it would double the frame (and count against `MAX_FRAME_BYTES`) for nothing."""
        return serialize(dataclasses.replace(output, action_texts=[]))


class EntityCall(_Frame):
    """One entity batch: the trigger JSON and how many operations it holds."""

    type: Literal["entity"] = "entity"
    id: int
    function: str
    batch: str
    size: int


class EntityDone(_Frame):
    """`result`, or `internal_error` where the extension aborts the batch (and redelivers it)."""

    type: Literal["entity_done"] = "entity_done"
    id: int
    result: BatchResult | None = None
    internal_error: str | None = None


class ActivityDone(_Frame):
    type: Literal["activity_done"] = "activity_done"
    id: int
    outcome: ActivityOutcome


class HttpDone(_Frame):
    """`response`, or `error` ("{Type}: {message}") when the function failed."""

    type: Literal["http_done"] = "http_done"
    id: int
    response: HttpResponseData | None = None
    error: str | None = None


Frame = Annotated[Hello | ActivityCall | HttpCall | OrchestratorCall | EntityCall | ActivityDone | HttpDone
                  | OrchestratorDone | EntityDone, Field(discriminator="type")]
_FRAME = TypeAdapter(Frame)


class FrameError(Exception):
    """The peer sent something that is not a frame of this protocol."""


def encode_frame(frame: _Frame) -> bytes:
    body = frame.model_dump_json().encode("utf-8")
    return len(body).to_bytes(_HEADER_BYTES, "big") + body


async def read_frame(reader: asyncio.StreamReader) -> Frame | None:
    """The next frame, or None when the peer closed the connection."""
    try:
        size = int.from_bytes(await reader.readexactly(_HEADER_BYTES), "big")
        if size > MAX_FRAME_BYTES:
            raise FrameError(f"frame of {size} bytes exceeds {MAX_FRAME_BYTES}")
        body = await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    try:
        return _FRAME.validate_json(body)
    except ValueError as exc:
        raise FrameError(f"invalid frame: {exc}") from exc
