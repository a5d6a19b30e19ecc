"""Model clients: the request types, the `ModelClient` protocol, the openai-SDK client, errors and retry policy."""

from typing import TYPE_CHECKING

from ..lazy import lazy_getattr
from .errors import ModelError, ModelErrorInfo, classify_error, parse_retry_after
from .retry import NO_RETRY, RetryPolicy, call_with_retry
from .types import (
    ChatOptions,
    ChatRequest,
    ModelClient,
    NamedToolChoice,
    ResponseFormat,
    ToolChoice,
    ToolChoiceMode,
    ToolSpec,
)

if TYPE_CHECKING:
    from .openai_client import AZURE_OPENAI_SCOPE, OpenAIChatClient, entra_token_provider
    from .openai_wire import assemble_response

# The openai SDK under these is imported on first use, not when the package is (a cold start needs none of it).
_LAZY = {
    "AZURE_OPENAI_SCOPE": "openai_client",
    "OpenAIChatClient": "openai_client",
    "entra_token_provider": "openai_client",
    "assemble_response": "openai_wire",
}


__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = [
    "AZURE_OPENAI_SCOPE",
    "NO_RETRY",
    "ChatOptions",
    "ChatRequest",
    "ModelClient",
    "ModelError",
    "ModelErrorInfo",
    "NamedToolChoice",
    "OpenAIChatClient",
    "ResponseFormat",
    "RetryPolicy",
    "ToolChoice",
    "ToolChoiceMode",
    "ToolSpec",
    "assemble_response",
    "call_with_retry",
    "classify_error",
    "entra_token_provider",
    "parse_retry_after",
]
