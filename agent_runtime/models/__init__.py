"""Model clients: the request types, the `ModelClient` protocol, the openai-SDK client, errors and retry policy."""

from .errors import ModelError, ModelErrorInfo, classify_error, parse_retry_after
from .openai_client import AZURE_OPENAI_SCOPE, OpenAIChatClient, entra_token_provider
from .openai_wire import assemble_response
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
