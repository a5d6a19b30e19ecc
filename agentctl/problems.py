"""Every problem `agentctl` meets, as one line that says what went wrong and what to do, with its exit code (no
tracebacks: a person reads these, and a script reads the exit code)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from agentctl.client import ApiError
from agentctl.exit_codes import NOT_ALLOWED, NOT_FOUND, UNREACHABLE, USAGE, for_http_status

__all__ = ["NOT_FOUND", "Problem", "of_answer", "of_missing_editor", "of_transport"]

START_HINT = "start it with `make run`, or point --url / AGENTS_URL at the running app"


@dataclass
class Problem(Exception):
    message: str
    exit_code: int

    def __str__(self) -> str:
        return self.message


def of_transport(error: httpx.HTTPError, url: str) -> Problem:
    """A request that got no (usable) answer."""
    if isinstance(error, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return Problem(f"{url} is not an http(s) URL: pass --url http://HOST:PORT (or set AGENTS_URL)", USAGE)
    if isinstance(error, httpx.ConnectError):
        return Problem(f"cannot reach the app at {url} (nothing answers there): {START_HINT}", UNREACHABLE)
    if isinstance(error, httpx.TimeoutException):
        return Problem(f"the app at {url} did not answer in time: is it overloaded or stopped? Try again", UNREACHABLE)
    return Problem(f"the connection to {url} broke ({type(error).__name__}): try again", UNREACHABLE)


def of_answer(error: ApiError, url: str) -> Problem:
    """An answer that is an error (an RFC 9457 problem from the app, or something that is not the app at all)."""
    if (error.code == "not_the_api" and error.status == 404) or error.code in ("not_found", "http_404",
                                                                              "route_not_found"):
        return Problem(f"{url} has no such route: is --url the app's base URL, e.g. http://127.0.0.1:7071 "
                       "(without /api)?", NOT_FOUND)
    if error.code == "not_the_api":
        return Problem(f"{url} answered, but not as the agents API ({error.detail}): is --url / AGENTS_URL right?",
                       UNREACHABLE)
    if error.code == "stream_lost":
        return Problem(f"{error.detail}: the run goes on; re-attach with `agentctl show RUN --follow`", UNREACHABLE)
    detail = error.detail.rstrip(".")
    if error.status == 401:
        return Problem(f"the app wants credentials ({detail}): pass --key (function key) or --token (bearer)",
                       NOT_ALLOWED)
    if error.status == 403:
        return Problem(f"not allowed: {detail} (sign in as someone who may, with --token)", NOT_ALLOWED)
    return Problem(f"{detail} ({error.status} {error.code})", for_http_status(error.status))


def of_missing_editor(names: tuple[str, ...]) -> Problem:
    return Problem(f"no editor found (tried {', '.join(names)}): set $EDITOR, e.g. EDITOR=nano", NOT_FOUND)
