"""Job args encrypted at rest (``@job(encrypted=True)``): AES-256-GCM from the ``cryptography``
package (the ``conveyor[encryption]`` extra), with key rotation.

The keys come from the ``encryption_keys`` setting (``CONVEYOR_ENCRYPTION_KEYS``: comma-separated),
each the base64 text of 32 random bytes, newest first: the first key encrypts, every key decrypts.
A stored job keeps the id of its key (a digest, never the key) so a node finds the right key at once
and says which one it lacks.

Layout of an encrypted job's row, readable without any key:

- ``args``: ``{"data": <base64 ciphertext and tag>, "iv": <base64 12-byte nonce>}``;
- ``meta["encrypted"]``: ``{"cipher": "aes-256-gcm", "key": <key id>}``.

The plaintext is the args' JSON. Oban Pro's ``Encrypted`` worker uses AES-256-CTR with a layout of
its own, so neither reads the other's encrypted jobs (docs/guides/encryption.md says why).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from conveyor.errors import ConveyorError, ValidationError
from conveyor.request import JobRequest

#: The workers defined with ``encrypted=True`` in this process (``@job``/``@worker`` add them): every
#: enqueue path and the cron scheduler encrypt their args, whoever builds the request.
ENCRYPTED_WORKERS: set[str] = set()
#: The meta key that marks a job's args as encrypted, holding the cipher and the key's id.
META_KEY = "encrypted"
#: The one cipher written and read.
CIPHER = "aes-256-gcm"
#: What the dashboard, the CLI and the log lines show in place of encrypted args.
REDACTED = "[encrypted]"
#: The setting that holds the keys (named by every error about them).
SETTING = "encryption_keys"
KEY_BYTES = 32
NONCE_BYTES = 12


class EncryptionError(ConveyorError):
    """Encrypted args could not be written or read: no key configured, the job's key not held by
    this node, the ``cryptography`` package missing, or a row whose ciphertext does not verify."""


def key_id(key: bytes) -> str:
    """The public name of a key: the first 16 hex digits of its SHA-256 (reveals nothing of it)."""
    return hashlib.sha256(key).hexdigest()[:16]


def decode_key(text: Any, index: int) -> bytes:
    """One configured key as its 32 bytes; a bad one is refused naming its place in the setting,
    never echoing the key itself."""
    where = f"{SETTING}[{index}]"
    if not isinstance(text, str) or not text.strip():
        raise ValidationError(where, "<hidden>", "must be the base64 text of 32 random bytes")
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValidationError(
            where, "<hidden>", "is not base64 text (make one with: openssl rand -base64 32)"
        ) from None
    if len(raw) != KEY_BYTES:
        raise ValidationError(
            where,
            "<hidden>",
            f"decodes to {len(raw)} bytes; AES-256 needs {KEY_BYTES} (openssl rand -base64 32)",
        )
    return raw


def check_keys(value: Any) -> None:
    """Refuse an ``encryption_keys`` value that is not a tuple of good keys (``ValidationError``)."""
    if not isinstance(value, tuple):
        raise ValidationError(SETTING, "<hidden>", "must be a list of base64 keys, newest first")
    for index, text in enumerate(value):
        decode_key(text, index)
    if len({text.strip() for text in value}) != len(value):
        raise ValidationError(SETTING, "<hidden>", "a key is listed twice")


def is_encrypted(meta: Any) -> bool:
    """Whether a job with this meta holds encrypted args."""
    return isinstance(meta, Mapping) and isinstance(meta.get(META_KEY), Mapping)


def shown_args(args: Any, meta: Any) -> Any:
    """The args as the dashboard, the CLI and log lines show them: redacted when encrypted."""
    return REDACTED if is_encrypted(meta) else args


@dataclass(frozen=True)
class Keyring:
    """The keys of ``encryption_keys``, by id; the first one encrypts."""

    keys: tuple[tuple[str, bytes], ...]

    @classmethod
    def from_setting(cls, texts: Sequence[str]) -> Keyring:
        raws = [decode_key(text, index) for index, text in enumerate(texts)]
        return cls(tuple((key_id(raw), raw) for raw in raws))

    def encrypt(self, args: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
        """The stored args and the meta mark of ``args`` encrypted with the newest key."""
        if not self.keys:
            raise EncryptionError(
                f"an encrypted job needs a key: set {SETTING} (CONVEYOR_ENCRYPTION_KEYS), "
                "the base64 text of 32 random bytes (openssl rand -base64 32)"
            )
        kid, raw = self.keys[0]
        nonce = os.urandom(NONCE_BYTES)
        sealed = _aead(raw).encrypt(nonce, orjson.dumps(dict(args)), None)
        stored = {"data": base64.b64encode(sealed).decode(), "iv": base64.b64encode(nonce).decode()}
        return stored, {"cipher": CIPHER, "key": kid}

    def decrypt(self, args: Any, meta: Mapping[str, Any]) -> dict[str, Any]:
        """The plaintext args of an encrypted job; ``EncryptionError`` says why not."""
        mark = meta[META_KEY]
        if mark.get("cipher") != CIPHER:
            raise EncryptionError(
                f"its args are encrypted with {mark.get('cipher')!r}; only {CIPHER} is read"
            )
        kid = mark.get("key")
        raw = dict(self.keys).get(kid) if isinstance(kid, str) else None
        if raw is None:
            held = ", ".join(k for k, _ in self.keys) or "none"
            raise EncryptionError(
                f"its args are encrypted with key {kid}, which this node does not hold "
                f"(set {SETTING}; keys held: {held})"
            )
        try:
            sealed = base64.b64decode(args["data"], validate=True)
            nonce = base64.b64decode(args["iv"], validate=True)
            plain = _aead(raw).decrypt(nonce, sealed, None)
        except Exception as exc:  # InvalidTag, bad base64, missing fields: the row is not ours to read
            raise EncryptionError(
                f"its encrypted args do not verify with key {kid} ({type(exc).__name__})"
            ) from None
        value = orjson.loads(plain)
        if not isinstance(value, dict):
            raise EncryptionError("its encrypted args do not hold a JSON object")
        return value


def sealed(request: JobRequest, keyring: Keyring) -> JobRequest:
    """``request`` with its args encrypted when its worker was defined ``encrypted=True`` (and they
    are not encrypted yet); any other request as it is."""
    if request.worker not in ENCRYPTED_WORKERS or is_encrypted(request.meta):
        return request
    unique = request.unique
    if unique is not None and unique.queueing_lock is None and "args" in unique.fields:
        # Sealed args differ at every insert: such a job would never match another, silently.
        raise ValidationError(
            "unique",
            unique,
            f"{request.worker} stores its args encrypted, so uniqueness cannot look at them: make it "
            "unique by meta, e.g. Unique(fields=('worker', 'queue', 'meta'), keys=['order_id'])",
        )
    stored, mark = keyring.encrypt(request.args)
    return request.with_args(stored).with_meta({**request.meta, META_KEY: mark})


def _aead(key: bytes) -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        raise EncryptionError(
            "encrypted args need the cryptography package: pip install 'conveyor[encryption]'"
        ) from None
    return AESGCM(key)
