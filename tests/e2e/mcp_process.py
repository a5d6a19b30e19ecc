"""The test MCP server (`mcp_test_server.py`) as a child process on a free loopback port, and what it recorded.

`McpServerProcess.start()` waits until the port answers; `stop()` ends it (terminate, then kill); with
`supervise=True` a watcher starts it again on the same port whenever it dies (a server that crashes and is brought
back by its platform), so a client's retry can reach it again.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

SERVER_SCRIPT = Path(__file__).resolve().parent / "mcp_test_server.py"
START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class McpServerProcess:
    def __init__(
        self, state: Path, *, supervise: bool = False, json_response: bool = False, gzip: bool = False
    ) -> None:
        """`json_response`: the server answers requests with plain JSON bodies instead of SSE streams; `gzip`:
        compressed whenever the client accepts it."""
        self.state = state
        self.json_response = json_response
        self.gzip = gzip
        self.state.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.supervise = supervise
        self.starts = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> McpServerProcess:
        self._stopping.clear()
        self._spawn()
        if self.supervise and self._watcher is None:
            self._watcher = threading.Thread(target=self._watch, name="mcp-supervisor", daemon=True)
            self._watcher.start()
        return self

    def _spawn(self) -> None:
        with self._lock:
            self._process = subprocess.Popen(
                [sys.executable, str(SERVER_SCRIPT), "http", "--port", str(self.port), "--state", str(self.state),
                 *(["--json-response"] if self.json_response else []), *(["--gzip"] if self.gzip else [])],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self.starts += 1
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if self._process.poll() is not None and not self.supervise:
                    raise RuntimeError(f"the MCP test server exited with {self._process.returncode}") from None
                if time.monotonic() > deadline:
                    raise TimeoutError("the MCP test server did not start") from None
                time.sleep(0.05)  # waiting for another process to bind its port: nothing to wait on but the port

    def _watch(self) -> None:
        while not self._stopping.is_set():
            process = self._process
            if process is not None and process.poll() is not None and not self._stopping.is_set():
                self._spawn()
            self._stopping.wait(0.05)

    def stop(self) -> None:
        self._stopping.set()
        if self._watcher is not None:
            self._watcher.join(timeout=10)
            self._watcher = None
        with self._lock:
            process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)

    # ---------------------------------------------------------------------------------------------- what it saw

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        return server_calls(self.state, tool)

    def effects(self) -> dict[str, dict[str, Any]]:
        return server_effects(self.state)

    def show_tools(self, names: list[str]) -> None:
        (self.state / "tools.json").write_text(json.dumps(names))

    def crash_on_next_record(self, item: str = "") -> None:
        (self.state / "crash_once").write_text(item)


def server_calls(state: Path, tool: str | None = None) -> list[dict[str, Any]]:
    path = state / "calls.jsonl"
    if not path.exists():
        return []
    calls = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [c for c in calls if tool is None or c["tool"] == tool]


def server_effects(state: Path) -> dict[str, dict[str, Any]]:
    folder = state / "effects"
    if not folder.exists():
        return {}
    return {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))}
