"""The stream routes' query (the `Last-Event-ID` header, when sent, wins over `after`)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class StreamQuery(BaseModel):
    after: str | None = Field(default=None, description="resume after the event with this id")
    continuation_token: str | None = Field(default=None, description="start where this poll's token points")
