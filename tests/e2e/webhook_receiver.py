"""A webhook receiver on loopback for the tests: verifies every delivery with the `standardwebhooks` library (as a
real receiver would), records what it got, and answers what the test tells it to (up, down, 410, Retry-After, or only
once released: a slow receiver, without a sleep)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook

SECRET = "whsec_" + "c2VjcmV0LWZvci10aGUtd2ViaG9vay10ZXN0cy0xMjM0NTY="
RELEASE_WITHIN_S = 120.0  # a held request waits for the test at most this long (bounds a failing test)


@dataclass
class Delivery:
    headers: dict[str, str]
    body: str
    payload: Any
    verified: bool
    answered: int


@dataclass
class WebhookReceiver:
    secret: str = SECRET
    status: int = 200
    retry_after: str | None = None
    deliveries: list[Delivery] = field(default_factory=list)  # every request, in arrival order
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _open: threading.Event = field(default_factory=threading.Event)
    held: int = 0  # requests waiting to be released

    def __post_init__(self) -> None:
        self._open.set()

    def hold(self) -> None:
        """From now on every request waits, unanswered, until `release()` (a receiver that is slow to answer)."""
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/hooks"

    def start(self) -> WebhookReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0)).decode()
                headers = {k.lower(): v for k, v in self.headers.items()}
                if not receiver._open.is_set():
                    with receiver._lock:
                        receiver.held += 1
                    receiver._open.wait(RELEASE_WITHIN_S)
                    with receiver._lock:
                        receiver.held -= 1
                try:
                    payload = Webhook(receiver.secret).verify(body, headers) if "webhook-id" in headers else None
                    verified = payload is not None
                except Exception:
                    payload, verified = None, False
                if payload is None:
                    payload = json.loads(body or "null")
                with receiver._lock:
                    status, retry_after = receiver.status, receiver.retry_after
                    receiver.deliveries.append(Delivery(headers, body, payload, verified, status))
                self.send_response(status)
                if retry_after:
                    self.send_header("retry-after", retry_after)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __enter__(self) -> WebhookReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.release()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def accepted(self) -> list[Delivery]:
        """The deliveries answered 2xx (what the receiver has processed)."""
        with self._lock:
            return [d for d in self.deliveries if 200 <= d.answered < 300]

    def types(self) -> list[str]:
        return [d.payload["type"] for d in self.accepted()]
