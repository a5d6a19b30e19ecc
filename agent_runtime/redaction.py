"""The one redaction of secrets in text that leaves the process: error bodies, span attributes and events, log records
and metric attributes all pass through `redact`.

It removes the secrets the process knows (`remember_secret`: model API keys when a client is built, the credentials
among an MCP server's settings when it is contacted) wherever they appear, and text that is a credential by its shape
(`sk-...` keys, JWTs, whatever follows `Bearer `). A model endpoint or proxy that echoes the `Authorization` header in
its error puts the key into exception messages and stack traces; nothing carrying them leaves without passing here.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, unquote_plus, urlsplit

MASK = "***"
MIN_SECRET_CHARS = 6
"""Shorter values are not remembered (masking "abc" everywhere would garble text without protecting anything)."""

_CREDENTIAL = re.compile(
    r"\bsk-[A-Za-z0-9_*\-]{4,}"  # OpenAI-style keys
    r"|\beyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-.]+"  # JWTs (Entra ID tokens)
    r"|(?<=[Bb]earer )[^\s\"',;]+"  # whatever an Authorization header carries
)
# Opaque tokens of 32+ letters and digits: in a model error they are keys, elsewhere they are ids (run ids are 32 hex
# digits), so only `redact(..., long_tokens=True)` masks them.
_LONG_TOKEN = re.compile(r"\b[A-Za-z0-9]{32,}")


def _longest_first(secrets: Iterable[str]) -> tuple[str, ...]:
    """Longer secrets first: one may hold another, and masked first, the shorter one left the longer one's rest."""
    return tuple(sorted(secrets, key=len, reverse=True))


def _longest_parts_first(secrets: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """Every start and end of `secrets` that a cut may leave, the longest first, of all secrets together: one secret's
    part may end another's (`url-secr` of `e2e-url-secr...`); masked first, it left the rest of the longer one
    (`e2e-***...`)."""
    parts = (
        (secret[:size], secret[-size:])
        for secret in secrets
        for size in range(len(secret) - 1, MIN_SECRET_PART_CHARS - 1, -1)
    )
    return tuple(sorted(parts, key=lambda part: len(part[0]), reverse=True))


class _Ordered:
    """A set of secrets as `redact` and `redact_quoted` try them: longest first, and the parts a cut may leave (built
    when first asked: only `redact_quoted` needs them). Its secrets never change; the known ones together with a
    caller's own are kept ordered, a few sets at a time, so an error path passing the same server's credentials again
    does not sort and cut them all again."""

    def __init__(self, secrets: frozenset[str]) -> None:
        self.secrets = secrets
        self.longest_first = _longest_first(secrets)
        self._parts: tuple[tuple[str, str], ...] | None = None
        self._with: dict[frozenset[str], _Ordered] = {}

    @property
    def parts(self) -> tuple[tuple[str, str], ...]:
        if self._parts is None:  # two threads may both build it: the same value
            self._parts = _longest_parts_first(self.secrets)
        return self._parts

    def with_(self, secrets: Iterable[str]) -> _Ordered:
        """These secrets and `secrets` (the ones long enough to mask), ordered."""
        extra = frozenset(s for s in secrets if s and len(s) >= 4) - self.secrets
        if not extra:
            return self
        found = self._with.get(extra)
        if found is None:
            if len(self._with) >= _MAX_CALLER_SETS:  # callers' sets are few (a server's URL credentials, a model key)
                self._with.clear()
            found = self._with[extra] = _Ordered(self.secrets | extra)
        return found


_MAX_CALLER_SETS = 16
_known_lock = threading.Lock()
# The secrets the process knows, replaced (never changed in place) as one is remembered: `redact` reads it once a
# call, so a secret is in the set a caller's own are checked against only with its place in the order.
_known = _Ordered(frozenset())


def remember_secret(value: str | None) -> None:
    """Mask `value` in everything `redact` sees from now on (in this process), as written and as Python and JSON
    quote it: a traceback's `b'...'` (a pydantic error's `input_value`) or a JSON body a server echoes writes a
    backslash, a quote, a control character or a non-ASCII one escaped, where `value` itself no longer matches."""
    global _known
    if value and len(value) >= MIN_SECRET_CHARS:
        with _known_lock:
            new = _quoted_forms(value) - _known.secrets
            if new:  # ordered here, once per secret, not on every call (`redact` runs for every log record)
                _known = _Ordered(_known.secrets | new)


def _quoted_forms(value: str) -> set[str]:
    """`value` and its escaped forms (the same text for most secrets: nothing more to mask)."""
    return {
        value,
        repr(value)[1:-1],
        repr(value.encode("utf-8", "surrogatepass"))[2:-1],
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
    }


# Names (of headers, environment variables, URL query parameters) whose values are credentials: parts of the name
# as written (`X-Api-Key`, `GITHUB_TOKEN`, `ClientSecret`), or whole words of it (`sig` of a SAS URL, `code` of an
# Azure Functions key).
_SECRET_NAME_PARTS = ("auth", "key", "token", "secret", "passw", "credential", "cookie", "signature", "private")
_SECRET_NAME_WORDS = frozenset({"sig", "sas", "pat", "pwd", "pass", "code", "connectionstring"})


def names_a_secret(name: str) -> bool:
    """Whether a value under this name is a credential (`Authorization`, `X-Api-Key`, `OPENAI_API_KEY`, `sig`)."""
    lowered = name.lower()
    words = set(re.split(r"[^a-z0-9]+", lowered))
    return any(part in lowered for part in _SECRET_NAME_PARTS) or bool(words & _SECRET_NAME_WORDS)


def url_secrets(url: str) -> list[str]:
    """The credentials a URL carries: its userinfo (`user:password@`) and the values of query parameters whose names
    are a credential's (`?code=`, `?sig=`, `?access_token=`); not its host nor its path. Each as written and decoded:
    a server or client echoing the URL shows it as written (`?code=a%2Bb%3D%3D`, `?code=a+b==`), which the decoded
    value (`a+b==`, `a b==`) does not match."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL (`http://[x`, an environment value `//[a-z]`): it carries no URL credentials
        return []
    found = []
    for written in (parts.username or "", parts.password or ""):  # `https://<token>@host`: a token for a user name
        found += [written, unquote(written)]
    for pair in parts.query.split("&"):
        name, _, written = pair.partition("=")
        if names_a_secret(unquote_plus(name)):
            found += [written, unquote_plus(written)]
    return list(dict.fromkeys(secret for secret in found if secret))


def redact(text: str, secrets: Iterable[str] = (), *, long_tokens: bool = False) -> str:
    """`text` without the known secrets, `secrets` and credential-shaped text (and long opaque tokens when asked)."""
    return _redact(_known.with_(secrets), text, long_tokens)


def _redact(ordered: _Ordered, text: str, long_tokens: bool = False) -> str:
    for secret in ordered.longest_first:
        if secret in text:
            text = text.replace(secret, MASK)
    text = _CREDENTIAL.sub(MASK, text)
    return _LONG_TOKEN.sub(MASK, text) if long_tokens else text


_CUT = "..."  # how pydantic's errors cut a long input they quote (`input_value=b'<start>...<end>'`)
MIN_SECRET_PART_CHARS = 4


def redact_quoted(text: str, secrets: Iterable[str] = ()) -> str:
    """`redact` for text quoting what a peer wrote, cut by a library before it reached us (a pydantic error quotes the
    first and last characters of an answer): the start or end of a known secret or of `secrets` next to the cut is
    masked too, or it would show part of the secret. Error paths only: it tries every cut point of every secret."""
    ordered = _known.with_(secrets)
    text = _redact(ordered, text)
    if _CUT not in text:
        return text
    for start, end in ordered.parts:
        text = text.replace(start + _CUT, MASK + _CUT).replace(_CUT + end, _CUT + MASK)
    return text


def redact_value(value: Any) -> Any:
    """An attribute value with its text redacted (strings, and sequences of them); other values as they are."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list | tuple):
        return type(value)(redact_value(item) for item in value)
    return value


def redact_attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {key: redact_value(value) for key, value in (attributes or {}).items()}


__all__ = [
    "MASK",
    "names_a_secret",
    "redact",
    "redact_attributes",
    "redact_quoted",
    "redact_value",
    "remember_secret",
    "url_secrets",
]
