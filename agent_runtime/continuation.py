"""Continuation tokens: opaque, signed, expiring cursors bound to one resource (seed 002, long-running operations).

A token is what a client hands back to get "what is new since last time". It is signed with the app secret
(HMAC-SHA256 via itsdangerous, keys derived per purpose), carries the resource it was issued for and a cursor, and
expires. Verification tells apart tampering, expiry and a token minted for another resource, so the API can answer
each with a clear 401 and never serve another run's data.

Several secrets may be configured: the first signs, all verify (key rotation without breaking clients mid-poll).
Tokens signed before the move to SHA-256 (HMAC-SHA1, itsdangerous' default) are still honoured until they expire
(the same TTL): clients mid-poll during a deployment keep polling. Once a TTL has passed since that deployment no
SHA-1 token can verify any more, and `LEGACY_DIGESTS` can be emptied.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from typing import Any

from itsdangerous import BadSignature, SignatureExpired, TimestampSigner, URLSafeTimedSerializer
from pydantic import BaseModel, ConfigDict, ValidationError

DIGEST = hashlib.sha256
# Verified only (never signed with): the digest of tokens issued by earlier versions, honoured until they expire.
LEGACY_DIGESTS = (hashlib.sha1,)


class TokenError(Exception):
    """A continuation token that must be refused. `code` is stable: token_invalid, token_expired, token_foreign."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


class TokenPayload(BaseModel):
    """What a token carries. `scope` names the kind of resource (run, workflow, session), `subject` its id."""

    model_config = ConfigDict(frozen=True)

    scope: str
    subject: str
    cursor: dict[str, Any]


def _signer_with_clock(now: Callable[[], float]) -> type[TimestampSigner]:
    class ClockedSigner(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(now())

    return ClockedSigner


class ContinuationTokens:
    """Issues and verifies continuation tokens for one app secret (or a rotation list of them)."""

    def __init__(
        self,
        secrets: Sequence[str],
        *,
        ttl_seconds: int = 24 * 3600,
        now: Callable[[], float] = time.time,
    ) -> None:
        usable = [secret for secret in secrets if secret]
        if not usable:
            raise ValueError("ContinuationTokens needs at least one non-empty secret")
        self._ttl_seconds = ttl_seconds
        # itsdangerous signs with the LAST key and verifies with all of them.
        self._serializer = URLSafeTimedSerializer(
            list(reversed(usable)),
            salt="continuation-token",
            signer=_signer_with_clock(now),
            signer_kwargs={"digest_method": DIGEST},
            fallback_signers=[{"digest_method": digest} for digest in LEGACY_DIGESTS],
        )
        # The signer `dumps` would build anew for every token (it holds the keys and the clock, nothing per token).
        self._signer = self._serializer.make_signer()

    @property
    def ttl_seconds(self) -> int:
        return self._ttl_seconds

    def issue(self, scope: str, subject: str, cursor: dict[str, Any]) -> str:
        """`self._serializer.dumps(payload)` (the same token) with the signer built once. `cursor` holds JSON values
        (`verify` reads it back as a `TokenPayload`)."""
        payload = {"scope": scope, "subject": subject, "cursor": cursor}
        return self._signer.sign(self._serializer.dump_payload(payload)).decode("utf-8")

    def verify(self, token: str, scope: str, subject: str) -> dict[str, Any]:
        """Return the cursor of a token issued for (scope, subject), or raise TokenError."""
        try:
            raw = self._serializer.loads(token, max_age=self._ttl_seconds)
        except SignatureExpired as exc:
            raise TokenError("token_expired", "The continuation token has expired; poll without a token.") from exc
        except BadSignature as exc:
            raise TokenError("token_invalid", "The continuation token is not valid.") from exc
        try:
            payload = TokenPayload.model_validate(raw)
        except ValidationError as exc:
            raise TokenError("token_invalid", "The continuation token is not valid.") from exc
        if payload.scope != scope or payload.subject != subject:
            raise TokenError("token_foreign", f"The continuation token was not issued for this {scope}.")
        return payload.cursor
