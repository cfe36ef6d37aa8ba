"""Optional Ed25519 signatures over a session's digests (`claimcheck sign`; `--replay` checks them).

Record digests are unkeyed: anyone who can run claimcheck can edit a note and re-seal the whole
chain, and every digest will agree. A signature is what binds the session to a key: it covers the
canonical session payload (`session_payload`: the session meta digest and each stage's record
digest, in stage order), so any re-sealing after signing breaks it. It proves only that whoever
holds the private key with the printed fingerprint signed these digests: compare the fingerprint
with one you trust; deleting signature.toml leaves an unsigned session, which replay says.

The key is a plain Ed25519 key (the `cryptography` package), PKCS#8 PEM, unencrypted, mode 0600.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from claimcheck.engine.errors import ClaimcheckError
from claimcheck.engine.evidence import (
    EvidenceError,
    SessionMeta,
    atomic_write_text,
    dump_toml,
    now_iso,
    read_toml,
)
from claimcheck.engine.pipeline import registry

SIGNATURE_FILE = "signature.toml"
FORMAT = "claimcheck-ed25519-v1"


class SigningError(ClaimcheckError):
    """A key that cannot be read or written."""


def session_payload(meta: SessionMeta, digests: dict[str, str]) -> str:
    """The canonical text a signature covers (and the report names by its digest)."""
    lines = [FORMAT, f"session {meta.id}", f"meta {meta.compute_meta_digest()}"]
    lines += [f"{name} {digests.get(name) or '-'}" for name in registry.STAGE_NAMES]
    return "\n".join(lines) + "\n"


def session_digest(meta: SessionMeta, digests: dict[str, str]) -> str:
    return "sha256:" + hashlib.sha256(session_payload(meta, digests).encode("utf-8")).hexdigest()


def fingerprint(public_raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(public_raw).hexdigest()[:32]


def new_key(path: Path) -> str:
    """Write a new Ed25519 private key (PEM, 0600) and its public key beside it; return the fingerprint."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = Path(path)
    if path.exists():
        raise SigningError(f"{path} exists: a key is never overwritten")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    raw = _public_raw(key.public_key())
    Path(str(path) + ".pub").write_text(raw.hex() + "\n", encoding="utf-8")
    return fingerprint(raw)


def _public_raw(public_key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _load_key(path: Path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise SigningError(f"cannot read the private key {path}: {exc}") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningError(f"{path} is not an Ed25519 private key")
    return key


def sign(session_dir: Path, meta: SessionMeta, digests: dict[str, str], key_path: Path) -> str:
    """Write signature.toml over the session's current digests; return the key fingerprint."""
    key = _load_key(key_path)
    payload = session_payload(meta, digests).encode("utf-8")
    raw = _public_raw(key.public_key())
    doc = {
        "format": FORMAT,
        "public_key": raw.hex(),
        "fingerprint": fingerprint(raw),
        "session_digest": session_digest(meta, digests),
        "signed_at": now_iso(),
        "signature": key.sign(payload).hex(),
    }
    atomic_write_text(Path(session_dir) / SIGNATURE_FILE, dump_toml(doc))
    return doc["fingerprint"]


@dataclass
class SignatureCheck:
    present: bool
    valid: bool = False
    fingerprint: str = ""
    problem: str = ""


def check(session_dir: Path, meta: SessionMeta, digests: dict[str, str]) -> SignatureCheck:
    """Is signature.toml (when there is one) a valid signature over the session's current digests?"""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    path = Path(session_dir) / SIGNATURE_FILE
    if not path.exists():
        return SignatureCheck(False)
    try:
        doc = read_toml(path)
        if doc.get("format") != FORMAT:
            return SignatureCheck(True, problem=f"unknown signature format {doc.get('format')!r}")
        raw = bytes.fromhex(str(doc["public_key"]))
        public = Ed25519PublicKey.from_public_bytes(raw)
        sig = bytes.fromhex(str(doc["signature"]))
    except (EvidenceError, KeyError, ValueError) as exc:
        return SignatureCheck(True, problem=f"{SIGNATURE_FILE} is unreadable: {exc}")
    fp = fingerprint(raw)
    try:
        public.verify(sig, session_payload(meta, digests).encode("utf-8"))
    except InvalidSignature:
        return SignatureCheck(
            True,
            fingerprint=fp,
            problem=f"the signature by key {fp} does not cover the session as it is now: "
            "a record, the chain or the session meta changed after signing",
        )
    return SignatureCheck(True, True, fp)
