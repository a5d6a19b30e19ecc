"""`OpenAIChatClient`: the `ModelClient` on the official openai SDK, for OpenAI, Azure OpenAI and any
OpenAI-compatible endpoint (including our scripted server).

Retries: the SDK is built with `max_retries=0` by default, so a failure surfaces at once as a classified
`ModelError` and the retry decision is ours (`RetryPolicy` in the chat retry middleware, or the durable layer's
activity retry). Two stacked retry loops would multiply attempts and hide waits from middleware and accounting.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from .. import redaction
from ..messages import ChatResponse, ChatResponseUpdate, FunctionCallContent, TextContent, Usage
from ..spend import estimated_usage
from .errors import ModelError, classify_error
from .openai_wire import (
    MaxTokensParameter,
    StreamTranslator,
    from_openai_completion,
    to_openai_arguments,
    to_usage,
)
from .types import ChatRequest

AZURE_OPENAI_SCOPE = "https://cognitiveservices.azure.com/.default"
DEFAULT_TIMEOUT_S = 120.0
TokenProvider = Callable[[], "str | Awaitable[str]"]
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


class OpenAIChatClient:
    """Chat completions through an `openai.AsyncOpenAI` (or `AsyncAzureOpenAI`) client.

    Build it with `OpenAIChatClient.openai(...)`, `.azure(...)` or `.compatible(...)`, or wrap a client you made.
    `model` is the default model (on Azure: the deployment name); `ChatOptions.model` overrides it per call.
    Its connection pool belongs to the event loop that first uses it: one client per loop; `aclose()` at shutdown.
    """

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        *,
        model: str | None = None,
        provider: str = "openai",
        max_tokens_parameter: MaxTokensParameter = "max_tokens",
        stream_usage: bool = True,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self.client = client
        self.model = model
        self.provider = provider
        self.max_tokens_parameter: MaxTokensParameter = max_tokens_parameter
        self.stream_usage = stream_usage
        self._secrets = secrets
        for secret in secrets:  # masked in everything that leaves the process (errors, spans, logs, metrics)
            redaction.remember_secret(secret)
        self._owned_credential: Any = None  # a credential this client created, closed by aclose()

    def __repr__(self) -> str:  # never show keys
        base_url = str(self.client.base_url)
        return f"OpenAIChatClient(provider={self.provider!r}, model={self.model!r}, base_url={base_url!r})"

    # ------------------------------------------------------------------ constructors

    @classmethod
    def openai(
        cls,
        *,
        api_key: str,
        model: str,
        base_url: str | None = None,
        organization: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = 0,
        **client_options: Any,
    ) -> OpenAIChatClient:
        client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            organization=organization,
            timeout=timeout,
            max_retries=max_retries,
            **client_options,
        )
        return cls(
            client, model=model, provider="openai", max_tokens_parameter="max_completion_tokens", secrets=(api_key,)
        )

    @classmethod
    def compatible(
        cls,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = 0,
        **client_options: Any,
    ) -> OpenAIChatClient:
        """Any OpenAI-compatible chat-completions endpoint (vLLM, Ollama, LiteLLM, our scripted server, ...)."""
        # Many local servers need no key, but the SDK insists on one: send a placeholder.
        key = api_key or "not-needed"
        client = openai.AsyncOpenAI(
            api_key=key, base_url=base_url, timeout=timeout, max_retries=max_retries, **client_options
        )
        return cls(client, model=model, provider="compatible", secrets=(api_key,) if api_key else ())

    @classmethod
    def azure(
        cls,
        *,
        endpoint: str,
        deployment: str,
        api_version: str,
        api_key: str | None = None,
        token_provider: TokenProvider | None = None,
        credential: Any = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = 0,
        **client_options: Any,
    ) -> OpenAIChatClient:
        """Azure OpenAI with an API key, or Entra ID: `token_provider` (a callable returning a bearer token), else a
        bearer-token provider over `credential` (an async azure-identity credential; default
        `azure.identity.aio.DefaultAzureCredential()`), scoped to Cognitive Services."""
        owned_credential = None
        if api_key is None and token_provider is None:
            if credential is None:
                from azure.identity.aio import DefaultAzureCredential

                credential = owned_credential = DefaultAzureCredential()
            token_provider = entra_token_provider(credential)
        client = openai.AsyncAzureOpenAI(
            azure_endpoint=endpoint,
            azure_deployment=deployment,
            api_version=api_version,
            api_key=api_key,
            azure_ad_token_provider=None if api_key else token_provider,
            timeout=timeout,
            max_retries=max_retries,
            **client_options,
        )
        chat_client = cls(
            client,
            model=deployment,
            provider="azure_openai",
            max_tokens_parameter="max_completion_tokens",
            secrets=(api_key,) if api_key else (),
        )
        chat_client._owned_credential = owned_credential
        return chat_client

    # ------------------------------------------------------------------ ModelClient

    async def get_response(self, request: ChatRequest) -> ChatResponse:
        kwargs = self._arguments(request)
        try:
            completion = await self._post_chat_completions(kwargs, stream=False)
        except (openai.OpenAIError, ValueError) as exc:
            raise self._error(exc) from exc
        try:
            response = from_openai_completion(completion)
        except ValueError as exc:  # an answer we cannot use (no choices), billed all the same
            raise self._error(exc, usage=to_usage(completion.usage)) from exc
        if response.usage is None:
            response.usage = _estimated(kwargs, response.messages[0].contents)
        return response

    async def get_streaming_response(self, request: ChatRequest) -> AsyncIterator[ChatResponseUpdate]:
        kwargs = self._arguments(request)
        if self.stream_usage:
            kwargs["stream_options"] = {"include_usage": True}
        translator = StreamTranslator()
        try:
            stream = await self._post_chat_completions(kwargs, stream=True)
        except (openai.OpenAIError, ValueError) as exc:
            raise self._error(exc) from exc
        reported: Usage | None = None
        contents: list[Any] = []
        try:
            async for data in stream:
                update = translator.translate(data)
                if update is not None:
                    if update.usage is not None:
                        reported = update.usage + reported
                    contents.extend(update.contents)
                    yield update
        except (openai.OpenAIError, ValueError) as exc:
            raise self._error(exc, usage=reported) from exc  # broken after the usage came: billed, so counted
        finally:
            await stream.close()
        if reported is None:  # the server sent none (or was not asked to): the answer's usage is estimated
            yield ChatResponseUpdate(usage=_estimated(kwargs, contents))

    async def aclose(self) -> None:
        await self.client.close()
        if self._owned_credential is not None:
            await self._owned_credential.close()

    # ------------------------------------------------------------------ helpers

    def _arguments(self, request: ChatRequest) -> dict[str, Any]:
        model = request.options.model or self.model
        if not model:
            raise ValueError("no model given: set ChatOptions.model or the client's default model (MODEL_NAME)")
        return to_openai_arguments(request, model=model, max_tokens_parameter=self.max_tokens_parameter)

    async def _post_chat_completions(self, arguments: dict[str, Any], *, stream: bool) -> Any:
        """POST the chat-completions body through the SDK's generic `post` (its auth, Azure deployment routing,
        timeouts, error classes and response parsing), not the typed `chat.completions.create`: our arguments are
        already wire JSON (`openai_wire`), and `create` re-walks every message against its TypedDicts on each call
        (about 8% of devhost's event loop under load) only to leave them unchanged."""
        body = {key: value for key, value in arguments.items() if key != "extra_body"}
        body.update(arguments.get("extra_body") or {})  # extra_body wins, as in the SDK
        if stream:
            body["stream"] = True
        return await self.client.post(
            "/chat/completions",
            body=body,
            cast_to=ChatCompletion,
            stream=stream,
            # Chunks come back as the SSE events' JSON (`object`: the SDK's `process_data` hands them over as they
            # are; its error events still raise), read by `StreamTranslator`.
            stream_cls=openai.AsyncStream[object],
        )

    def _error(self, exc: BaseException, *, usage: Usage | None = None) -> ModelError:
        error = classify_error(exc, provider=self.provider, secrets=self._secrets)
        error.usage = usage
        return error


def _estimated(arguments: dict[str, Any], answer: list[Any]) -> Usage:
    """The usage of a call answered without any: from the messages and tools sent, and the text and tool calls got
    back (the JSON around them counts too, as the provider's own framing tokens would)."""
    sent = len(_JSON.encode(arguments.get("messages") or [])) + len(_JSON.encode(arguments.get("tools") or []))
    got = 0
    named: set[str] = set()
    for content in answer:
        if isinstance(content, TextContent):
            got += len(content.text)
        elif isinstance(content, FunctionCallContent):
            # A streamed call comes in fragments, each carrying its name: the name is answered once.
            got += len(content.arguments_json()) + (0 if content.call_id in named else len(content.name))
            named.add(content.call_id)
    return estimated_usage(sent, got)


def entra_token_provider(credential: Any) -> TokenProvider:
    """A bearer-token provider for Azure OpenAI over an async azure-identity credential (it caches and refreshes
    tokens itself). Cannot be exercised without Azure; tests check the wiring with a fake credential."""
    from azure.identity.aio import get_bearer_token_provider

    return get_bearer_token_provider(credential, AZURE_OPENAI_SCOPE)
