"""Azure OpenAI through the real `AsyncAzureOpenAI` client against the scripted server's Azure route.

Entra ID cannot be exercised here (no Azure): the credential is a fake object with azure-identity's async
`get_token` interface. Everything else is real: azure-identity's bearer-token provider, the openai SDK's Azure client
and the HTTP request the scripted server receives.
"""

from __future__ import annotations

from azure.core.credentials import AccessToken

from agent_runtime.messages import Message
from agent_runtime.models import AZURE_OPENAI_SCOPE, ChatOptions, ChatRequest, OpenAIChatClient
from scripted_model import Script

API_VERSION = "2024-10-21"
REQUEST = ChatRequest(messages=[Message.user("hi")], options=ChatOptions(max_tokens=20))


class FakeAzureCredential:
    """Mocks Azure (Entra ID cannot be reached from here): hands out a fixed token and records the scopes asked."""

    def __init__(self) -> None:
        self.scopes: list[tuple[str, ...]] = []

    async def get_token(self, *scopes: str, **kwargs: object) -> AccessToken:
        self.scopes.append(scopes)
        return AccessToken("fake-entra-token", 4_102_444_800)  # expires in 2100: fetched once, then cached

    async def close(self) -> None:
        pass


async def test_api_key_auth_uses_the_deployment_route(scripted_model):
    scripted_model.set_script(Script.of("hello from azure"))
    client = OpenAIChatClient.azure(
        endpoint=scripted_model.url, deployment="gpt-4o-prod", api_version=API_VERSION, api_key="azure-key-123"
    )
    try:
        response = await client.get_response(REQUEST)
    finally:
        await client.aclose()
    entry = scripted_model.log.last
    assert response.text == "hello from azure"
    assert entry.path == "/openai/deployments/gpt-4o-prod/chat/completions"
    assert entry.query == {"api-version": API_VERSION}
    assert entry.headers["api-key"] == "azure-key-123" and "authorization" not in entry.headers
    assert entry.body["model"] == "gpt-4o-prod" and entry.body["max_completion_tokens"] == 20
    assert "azure-key-123" not in repr(client)


async def test_entra_id_sends_a_bearer_token_from_the_credential(scripted_model):
    scripted_model.set_script(Script.of("one", "two"))
    credential = FakeAzureCredential()
    client = OpenAIChatClient.azure(
        endpoint=scripted_model.url, deployment="dep", api_version=API_VERSION, credential=credential
    )
    try:
        await client.get_response(REQUEST)
        await client.get_response(REQUEST)
    finally:
        await client.aclose()
    assert [r.headers["authorization"] for r in scripted_model.log.requests] == ["Bearer fake-entra-token"] * 2
    assert all("api-key" not in r.headers for r in scripted_model.log.requests)
    assert credential.scopes == [(AZURE_OPENAI_SCOPE,)]  # the provider caches the token across calls


async def test_an_explicit_token_provider_is_used_as_is(scripted_model):
    scripted_model.set_script(Script.of("ok"))
    client = OpenAIChatClient.azure(
        endpoint=scripted_model.url, deployment="dep", api_version=API_VERSION, token_provider=lambda: "static-token"
    )
    try:
        await client.get_response(REQUEST)
    finally:
        await client.aclose()
    assert scripted_model.log.last.headers["authorization"] == "Bearer static-token"
