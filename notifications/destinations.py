"""Where a notification may be sent. A run's own `webhook` URL comes from the caller: it must name a host of
`WEBHOOK_ALLOWED_HOSTS`, and on Azure it may not resolve to a private, loopback or link-local address (checked again
when sending, so a DNS answer changed after the run started cannot reach inside the network). Redirects are never
followed (`sender`)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

MAX_URL_LENGTH = 2048


class DestinationError(ValueError):
    """The URL may not be used; the message says why (never echoing the URL: it may carry a secret)."""


def check_run_webhook(url: str, allowed_hosts: set[str]) -> str:
    """The URL if a run may name it; raises `DestinationError`."""
    if len(url) > MAX_URL_LENGTH:
        raise DestinationError(f"must be at most {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError as error:
        raise DestinationError("is not a valid URL") from error
    if parts.scheme not in ("https", "http") or not host:
        raise DestinationError("must be an http(s) URL with a host")
    if parts.username is not None or parts.password is not None:
        raise DestinationError("must not carry credentials")
    if not allowed_hosts:
        raise DestinationError("per-run webhooks are not enabled (WEBHOOK_ALLOWED_HOSTS is empty)")
    if host not in allowed_hosts:
        raise DestinationError("names a host that is not in WEBHOOK_ALLOWED_HOSTS")
    return url


def is_public_address(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return not (ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_reserved
                or ip.is_unspecified)


async def check_resolved(url: str, *, allow_private: bool) -> None:
    """At send time: every address the host resolves to must be public, unless private ones are allowed."""
    if allow_private:
        return
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, parts.port or 443, type=socket.SOCK_STREAM)
    except OSError as error:
        raise DestinationError("the host does not resolve") from error
    if not infos or not all(is_public_address(str(info[4][0])) for info in infos):
        raise DestinationError("the host resolves to a private or loopback address")
