"""Optional MCP servers a run could not list, end to end: the app on devhost, the real test MCP server
(`mcp_test_server.py`) as the agent's required server, and a second, optional one that is unreachable (a free port
nothing listens on), hangs (a socket that accepts and never answers), answers garbage (a real HTTP server answering
what is not JSON-RPC) or lists its tools in more pages than the client reads (a second real MCP server).

Proves: the run goes on with the remaining tools (started by the run routes or by the OpenAI Responses API), and
its view (`GET /api/runs/{id}`) and record name each left-out server with a stable code and a redacted message
(before, only the host's log said so); a required server that cannot be listed still fails the run, its error naming
the server and the code.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2e_harness import InProcessApp
from mcp_process import McpServerProcess, free_port
from openai import OpenAI
from openai.types.responses import Response

from agent_runtime.mcp import McpServer
from agent_runtime.mcp.discovery import discover_tools
from agent_runtime.redaction import MIN_SECRET_PART_CHARS
from scripted_model import Reply, Script, ScriptedModelServer

API_KEY = "e2e-mcp-secret-4711"
URL_SECRET = "e2e-url-secret-8642"  # the optional server's URL carries it (`?code=`, as an Azure Functions key)
MCP_TOOLS = ["tools__echo", "record", "transfer", "fail", "picture"]


@pytest.fixture
def mcp_server(tmp_path: Path) -> Iterator[McpServerProcess]:
    server = McpServerProcess(tmp_path / "mcp-http").start()
    yield server
    server.stop()


class _Garbage(BaseHTTPRequestHandler):
    """Answers every request 200 `application/json` with a body that is not JSON, echoing the URL's secret (then
    `padding`)."""

    padding = ""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = f"{self.path} is not JSON{self.padding}".encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_DELETE = do_POST

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def unreachable() -> Iterator[str | None]:
    yield f"http://127.0.0.1:{free_port()}/mcp"


@contextmanager
def hanging() -> Iterator[str | None]:
    with socket.socket() as listener:  # the kernel accepts connections; nothing ever reads or answers them
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"


@contextmanager
def garbage(padding: str = "") -> Iterator[str | None]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Garbage", (_Garbage,), {"padding": padding}))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/mcp"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def paged(tmp_path: Path) -> Iterator[str | None]:
    """A real MCP server listing 120 tools one per page: past the 100 pages the client reads."""
    server = McpServerProcess(tmp_path / "mcp-paged")
    (server.state / "page_size").write_text("1")
    (server.state / "copies.json").write_text(json.dumps({"echo": 120}))
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@contextmanager
def unset() -> Iterator[str | None]:
    yield None  # the app setting naming its URL is missing


# A misbehaving server's error message: a line break and a new record, terminal escapes, a C1 line break.
FORGED = "no\r\n2026-11-29 12:00:00 ERROR forged record\x1b[31m\x85end"
ESCAPED = "no\\r\\n2026-11-29 12:00:00 ERROR forged record\\x1b[31m\\x85end"


@contextmanager
def forging(tmp_path: Path) -> Iterator[str | None]:
    """A real MCP server whose `tools/list` answers a JSON-RPC error with `FORGED` as its message."""
    server = McpServerProcess(tmp_path / "mcp-forging")
    (server.state / "errors.json").write_text(json.dumps({"tools/list": FORGED}))
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


SERVERS: dict[str, Callable[[Path], AbstractContextManager[str | None]]] = {
    "misconfigured": lambda _: unset(),
    "unreachable": lambda _: unreachable(),
    "timeout": lambda _: hanging(),
    "invalid_answer": lambda _: garbage(),
    "too_many_pages": paged,
}


@pytest.fixture
def app_of_kind(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], mcp_server: McpServerProcess, tmp_path: Path
) -> Callable[[str], AbstractContextManager[InProcessApp]]:
    """Starts the app whose `extra` server (`fixture_mcp_agents`) is of a kind (`SERVERS`), at a URL carrying a
    secret."""

    @contextmanager
    def start(kind: str) -> Iterator[InProcessApp]:
        with (SERVERS | {"forging": forging})[kind](tmp_path) as url:
            settings = {
                "AGENTS_PACKAGE": "fixture_mcp_agents",
                "WORKFLOWS_PACKAGE": "none",
                "E2E_MCP_URL": mcp_server.url,
                "E2E_MCP_KEY": API_KEY,
            }
            if url is not None:
                settings["E2E_MCP_EXTRA_URL"] = f"{url}?code={URL_SECRET}"
            with app_with(**settings) as app:
                yield app

    return start


def agent_for(kind: str, required: bool = False) -> str:
    """The agent whose `extra` server waits a second for a server that never answers, a minute for the others (a
    listing of 120 pages on a loaded machine takes more than a second)."""
    hasty = "hasty_" if kind == "timeout" else ""
    return f"mcp_{hasty}extra_required" if required else f"mcp_with_{hasty}extra"


def settled_view(app: InProcessApp, agent: str) -> dict[str, Any]:
    """The view of a run of `agent` (started by `POST /api/agents/{agent}/runs`) once it settled."""
    started = app.start(agent=agent, input="record an apple")
    app.settle()
    return app.view(started["run_id"])


@pytest.mark.parametrize("kind", list(SERVERS))
def test_an_optional_server_that_cannot_be_listed_is_named_in_the_run_view_with_why(
    app_of_kind: Callable[[str], AbstractContextManager[InProcessApp]],
    model: ScriptedModelServer,
    mcp_server: McpServerProcess,
    kind: str,
) -> None:
    """Before, the run went on without the server and only the host's log said so; now its view says which server
    was left out and why (a stable code, a redacted message), and the agent works with the remaining tools."""
    with app_of_kind(kind) as app:
        model.set_script(Script.of(Reply.call("record", {"item": "apple"}), "Done."))
        view = settled_view(app, agent_for(kind))
        record = app.store_call(lambda store: store.get_run(view["run_id"]))

    assert (view["status"], view["output"]["text"]) == ("completed", "Done."), view
    assert model.log.requests[0].tool_names == ["echo", *MCP_TOOLS]  # the required server's tools, nothing else
    assert [m["content"] for m in model.log.requests[1].messages if m["role"] == "tool"] == ["recorded apple"]
    assert [c["arguments"] for c in mcp_server.calls("record")] == [{"item": "apple"}]

    [skipped] = view["skipped_servers"]
    assert (skipped["server"], skipped["code"]) == ("extra", kind), skipped
    assert "MCP server 'extra'" in skipped["message"], skipped
    assert len(skipped["message"]) <= 300
    if kind == "invalid_answer":  # what the server wrote is told, its URL's secret masked
        assert "input_value=b'/mcp?code=*** is not JSON'" in skipped["message"], skipped
    assert view["skipped_tools"] == []
    assert record.skipped_servers == [skipped]
    shown = json.dumps(view)
    assert URL_SECRET not in shown and API_KEY not in shown


@pytest.mark.parametrize("kind", ["timeout", "invalid_answer"])
def test_a_required_server_that_cannot_be_listed_fails_the_run_naming_it_and_why(
    app_of_kind: Callable[[str], AbstractContextManager[InProcessApp]], model: ScriptedModelServer, kind: str
) -> None:
    with app_of_kind(kind) as app:
        model.set_script(Script.of("never asked"))
        view = settled_view(app, agent_for(kind, required=True))

    assert view["status"] == "failed", view
    assert view["error"]["code"] == "tool_discovery_failed"
    assert view["error"]["message"].startswith(f"MCP server 'extra' ({kind}): "), view["error"]
    if kind == "invalid_answer":  # what the server wrote is told, its URL's secret masked (before: shown)
        assert "input_value=b'/mcp?code=*** is not JSON'" in view["error"]["message"], view["error"]
    assert view["skipped_servers"] == [] and len(model.log) == 0
    assert URL_SECRET not in json.dumps(view)


def test_a_response_of_an_agent_with_a_skipped_server_keeps_the_official_shape(
    app_of_kind: Callable[[str], AbstractContextManager[InProcessApp]], model: ScriptedModelServer
) -> None:
    """The Responses API shows the same run: it completes with the remaining tools, its raw JSON validates strictly as
    the official `Response`, and the run's view names the skipped server."""
    with app_of_kind("unreachable") as app:
        model.set_script(Script.of(Reply.call("record", {"item": "fig"}), "Recorded."))
        http = httpx.Client(timeout=300, trust_env=False)
        with OpenAI(base_url=f"{app.host.base_url}/api/v1", api_key="unused", http_client=http, max_retries=0) as c:
            response = c.responses.create(model="mcp_with_extra", input="record a fig")
        raw = app.http.get(f"/api/v1/responses/{response.id}")
        view = app.view(response.id.removeprefix("resp_").split("_")[0])

    assert (response.status, response.output_text) == ("completed", "Recorded."), response
    assert [item.name for item in response.output if item.type == "mcp_call"] == ["record"]
    assert raw.status_code == 200, raw.text
    Response.model_validate(raw.json())
    assert [(s["server"], s["code"]) for s in view["skipped_servers"]] == [("extra", "unreachable")]


def test_a_servers_error_message_is_shown_escaped_in_the_run_view(
    app_of_kind: Callable[[str], AbstractContextManager[InProcessApp]], model: ScriptedModelServer
) -> None:
    """A server's JSON-RPC error message was stored in the run's record and shown by its view as the server wrote it,
    line breaks and terminal escapes included (and logged so: forged log lines). It is stored and shown escaped."""
    with app_of_kind("forging") as app:
        model.set_script(Script.of("Done."))
        skipping = settled_view(app, agent_for("forging"))
        failing = settled_view(app, agent_for("forging", required=True))
        record = app.store_call(lambda store: store.get_run(skipping["run_id"]))

    assert skipping["status"] == "completed", skipping
    [skipped] = skipping["skipped_servers"]
    assert (skipped["code"], record.skipped_servers) == ("invalid_answer", [skipped]), skipped
    assert failing["status"] == "failed" and failing["error"]["code"] == "tool_discovery_failed", failing
    for message in (skipped["message"], failing["error"]["message"]):
        assert f"refused listing its tools: {ESCAPED}" in message, message
        assert not re.search(r"[\x00-\x1f\x7f-\x9f]", message), message


async def test_a_secret_at_the_cut_of_a_quoted_answer_is_masked_whole(caplog: pytest.LogCaptureFixture) -> None:
    """The client's error quotes a long answer cut to its first and last characters: the URL's secret the server
    echoed was cut there, no longer recognised, and its start reached the skipped server's message and the log."""
    with garbage(padding=" " + "x" * 60) as url:
        server = McpServer(name="extra", url=f"{url}?code={URL_SECRET}", attempts=1, timeout_seconds=5, required=False)
        with caplog.at_level(logging.WARNING, logger="agent_runtime.mcp.discovery"):
            found = await discover_tools([server])

    [skipped] = found.skipped_servers
    assert skipped.code == "invalid_answer" and "input_value=b'/mcp?code=***...xxx" in skipped.message, skipped
    [logged] = [r.getMessage() for r in caplog.records if r.name == "agent_runtime.mcp.discovery"]
    for shown in (skipped.message, logged):
        assert URL_SECRET[:MIN_SECRET_PART_CHARS] not in shown


@pytest.mark.parametrize(
    ("written", "key"),
    [("Kz9%2Be2eQ%2Furl%2BSECRET%3D%3D", "Kz9+e2eQ/url+SECRET=="), ("Kz9+e2eQ-url+SECRET==", "Kz9 e2eQ-url SECRET==")],
    ids=["percent-encoded", "plus"],
)
async def test_a_url_secret_the_server_echoes_as_written_is_masked(
    written: str, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A key with `+`, `/` or `=` (base64) is written in the URL encoded, or its `+` read as a space: the URL's secret
    was known only decoded, and the server echoing the URL as written showed it whole in the skipped server's
    message, the run's record and the log."""
    with garbage() as url:
        server = McpServer(name="extra", url=f"{url}?code={written}", attempts=1, timeout_seconds=5, required=False)
        with caplog.at_level(logging.WARNING, logger="agent_runtime.mcp.discovery"):
            [skipped] = (await discover_tools([server])).skipped_servers

    [logged] = [r.getMessage() for r in caplog.records if r.name == "agent_runtime.mcp.discovery"]
    for shown in (skipped.message, logged):
        assert "input_value=b'/mcp?code=***" in shown, shown  # (a long one is cut: masked on both sides)
        assert "e2eQ" not in shown and key not in shown, shown


async def test_the_mcp_sdks_log_masks_a_secret_at_the_cut_of_the_answer_it_quotes(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The `mcp` SDK logs the client's error for an answer it cannot parse with its traceback, which quotes the answer
    cut to its first and last characters: the app's log redaction masked known secrets whole only, and the start of
    the URL's secret the server echoed (`code=e2e-url-secr...`) reached the host's log. The SDK's records are masked
    as quoted text."""
    from telemetry.log_redaction import install_log_redaction

    install_log_redaction()
    with garbage(padding=" " + "x" * 60) as url:
        monkeypatch.setenv("E2E_MCP_CUT_URL", f"{url}?code={URL_SECRET}")  # a setting: the secret is remembered
        server = McpServer(name="extra", url_setting="E2E_MCP_CUT_URL", attempts=1, timeout_seconds=5, required=False)
        with caplog.at_level(logging.ERROR, logger="mcp"):
            await discover_tools([server])

    records = [r for r in caplog.records if r.name.startswith("mcp.")]
    formatted = "\n".join(logging.Formatter().format(record) for record in records)
    assert "Error parsing JSON response" in formatted and "input_value=b'/mcp?code=***...xxx" in formatted, formatted
    assert URL_SECRET[:MIN_SECRET_PART_CHARS] not in formatted, formatted
