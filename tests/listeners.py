"""Real listener sockets on 127.0.0.1 for tests that prove the app contacts nothing it is pointed at.

`RecordingServer` answers every GET with a JSON document (a schema a `$ref` could fetch) and records each request;
`SilentServer` accepts connections and never answers (a fetch from it would hang forever) and counts them. Both are
context managers that stop their own thread and socket.
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# What a fetched document would say: if this text ever shows up, the document was fetched.
FETCHED_MARKER = "fetched-document-7d1c"


class RecordingServer:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        recorded = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                recorded.append({"path": self.path, "headers": dict(self.headers)})
                body = json.dumps({"type": "string", "title": FETCHED_MARKER, "const": FETCHED_MARKER}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/schema+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="recording-server", daemon=True)

    def url(self, path: str = "/schema.json") -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{path}"

    def __enter__(self) -> RecordingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


class SilentServer:
    """Accepts TCP connections and never sends a byte."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="silent-server", daemon=True)

    @property
    def accepted(self) -> int:
        return len(self._held)

    def url(self, path: str = "/schema.json") -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}{path}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._held.append(conn)  # held open, never answered

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for conn in self._held:
            conn.close()
        self._sock.close()
