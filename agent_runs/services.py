"""The per-process services of the app: settings, the session store, the agents, model clients, token signer.

Built lazily on first use and shared by every activity and HTTP handler of the process (one store and one Cosmos
client per process, as the SDKs recommend). Model clients are kept per event loop because their HTTP connection
pools belong to the loop that created them. With no model credentials configured the offline demo brain is started
in-process (a scripted OpenAI-compatible server on a free loopback port), so the app runs with no account at all.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
from functools import cached_property
from typing import Any

from agent_runs.conversation_cache import ConversationCache
from agent_runs.deployment import DeploymentConfigurationError, DeploymentReport, DeploymentSettings, assess
from agent_runs.settings import RunSettings
from agent_runtime.agents import AgentRegistry
from agent_runtime.continuation import ContinuationTokens
from agent_runtime.models.retrying import RetryingModelClient
from agent_runtime.models.types import ModelClient
from agent_runtime.settings import ModelSettings, build_model_client
from agent_runtime.spend import ModelPrices
from session_store import SessionStore, StoreSettings, open_store
from telemetry.settings import TelemetrySettings

log = logging.getLogger(__name__)


class RunServices:
    _instance: RunServices | None = None
    _instance_lock = threading.Lock()

    def __init__(
        self,
        *,
        run_settings: RunSettings | None = None,
        model_settings: ModelSettings | None = None,
        store_settings: StoreSettings | None = None,
        deployment_settings: DeploymentSettings | None = None,
    ) -> None:
        self.run_settings = run_settings or RunSettings()
        self.model_settings = model_settings or ModelSettings()
        self.store_settings = store_settings or StoreSettings()
        self.deployment_settings = deployment_settings or DeploymentSettings()
        self._lock = threading.Lock()
        self._model_clients: dict[asyncio.AbstractEventLoop, ModelClient] = {}
        self._demo_server: Any = None

    # ------------------------------------------------------------------------------------------------ singleton

    @classmethod
    def current(cls) -> RunServices:
        with cls._instance_lock:
            if cls._instance is None:
                services = cls()
                services.check_deployment()  # on Azure, refuse laptop-only settings before serving anything
                cls._instance = services
            return cls._instance

    @classmethod
    def reset(cls) -> None:
        """Drop the process's services (tests that change settings between apps); closes what was opened."""
        with cls._instance_lock:
            instance, cls._instance = cls._instance, None
        if instance is not None:
            instance.close()

    # ------------------------------------------------------------------------------------------------ services

    @cached_property
    def deployment(self) -> DeploymentReport:
        return assess(
            deployment=self.deployment_settings,
            store=self.store_settings,
            model=self.model_settings,
            run=self.run_settings,
        )

    def check_deployment(self) -> DeploymentReport:
        """The report, or `DeploymentConfigurationError` naming the settings to fix (production guards)."""
        report = self.deployment
        if report.errors:
            raise DeploymentConfigurationError(report)
        return report

    @cached_property
    def store(self) -> SessionStore:
        self.check_deployment()
        return open_store(self.store_settings)

    @cached_property
    def conversations(self) -> ConversationCache:
        """What this process's steps read and wrote of their runs' conversations (one store per process, so one
        cache: see `conversation_cache`)."""
        return ConversationCache()

    @cached_property
    def agents(self) -> AgentRegistry:
        return AgentRegistry.from_package(self.run_settings.agents_package)

    @cached_property
    def telemetry_settings(self) -> TelemetrySettings:
        """Read once per process, like the rest: model calls consult it on every call."""
        return TelemetrySettings()

    @cached_property
    def model_prices(self) -> ModelPrices:
        """`MODEL_PRICES`, parsed once (the settings are read once per process) instead of on every model call."""
        return self.model_settings.prices()

    @cached_property
    def tokens(self) -> ContinuationTokens:
        return ContinuationTokens(
            self.run_settings.token_secrets(on_azure=self.deployment_settings.on_azure),
            ttl_seconds=self.run_settings.continuation_token_ttl_seconds,
        )

    def model_client(self) -> ModelClient:
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._model_clients.get(loop)
            if client is None:
                self.check_deployment()  # never the demo model in production by accident
                scripted_url = self._demo_base_url() if self._needs_demo_server() else None
                inner = build_model_client(self.model_settings, scripted_base_url=scripted_url)
                client = RetryingModelClient(inner, self.model_settings.retry_policy())
                self._model_clients[loop] = client
            return client

    def _needs_demo_server(self) -> bool:
        settings = self.model_settings
        return settings.resolved_provider == "scripted" and not settings.scripted_model_url

    def _demo_base_url(self) -> str:
        if self._demo_server is None:
            from scripted_model.demo import start_demo_server  # only the offline demo needs the server code

            self._demo_server = start_demo_server()
            atexit.register(self._demo_server.stop)
            log.warning("No model configured: using the offline demo model at %s", self._demo_server.base_url)
        return str(self._demo_server.base_url)

    def close(self) -> None:
        """Close the model clients, the store and the demo server. Callable from sync code, with or without a
        running loop."""
        self._close_model_clients()
        store = self.__dict__.pop("store", None)
        if store is not None:
            # A thread of its own: asyncio.run cannot nest inside a caller's running loop.
            closer = threading.Thread(target=asyncio.run, args=(store.close(),), name="close-store")
            closer.start()
            closer.join(timeout=30)
        if self._demo_server is not None:
            self._demo_server.stop()
            self._demo_server = None

    def _close_model_clients(self) -> None:
        """Close each model client on the loop that owns its connection pool (left to the garbage collector, the
        pool's close runs after that loop has closed and fails)."""
        with self._lock:
            clients, self._model_clients = self._model_clients, {}
        for loop, client in clients.items():
            aclose = getattr(client, "aclose", None) or getattr(getattr(client, "inner", None), "aclose", None)
            if aclose is None or loop.is_closed() or not loop.is_running():
                continue
            closing = asyncio.run_coroutine_threadsafe(aclose(), loop)
            if _on_loop(loop):
                continue  # waiting from the loop's own thread would deadlock; the close runs right after us
            try:
                closing.result(timeout=10)
            except Exception:  # closing is best effort: a pool that cannot close cleanly is gone with its loop
                log.warning("A model client did not close cleanly", exc_info=True)


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
