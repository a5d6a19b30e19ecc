"""Where a notification may be sent. A run's own `webhook` URL comes from the caller: it must name a host of
`WEBHOOK_ALLOWED_HOSTS`, and on Azure it may not resolve to a private, loopback or link-local address (checked again
when sending, so a DNS answer changed after the run started cannot reach inside the network). Redirects are never
followed (`sender`)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver
from yarl import URL

MAX_URL_LENGTH = 2048
# Azure's platform address (wire server, DNS, health probes): reachable from every Azure host, yet a public address.
AZURE_PLATFORM = ipaddress.ip_network("168.63.129.16/32")
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052: the IPv4 address is the last 32 bits
LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: local use, the IPv4 address's place varies


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
    """A global unicast address. An IPv6 address that carries an IPv4 one (mapped, 6to4, NAT64) is judged by that
    one: `2002:7f00:1::` reaches 127.0.0.1 through a 6to4 relay."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in LOCAL_NAT64 or ip.teredo is not None:  # tunnelled to an IPv4 address that cannot be checked
            return False
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            return is_public_address(str(embedded))
    return ip.is_global and not (ip.is_multicast or ip.is_reserved or ip in AZURE_PLATFORM)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip in NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.ipv4_mapped or ip.sixtofour


def refuse_private(addresses: Iterable[str]) -> None:
    """Raises `DestinationError` unless there are addresses and every one is public."""
    listed = list(addresses)
    if not listed or not all(is_public_address(address) for address in listed):
        raise DestinationError("the host resolves to a private or loopback address")


class PublicAddressResolver(AbstractResolver):
    """The system resolver, refusing any answer with a private address. Given to the connector that sends, it makes
    the address connected to the address checked: a separate lookup before connecting could be answered with a
    public address and the connection's own with an internal one (DNS rebinding)."""

    def __init__(self) -> None:
        self._system = ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._system.resolve(host, port, family)
        refuse_private(result["host"] for result in found)
        return found

    async def close(self) -> None:
        await self._system.close()


def literal_address(url: str) -> str | None:
    """The URL's host if it is an IP address (as aiohttp parses the URL: it connects to a literal without asking
    its resolver)."""
    host = URL(url).host or ""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None


def public_connector(url: str) -> aiohttp.TCPConnector:
    """A connector that can reach only public addresses for `url` (raises `DestinationError` for a literal one; a
    name is checked by its resolver when connecting). No DNS cache: every connection resolves, and checks, anew."""
    literal = literal_address(url)
    if literal is not None:
        refuse_private([literal])
    return aiohttp.TCPConnector(resolver=PublicAddressResolver(), use_dns_cache=False)


async def check_resolved(url: str, *, allow_private: bool) -> None:
    """At start: every address the host resolves to must be public, unless private ones are allowed (the sender
    checks again, on the addresses it connects to)."""
    if allow_private:
        return
    try:
        literal = literal_address(url)
    except ValueError as error:
        raise DestinationError("is not a valid URL") from error
    if literal is not None:
        refuse_private([literal])
        return
    try:
        await PublicAddressResolver().resolve(URL(url).raw_host or "", 0, socket.AF_UNSPEC)
    except DestinationError:
        raise
    except (OSError, ValueError) as error:  # ValueError: a name IDNA cannot encode (`a..b`)
        raise DestinationError("the host does not resolve") from error
