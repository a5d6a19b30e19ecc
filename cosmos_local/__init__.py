"""The local Cosmos DB server for tests and offline use: ``@vercel/cosmosdb-server`` plus ``compat.js``.

``start_local_cosmos()`` starts ``node cosmos_local/launcher.js`` on 127.0.0.1 and a free port and returns a
``LocalCosmos`` (endpoint, key, pid); ``stop()`` ends it by PID. The launcher also exits when its stdin closes, so
a test process that dies does not leave it behind. Needs Node >= 20 and ``npm ci`` in the repository root.
It is a behaviour fake (see docs/local-cosmos.md): never use it to judge RU cost, indexing or speed.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = Path(__file__).resolve().parent / "launcher.js"
READY_PREFIX = "COSMOS_LOCAL_READY "
# The well-known public emulator key: the server ignores auth, but the SDK needs a valid base64 key to sign with.
EMULATOR_KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="


class LocalCosmosError(RuntimeError):
    """The local server could not be started."""


@dataclass
class LocalCosmos:
    endpoint: str
    key: str
    pid: int
    _process: subprocess.Popen[str] = field(repr=False)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the server (close its stdin, then SIGTERM, then SIGKILL) and reap it."""
        process = self._process
        for step in (self._close_stdin, process.terminate, process.kill):
            if process.poll() is not None:
                break
            step()
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                continue
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None and not pipe.closed:
                pipe.close()

    def environment(self, database: str = "agents") -> dict[str, str]:
        """The app settings that select this server (for a devhost or app process started by a test)."""
        return {"COSMOS_ENDPOINT": self.endpoint, "COSMOS_KEY": self.key, "COSMOS_DATABASE": database}

    def _close_stdin(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()

    def __enter__(self) -> LocalCosmos:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def start_local_cosmos(*, port: int = 0, startup_timeout: float = 20.0) -> LocalCosmos:
    """Start the server and wait (bounded) for its ready line."""
    node = shutil.which("node")
    if node is None:
        raise LocalCosmosError("node is not on PATH (Node >= 20 is needed for the local Cosmos server)")
    if not (ROOT / "node_modules" / "@vercel" / "cosmosdb-server").is_dir():
        raise LocalCosmosError(f"@vercel/cosmosdb-server is not installed: run `npm ci` in {ROOT}")
    process = subprocess.Popen(
        [node, str(LAUNCHER), "--port", str(port)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NODE_NO_WARNINGS": "1"},
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(startup_timeout)
    line = lines[0].strip() if lines else ""
    if not line.startswith(READY_PREFIX):
        process.kill()
        _, stderr = process.communicate(timeout=5)
        raise LocalCosmosError(f"local Cosmos did not start within {startup_timeout}s: {line or stderr.strip()}")
    # Drain stderr in the background so a chatty server can never block on a full pipe.
    threading.Thread(target=process.stderr.read, daemon=True).start()
    return LocalCosmos(endpoint=line[len(READY_PREFIX) :], key=EMULATOR_KEY, pid=process.pid, _process=process)


def _control(endpoint: str, method: str, path: str, body: dict | None = None) -> dict:
    # The bundled certificate is self-signed (and expired): loopback only, never used for a real account.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(endpoint.rstrip("/") + path, data=data, method=method)
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        return json.loads(response.read())


def advance_clock(endpoint: str, seconds: float) -> None:
    """Move the local server's clock forward (TTL expiry without waiting). Not a Cosmos API: local server only."""
    _control(endpoint, "POST", "/_compat/clock", {"advanceSeconds": seconds})


def server_info(endpoint: str) -> dict:
    """The package name and version the local server runs, and its clock offset."""
    return _control(endpoint, "GET", "/_compat/info")


def main() -> None:
    """``python -m cosmos_local``: run a local Cosmos until Ctrl-C (for trying the app without an account)."""
    server = start_local_cosmos(port=int(os.environ.get("COSMOS_LOCAL_PORT", "0")))
    print(f"COSMOS_ENDPOINT={server.endpoint}\nCOSMOS_KEY={server.key}\n(Ctrl-C to stop; data lives in memory)")
    try:
        while server._process.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
