"""Standard Webhooks signatures, by the maintained `standardwebhooks` library (sans-IO)."""

from __future__ import annotations

from datetime import datetime
from math import floor

from standardwebhooks import Webhook


def signed_headers(secrets: list[str], message_id: str, sent_at: datetime, body: str) -> dict[str, str]:
    """`webhook-id`, `webhook-timestamp` (seconds), `webhook-signature` (`v1,<base64 HMAC-SHA256>` over
    `{id}.{timestamp}.{body}`) for each `whsec_` secret, space-separated: while a secret is rotated, receivers that
    still hold the previous one verify too (the specification's zero-downtime rotation)."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(floor(sent_at.timestamp())),
        "webhook-signature": " ".join(Webhook(secret).sign(message_id, sent_at, body) for secret in secrets),
    }
