"""The benchmark's HTTP client in a process of its own.

A client in the host's process sends its requests and parses their answers on the host's GIL: every turn it starts
is then slower by the client's own work (about 0.3 ms CPU per step with httpx), which no deployment has - a client
calls the app from elsewhere. As with the model server (`model_process`), the client runs in a child process, so
the figures stay about the host. The parent sends a request down a pipe and gets the status and JSON body back.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import httpx

START_TIMEOUT_SECONDS = 30.0
ANSWER_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class Answer:
    status_code: int
    body: Any  # the decoded JSON body, or the text when it is not JSON

    @property
    def text(self) -> str:
        return str(self.body)


def _serve(base_url: str, requests: Connection) -> None:
    with httpx.Client(base_url=base_url, timeout=ANSWER_TIMEOUT_SECONDS, verify=False, trust_env=False) as client:
        requests.send("ready")
        while True:
            try:
                method, path, body = requests.recv()
            except EOFError:  # the parent closed its end: done
                return
            response = client.request(method, path, json=body)
            try:
                answer: Any = response.json()
            except ValueError:
                answer = response.text
            requests.send((response.status_code, answer))


class ClientProcess:
    """Requests sent from the child process; `post` blocks until the answer is back."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def post(self, path: str, body: Any) -> Answer:
        self._connection.send(("POST", path, body))
        if not self._connection.poll(ANSWER_TIMEOUT_SECONDS):
            raise TimeoutError(f"no answer to POST {path} within {ANSWER_TIMEOUT_SECONDS} s")
        status_code, answer = self._connection.recv()
        return Answer(status_code, answer)


@contextmanager
def client_process(base_url: str) -> Iterator[ClientProcess]:
    """Start an HTTP client for `base_url` in a child process; yields its handle; stops it at exit."""
    parent, child = multiprocessing.Pipe(duplex=True)
    process = multiprocessing.get_context("spawn").Process(
        target=_serve, args=(base_url, child), name="bench-client", daemon=True
    )
    process.start()
    child.close()
    try:
        if not parent.poll(START_TIMEOUT_SECONDS) or parent.recv() != "ready":
            raise RuntimeError(f"the benchmark's client process did not start within {START_TIMEOUT_SECONDS} s")
        yield ClientProcess(parent)
    finally:
        parent.close()
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()
