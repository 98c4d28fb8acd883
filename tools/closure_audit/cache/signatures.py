"""Ed25519 signatures of narinfos, checked against trusted public keys.

Keys and signatures use Nix's format: `NAME:BASE64`, where the public key is
32 bytes and a signature 64 bytes. A narinfo is trusted when one of its `Sig`
lines is a valid signature, by a key of that name, of its fingerprint
(narinfo.NarInfo.fingerprint). The cryptography is the `cryptography`
package's; nothing here does arithmetic on curves.
"""

from __future__ import annotations

import base64
import binascii

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ..errors import UsageError
from .narinfo import NarInfo


def _decode(text: str, size: int) -> bytes | None:
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error:
        return None
    return raw if len(raw) == size else None


def parse_public_keys(text: str) -> dict[str, Ed25519PublicKey]:
    """Keys separated by white space, as Nix's `trusted-public-keys` setting."""
    keys: dict[str, Ed25519PublicKey] = {}
    for word in text.split():
        name, sep, body = word.partition(":")
        raw = _decode(body, 32) if sep and name else None
        if raw is None:
            raise UsageError(f"--trusted-public-keys: '{word}' is not NAME:BASE64 of a 32-byte ed25519 public key")
        keys[name] = Ed25519PublicKey.from_public_bytes(raw)
    if not keys:
        raise UsageError("--trusted-public-keys: no key given")
    return keys


def check(info: NarInfo, keys: dict[str, Ed25519PublicKey]) -> str | None:
    """None when a trusted key signed this narinfo; otherwise why not."""
    fingerprint = info.fingerprint().encode()
    seen = []
    for sig in info.sigs:
        name, _, body = sig.partition(":")
        seen.append(name)
        key = keys.get(name)
        raw = _decode(body, 64)
        if key is None or raw is None:
            continue
        try:
            key.verify(raw, fingerprint)
            return None
        except InvalidSignature:
            continue
    if not seen:
        return "it carries no signature"
    trusted = [n for n in seen if n in keys]
    if trusted:
        return f"its signature by {', '.join(trusted)} does not match its contents"
    return f"it is signed only by untrusted keys ({', '.join(seen)})"
