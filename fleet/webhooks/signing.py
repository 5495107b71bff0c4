"""Standard Webhooks signatures (https://www.standardwebhooks.com): the secret's form,
the signed content ``{id}.{timestamp}.{body}``, and the ``webhook-signature`` value
``v1,<base64 of its HMAC-SHA256>`` under the secret's decoded bytes."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

#: What every secret starts with (the spec's serialisation: the key's base64 follows).
PREFIX = "whsec_"
#: Bytes of a secret Fleet makes (the spec asks for 24 to 64).
SECRET_BYTES = 32
#: The bounds of a secret's key a user may supply.
MIN_KEY_BYTES, MAX_KEY_BYTES = 24, 64
#: What a masked secret shows of the secret: its prefix and last four characters.
MASK_TAIL = 4


def new_secret() -> str:
    """A fresh secret: ``whsec_`` and the base64 of :data:`SECRET_BYTES` random bytes."""
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def key_of(secret: str) -> bytes:
    """The HMAC key of a ``whsec_`` secret (its base64 part, decoded).

    Raises:
        ValueError: Not ``whsec_`` and valid base64 of 24 to 64 bytes.
    """
    if not secret.startswith(PREFIX):
        raise ValueError(f"a secret starts with {PREFIX!r}")
    try:
        key = base64.b64decode(secret[len(PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a secret's part after whsec_ is base64") from None
    if not MIN_KEY_BYTES <= len(key) <= MAX_KEY_BYTES:
        raise ValueError(f"a secret's key is {MIN_KEY_BYTES} to {MAX_KEY_BYTES} bytes")
    return key


def masked(secret: str) -> str:
    """How answers show a secret after its creation: ``whsec_****…`` and its last four
    characters (enough to tell two apart, nothing to sign with)."""
    return f"{PREFIX}{'*' * 8}{secret[-MASK_TAIL:]}"


def looks_masked(value: str) -> bool:
    """Whether ``value`` is a mask sent back rather than a secret (base64 has no ``*``)."""
    return "*" in value


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header of one request: ``v1,`` and the base64 of the
    HMAC-SHA256 of ``{msg_id}.{timestamp}.{body}`` keyed by the secret's bytes."""
    content = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(key_of(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def verify(secret: str, msg_id: str, timestamp: int, body: bytes, header: str) -> bool:
    """Whether one of the space-separated signatures of ``header`` is this request's
    (compared in constant time)."""
    expected = sign(secret, msg_id, timestamp, body)
    return any(hmac.compare_digest(expected, sig) for sig in header.split())
