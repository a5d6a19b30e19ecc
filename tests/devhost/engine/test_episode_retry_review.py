"""An aborted orchestrator episode (functionTimeout) is redelivered after its back-off even while other work runs.

Real parts: the real SDK through devhost, real HTTP, the real clock (an aborted work item's back-off is wall-clock
on Azure, as functionTimeout is everywhere: this test waits about 2 s of it).
"""

from __future__ import annotations

import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from devhost.testing import InProcessHost

APPS = Path(__file__).resolve().parent.parent / "apps"
WEBHOOK = "/runtime/webhooks/durabletask/orchestrators/"


@pytest.fixture
def held_server() -> Iterator[tuple[str, threading.Event, threading.Event]]:
    """A URL whose GET answers only once `release` is set; `arrived` is set when a request comes in."""
    arrived, release = threading.Event(), threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            arrived.set()
            release.wait(30)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/held", arrived, release
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        thread.join()


def test_an_aborted_episode_is_retried_while_an_unrelated_http_call_is_in_flight(
    tmp_path: Path, held_server: tuple[str, threading.Event, threading.Event]
) -> None:
    url, arrived, release = held_server
    app_dir = tmp_path / "host_settings"
    shutil.copytree(APPS / "host_settings", app_dir)
    (app_dir / "host.json").write_text(json.dumps({"version": "2.0", "functionTimeout": "00:00:01"}))
    # (in-process: `hangs_once` counts its calls in the process, and a real worker is restarted on the timeout)
    with InProcessHost(app_dir, clock="real", env={"HANG_SECONDS": "1.5"}, worker="inprocess") as host:
        # A call_http in flight (an engine task functionTimeout does not bound) until the test releases it.
        fetching = host.client.post(WEBHOOK + "fetch_url", json=json.dumps(url)).json()["id"]
        assert arrived.wait(15)
        # The first episode of this one hangs past functionTimeout: aborted and redelivered after a 1 s back-off.
        stuck = host.client.post(WEBHOOK + "hangs_once").json()["id"]
        try:
            # The redelivery must not wait for the unrelated HTTP call to end.
            assert host.wait_for_status(stuck, timeout=15)["output"] == "after the hang"
        finally:
            release.set()
        assert host.wait_for_status(fetching)["output"] == 200
