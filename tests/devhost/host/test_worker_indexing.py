"""Apps Azure's Python worker refuses to index are refused by devhost with the worker's own message.

In-process mode (no worker package for this Python) applies the checks of Azure's worker for 3.11/3.12
(azure_functions_worker); the real-worker mode (3.13+, `azure-functions-runtime`) gets them from the library itself,
whose texts differ a little: each test names the text of each. What both say is asserted in both modes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from devhost.app_loader import AppLoadError, load_app
from devhost.testing import InProcessHost
from devhost.worker.pool import library_version

APPS = Path(__file__).resolve().parents[1] / "apps"

# app dir -> (the part both workers say, the 3.11/3.12 worker's full text, azure-functions-runtime's full text)
REFUSED = {
    "bad_annotation": (
        "FunctionLoadError: cannot load the bad function: ",
        "FunctionLoadError: cannot load the bad function: 'req' binding type \"httpTrigger\" and dataType \"None\" "
        "in function.json do not match the corresponding function parameter's Python type annotation \"int\"",
        "FunctionLoadError: cannot load the bad function: binding type \"'req'\" and dataType \"httpTrigger\" in "
        "the binding decorator do not match the corresponding function parameter's Python type annotation int",
    ),
    "bad_params": (
        "FunctionLoadError: cannot load the greet function: the following parameters are declared in Python but "
        "not in ",
        "FunctionLoadError: cannot load the greet function: the following parameters are declared in Python but "
        "not in function.json: {'greeting'}",
        "FunctionLoadError: cannot load the greet function: the following parameters are declared in Python but "
        "not in the function definition (function.json or function decorators):  {'greeting'}",
    ),
    "bad_return": (
        "FunctionLoadError: cannot load the named_output function: Python return annotation \"NoneType\" does not "
        "match binding type \"http\"",
    ) * 3,
}


@pytest.mark.parametrize("app", sorted(REFUSED))
def test_in_process_loading_refuses_what_the_worker_refuses(app: str) -> None:
    _common, worker_text, _runtime_text = REFUSED[app]
    with pytest.raises(AppLoadError) as caught:
        load_app(APPS / app)
    assert str(caught.value).endswith(worker_text)
    assert str(APPS / app / "function_app.py") in str(caught.value)


@pytest.mark.parametrize("app", sorted(REFUSED))
def test_in_process_host_refuses_to_start(app: str) -> None:
    """What both workers say: the real-worker mode checks the library's own texts (test_real_worker.py)."""
    common = REFUSED[app][0]
    with pytest.raises(AppLoadError, match=common.replace("(", r"\(")):
        InProcessHost(APPS / app, workers=0, worker="inprocess").start()


def test_the_accepted_twin_of_the_refused_function_is_served() -> None:
    """The valid function of an app is fine on its own: the refusal is about the annotation, not the app."""
    with InProcessHost(APPS / "http_basic", workers=0, worker="inprocess") as host:
        response = host.client.get("/api/out")
        assert (response.status_code, response.text) == (202, "from out binding")
        status = host.client.get("/admin/host/status").json()
        assert (status["state"], status["worker"]) == ("Running", "devhost-inprocess")


@pytest.mark.skipif(library_version() is not None, reason="the real worker is installed: that mode is the default")
def test_without_the_worker_library_devhost_says_it_runs_in_process(devhost_subprocess) -> None:  # type: ignore[no-untyped-def]
    host = devhost_subprocess(APPS / "http_basic")
    assert "devhost runs the functions in-process, after the Python worker's indexing checks" in host.output()
    assert host.client.get("/admin/host/status").json()["worker"] == "devhost-inprocess"
