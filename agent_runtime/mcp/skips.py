"""What a run records of the optional MCP servers its discovery left out: which server, a stable code, a short message.

Kept apart from the SDK (no `mcp` import) so the run's view reads it without loading the client. The message is
the error as logged, redacted by discovery (known secrets, credential-shaped text and the URL credentials of the
server: a server's protocol error quotes whatever the server wrote), its control characters escaped (`peer_text`), and
cut.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

SkipCode = Literal[
    "unreachable", "timeout", "invalid_answer", "too_many_pages", "too_many_tools", "no_usable_tools", "misconfigured"
]
"""Why a server was left out: no connection on any attempt (`unreachable`), no answer in `timeout_seconds`
(`timeout`), a protocol error or an answer the client could not use (`invalid_answer`), a listing past the page limit
(`too_many_pages`), more allowed tools than a run offers (`too_many_tools`), every allowed tool left out for its input
schema (`no_usable_tools`), a missing app setting or credential (`misconfigured`)."""

MAX_SKIP_MESSAGE_CHARS = 300


class SkippedServer(BaseModel):
    """An optional MCP server whose tools the run does not offer: it could not be listed (`code`, `message`)."""

    server: str
    code: SkipCode
    message: str = Field(description="why, as logged: redacted, control characters escaped, cut to 300 characters")

