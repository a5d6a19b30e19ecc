"""Model settings from environment variables and the client factory."""

from __future__ import annotations

import openai
import pytest

from agent_runtime import settings as settings_module
from agent_runtime.messages import Message
from agent_runtime.models import ChatRequest, RetryPolicy
from agent_runtime.models import openai_client as openai_client_module
from agent_runtime.settings import ModelConfigurationError, ModelSettings, build_model_client
from scripted_model import Script

VARIABLES = [
    "MODEL_PROVIDER", "MODEL_NAME", "OPENAI_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID",
    "AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_DEPLOYMENT", "AZURE_OPENAI_API_VERSION", "AZURE_OPENAI_API_KEY",
    "SCRIPTED_MODEL_URL", "MODEL_TIMEOUT_SECONDS", "MODEL_RETRY_MAX_ATTEMPTS", "MODEL_RETRY_INITIAL_DELAY",
    "MODEL_RETRY_MAX_DELAY", "MODEL_RETRY_MAX_RETRY_AFTER", "OPENAI_API_VERSION",
]  # fmt: skip
REQUEST = ChatRequest(messages=[Message.user("hi")])


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("env", "provider"),
    [
        ({}, "scripted"),
        ({"OPENAI_API_KEY": "sk-x"}, "openai"),
        ({"OPENAI_BASE_URL": "http://localhost:11434/v1"}, "compatible"),
        ({"OPENAI_API_KEY": "sk-x", "AZURE_OPENAI_ENDPOINT": "https://r.openai.azure.com"}, "azure_openai"),
        ({"MODEL_PROVIDER": "openai", "AZURE_OPENAI_ENDPOINT": "https://r.openai.azure.com"}, "openai"),
        ({"AZURE_OPENAI_ENDPOINT": "", "OPENAI_API_KEY": ""}, "scripted"),  # empty values count as unset
    ],
)
def test_auto_provider_follows_what_is_configured(clean_env, env, provider):
    for name, value in env.items():
        clean_env.setenv(name, value)
    assert ModelSettings().resolved_provider == provider


def test_secrets_never_show_in_settings_or_clients(clean_env):
    clean_env.setenv("OPENAI_API_KEY", "sk-very-secret-value")
    settings = ModelSettings()
    client = build_model_client(settings)
    assert "sk-very-secret-value" not in repr(settings) + str(settings) + repr(client)
    assert isinstance(client.client, openai.AsyncOpenAI) and client.model == "gpt-4o-mini"
    assert str(client.client.base_url) == "https://api.openai.com/v1/"


@pytest.mark.parametrize(
    ("env", "missing"),
    [
        ({"MODEL_PROVIDER": "openai"}, "OPENAI_API_KEY"),
        ({"MODEL_PROVIDER": "azure_openai"}, "AZURE_OPENAI_ENDPOINT"),
        ({"MODEL_PROVIDER": "compatible"}, "OPENAI_BASE_URL"),
        ({"MODEL_PROVIDER": "scripted"}, "SCRIPTED_MODEL_URL"),
    ],
)
def test_incomplete_settings_name_the_missing_variable(clean_env, env, missing):
    for name, value in env.items():
        clean_env.setenv(name, value)
    with pytest.raises(ModelConfigurationError, match=missing):
        build_model_client()


async def test_compatible_endpoint_from_env_reaches_the_server(clean_env, scripted_model):
    clean_env.setenv("OPENAI_BASE_URL", scripted_model.base_url)
    clean_env.setenv("MODEL_NAME", "llama3")
    scripted_model.set_script(Script.of("compatible ok"))
    client = build_model_client()
    try:
        assert (await client.get_response(REQUEST)).text == "compatible ok"
    finally:
        await client.aclose()
    assert scripted_model.log.last.body["model"] == "llama3"


async def test_scripted_provider_uses_the_server_the_app_started(scripted_model):
    scripted_model.set_script(Script.of("demo"))
    client = build_model_client(ModelSettings(), scripted_base_url=scripted_model.base_url)
    try:
        assert (await client.get_response(REQUEST)).text == "demo"
    finally:
        await client.aclose()
    assert client.provider == "scripted" and scripted_model.log.last.body["model"] == "scripted-model"


async def test_azure_without_a_key_uses_entra_id(clean_env, scripted_model):
    """Entra ID itself cannot run here: the token provider is replaced by a fake; the wiring from settings is real."""
    asked: list[object] = []

    def fake_entra_token_provider(credential):
        asked.append(credential)
        return lambda: "entra-token"

    clean_env.setattr(openai_client_module, "entra_token_provider", fake_entra_token_provider)
    clean_env.setenv("AZURE_OPENAI_ENDPOINT", scripted_model.url)
    clean_env.setenv("AZURE_OPENAI_DEPLOYMENT", "prod-dep")
    scripted_model.set_script(Script.of("azure ok"))
    client = build_model_client()
    try:
        assert (await client.get_response(REQUEST)).text == "azure ok"
    finally:
        await client.aclose()
    entry = scripted_model.log.last
    assert [type(c).__name__ for c in asked] == ["DefaultAzureCredential"]  # the default credential
    assert entry.path == "/openai/deployments/prod-dep/chat/completions"
    assert entry.query["api-version"] == "2024-10-21" and entry.headers["authorization"] == "Bearer entra-token"


def test_retry_policy_from_env(clean_env):
    clean_env.setenv("MODEL_RETRY_MAX_ATTEMPTS", "6")
    clean_env.setenv("MODEL_RETRY_MAX_RETRY_AFTER", "5")
    policy = ModelSettings().retry_policy()
    assert isinstance(policy, RetryPolicy) and (policy.max_attempts, policy.max_retry_after) == (6, 5)
    assert settings_module.SCRIPTED_MODEL_NAME == "scripted-model"
