"""Standard Webhooks signatures (https://www.standardwebhooks.com): what a receiver checks to trust an event.

Each request carries `webhook-id` (the event's id, the same on every retry, for the receiver to drop duplicates),
`webhook-timestamp` (unix seconds of this attempt) and `webhook-signature`: `v1,` and the base64 HMAC-SHA256, keyed
with the secret's bytes (the base64 after `whsec_`), of `{id}.{timestamp}.{body}`. During a secret's rotation the
header carries one signature per live secret, separated by spaces, so a receiver that knows either one accepts it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32  # within the spec's 24 to 64


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def _key(secret: str) -> bytes:
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError("a webhook secret starts with whsec_")
    return base64.b64decode(secret[len(SECRET_PREFIX) :])


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One `v1,<base64>` signature."""
    digest = hmac.new(_key(secret), f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_header(live_secrets: list[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` value: one signature per live secret, newest first, space-separated."""
    if not live_secrets:
        raise ValueError("an endpoint always has a live secret")
    return " ".join(signature(secret, msg_id, timestamp, body) for secret in live_secrets)


def webhook_headers(live_secrets: list[str], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {
        "content-type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature_header(live_secrets, msg_id, timestamp, body),
    }
