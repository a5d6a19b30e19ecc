"""Request header values that are not plain ASCII, as the Functions host treats them (facts: docs/devhost.md).

- Kestrel decodes a header value as ASCII, else as strict UTF-8 (`KestrelServerOptions.RequestHeaderEncodingSelector`
  unset; the host sets none), and refuses a value with bytes that are not UTF-8 before any routing: a 400 with an
  empty body and `Connection: close`, on every path of the host (a NUL, which it refuses too, aiohttp's parser
  already refuses as an unreadable request).
- A decoded non-ASCII value reaches a `func.HttpRequest` as decoded (RpcHttp headers are strings).
- Under the HTTP v2 (FastAPI extension) model the host's proxy cannot send it: its `SocketsHttpHandler` has no
  header encoding either, so writing the header throws "Request headers must contain only ASCII characters."
  (retried, then failed); the worker keeps waiting for a request that never comes, so the invocation ends only at
  `functionTimeout` (a 500) and the function never runs.
"""

from __future__ import annotations

from collections.abc import Iterable

from .streaming import NOT_PROXIED

# The .NET message of the proxy's failure, quoted in devhost's log as the host logs it.
PROXY_REFUSAL = "Request headers must contain only ASCII characters."


def kestrel_refuses(raw_headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """True when a header value is not UTF-8 (strict, as .NET's decoder: no overlong forms, no surrogates)."""
    for _, value in raw_headers:
        if not value.isascii():
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                return True
    return False


def proxy_refuses(headers: Iterable[tuple[str, str]]) -> str | None:
    """The name of the first header whose value the host's proxy cannot send to the worker (not ASCII, and one it
    copies: `streaming.NOT_PROXIED`), or None."""
    return next(
        (name for name, value in headers if not value.isascii() and name.lower() not in NOT_PROXIED), None
    )


__all__ = ["PROXY_REFUSAL", "kestrel_refuses", "proxy_refuses"]
