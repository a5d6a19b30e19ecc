"""One delivery attempt over real HTTP (`notifications.sender.send`) to receivers on loopback that verify with the
`standardwebhooks` library: a caller's webhook reaches only the address that was checked (a name whose DNS answer
changes between the check and the connection - rebinding - or that answers with several addresses), and a rotated
`WEBHOOK_SECRET` signs with the new and the previous secret so receivers holding either verify, and a URL that
cannot be encoded is a failed attempt.

The name `hooks.rebind.test` is answered by a stand-in for DNS (`socket.getaddrinfo`, which the system resolver
calls); 127.0.0.2 stands in for a public address (a test cannot listen on one), 127.0.0.1 for the internal
network."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pydantic import SecretStr
from standardwebhooks import Webhook

from notifications import destinations
from notifications.events import NotificationEvent
from notifications.sender import SendResult, send
from notifications.settings import NotificationSettings
from notifications.subscriptions import Subscription

NEW_SECRET = "whsec_" + "bmV3LXNlY3JldC1mb3ItdGhlLXJvdGF0aW9uLXRlc3Q="
OLD_SECRET = "whsec_" + "b2xkLXNlY3JldC1mb3ItdGhlLXJvdGF0aW9uLXRlc3Q="
REBINDING_NAME = "hooks.rebind.test"
STAND_IN_PUBLIC = "127.0.0.2"
INTERNAL = "127.0.0.1"
ALLOWED = {REBINDING_NAME, INTERNAL, "[::ffff:127.0.0.1]", "::ffff:127.0.0.1"}  # WEBHOOK_ALLOWED_HOSTS


@dataclass
class Receiver:
    """An HTTP receiver on one loopback address; records each request, verified with `secret`."""

    address: str
    port: int = 0
    secret: str = NEW_SECRET
    got: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0)).decode()
                try:
                    payload = Webhook(receiver.secret).verify(body, dict(self.headers.items()))
                except Exception:
                    payload = None
                receiver.got.append({"verified": payload is not None, "body": json.loads(body)})
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer((self.address, self.port), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


@pytest.fixture
def internal() -> Iterator[Receiver]:
    started = Receiver(INTERNAL)
    yield started
    started.stop()


@pytest.fixture
def public(internal: Receiver) -> Iterator[Receiver]:
    """The receiver the caller named: on the stand-in public address, the internal receiver's port."""
    started = Receiver(STAND_IN_PUBLIC, internal.port)
    yield started
    started.stop()


class Dns:
    """Answers for `hooks.rebind.test`, one per lookup, the last one repeated (TTL 0); other names as usual."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.answers: list[list[str]] = []
        self.lookups = 0
        system = socket.getaddrinfo

        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
            if host != REBINDING_NAME:
                return system(host, port, *args, **kwargs)
            self.lookups += 1
            answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (a, int(port or 0))) for a in answer]

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> Dns:
    real = destinations.is_public_address
    monkeypatch.setattr(destinations, "is_public_address", lambda a: a == STAND_IN_PUBLIC or real(a))
    return Dns(monkeypatch)


def event() -> NotificationEvent:
    return NotificationEvent(id="msg_rebinding", type="run.completed", timestamp=datetime(2030, 1, 1, tzinfo=UTC),
                             run_id="run1", data={"run_id": "run1", "status": "completed"})


async def deliver(subscription: Subscription, event: NotificationEvent, **options: Any) -> SendResult:
    """`send` with the hosts these tests' receivers use allowed (WEBHOOK_ALLOWED_HOSTS)."""
    return await send(subscription, event, allowed_hosts=ALLOWED, **options)


def run_webhook(url: str) -> Subscription:
    return Subscription(key="run1", kind="webhook", url=SecretStr(url), events=[], from_run=True)


async def test_the_address_connected_to_is_the_address_checked(
    dns: Dns, public: Receiver, internal: Receiver
) -> None:
    url = f"http://{REBINDING_NAME}:{public.port}/hooks"
    dns.answers = [[STAND_IN_PUBLIC], [INTERNAL]]  # rebinding: public when checked, internal from then on
    first = await deliver(run_webhook(url), event(), secrets=[NEW_SECRET], attempt=0, allow_private=False)
    assert first.outcome == "delivered"
    assert [g["verified"] for g in public.got] == [True]
    assert internal.got == []  # the connection went where the check looked, not to a second answer
    assert dns.lookups == 1

    again = await deliver(run_webhook(url), event(), secrets=[NEW_SECRET], attempt=1, allow_private=False)
    assert (again.outcome, again.error) == ("gone", "the host resolves to a private or loopback address")
    assert internal.got == [] and len(public.got) == 1


async def test_a_name_with_any_internal_address_or_an_internal_literal_is_never_contacted(
    dns: Dns, public: Receiver, internal: Receiver
) -> None:
    dns.answers = [[STAND_IN_PUBLIC, INTERNAL]]
    for url in (f"http://{REBINDING_NAME}:{public.port}/hooks", f"http://{INTERNAL}:{internal.port}/hooks",
                f"http://[::ffff:{INTERNAL}]:{internal.port}/hooks"):
        result = await deliver(run_webhook(url), event(), secrets=[NEW_SECRET], attempt=0, allow_private=False)
        assert result.outcome == "gone", url
    assert public.got == [] and internal.got == []
    allowed = await deliver(run_webhook(f"http://{INTERNAL}:{internal.port}/hooks"), event(), secrets=[NEW_SECRET],
                         attempt=0, allow_private=True)  # WEBHOOK_ALLOW_PRIVATE_ADDRESSES, or not on Azure
    assert allowed.outcome == "delivered" and len(internal.got) == 1


async def test_a_rotated_secret_signs_for_receivers_holding_either(
    monkeypatch: pytest.MonkeyPatch, internal: Receiver
) -> None:
    monkeypatch.setenv("WEBHOOK_SECRET", f"{NEW_SECRET},{OLD_SECRET}")
    secrets = NotificationSettings().webhook_secrets()
    assert secrets == [NEW_SECRET, OLD_SECRET]
    still_old = Receiver(INTERNAL, secret=OLD_SECRET)
    try:
        for receiver in (internal, still_old):
            url = f"http://{INTERNAL}:{receiver.port}/hooks"
            result = await deliver(run_webhook(url), event(), secrets=secrets, attempt=0, allow_private=True)
            assert result.outcome == "delivered"
    finally:
        still_old.stop()
    assert [g["verified"] for g in internal.got + still_old.got] == [True, True]


async def test_a_url_that_cannot_be_encoded_is_a_failed_attempt_not_a_crash() -> None:
    """A typo in `WEBHOOK_URLS` (an empty label): the attempt is logged and retried, then given up, like any failure;
    a crash would leave the event pending forever with no attempt in the delivery log."""
    typo = Subscription(key="wh1", kind="webhook", url=SecretStr("https://hooks..example.com/x"), events=[])
    result = await deliver(typo, event(), secrets=[NEW_SECRET], attempt=0, allow_private=False)
    assert (result.outcome, result.error) == ("retry", "UnicodeError")


async def test_a_run_webhook_whose_host_was_removed_from_the_allowed_hosts_gets_nothing_more(
    internal: Receiver,
) -> None:
    """WEBHOOK_ALLOWED_HOSTS is checked at every send, not only when the run started: an operator who removes a host
    stops the deliveries of runs already started to it (the delivery ends `gone`, nothing is sent)."""
    url = f"http://{INTERNAL}:{internal.port}/hooks"
    sent = await deliver(run_webhook(url), event(), secrets=[NEW_SECRET], attempt=0, allow_private=True)
    assert sent.outcome == "delivered" and len(internal.got) == 1
    revoked = await send(run_webhook(url), event(), secrets=[NEW_SECRET], attempt=1, allow_private=True,
                         allowed_hosts={"hooks.example.com"})
    assert (revoked.outcome, revoked.error) == ("gone", "names a host that is not in WEBHOOK_ALLOWED_HOSTS")
    assert len(internal.got) == 1
    operators = Subscription(key="ops", kind="webhook", url=SecretStr(url), events=[])  # WEBHOOK_URLS: theirs
    kept = await send(operators, event(), secrets=[NEW_SECRET], attempt=0, allow_private=True, allowed_hosts=set())
    assert kept.outcome == "delivered" and len(internal.got) == 2
