"""The real app registers every activity its orchestrators call, under the name they call it by (Durable finds an
activity by name only: one missing from `function_app.py` would fail runs, not the app's start)."""

from __future__ import annotations

import importlib
import pkgutil

from e2e_settings import app_settings, running_app

import orchestrators
from activities.agent_run_steps import AGENT_RUN_ACTIVITIES
from durable_steps import Activity
from scripted_model import ScriptedModelServer


def called_by(module_name: str) -> set[str]:
    """The activities an orchestrator module calls: the declarations it imports (it names none by a string)."""
    module = importlib.import_module(module_name)
    return {value.name for value in vars(module).values() if isinstance(value, Activity)}


AGENT_RUN_MODULES = ("agent_run", "queue_wait", "workflow_ring")


def test_the_app_registers_every_activity_the_orchestrators_call(model_server: ScriptedModelServer) -> None:
    with running_app(app_settings(model_server.base_url, SESSION_STORE_PATH=":memory:"), "sqlite") as app:
        index = app.host.host.index
    registered = {function.name: function for function in index.activities()}
    every_module = [f"orchestrators.{module.name}" for module in pkgutil.iter_modules(orchestrators.__path__)]
    called = set().union(*(called_by(name) for name in every_module))

    # The agent run's orchestrator and the modules whose steps it yields from (the queue, the workflow ring).
    agent_run = set().union(*(called_by(f"orchestrators.{name}") for name in AGENT_RUN_MODULES))
    assert agent_run == {step.name for step in AGENT_RUN_ACTIVITIES}
    assert agent_run <= called <= set(registered), sorted(called - set(registered))
    assert {registered[name].trigger_param for name in called} == {"payload"}
    assert index.orchestrator("agent_run") is not None


def test_each_app_builds_its_services_under_its_own_settings(model_server: ScriptedModelServer) -> None:
    """This process imported the app's packages before any host (as this module and the unit tests do), so the hosts
    share `agent_runs.services` and its process-wide `RunServices`. CI saw a request reach an app as it stopped and
    build services under its settings, which the next app then used (the page offered its local principal picker on
    "Azure")."""
    from agent_runs.services import RunServices

    settings = app_settings(model_server.base_url, SESSION_STORE_PATH=":memory:", AUTH_MODE="easyauth")
    with running_app(settings, "sqlite"):
        pass
    RunServices.current()  # the late request: built under this process's own settings, not on Azure
    on_azure = {"WEBSITE_INSTANCE_ID": "0123456789abcdef", "WEBSITE_AUTH_ENABLED": "True", "SESSION_STORE": "sqlite"}
    with running_app({**settings, **on_azure}, "sqlite") as app:
        auth = app.http.get("/api/health").json()["auth"]
    assert auth == {"mode": "easyauth", "warning": None, "local_principal_picker": False}
