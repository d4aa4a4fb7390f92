"""The hub's master key and the purpose-bound keys derived from it."""

from __future__ import annotations

import base64
import logging
import os
import secrets
import tempfile
from collections.abc import Mapping
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from elicithub.config import SecretsConfig
from elicithub.errors import KeyUnusable

__all__ = ["KeyUnusable", "Keys", "load_keys"]

log = logging.getLogger(__name__)


class Keys:
    """One master secret; every use (vault encryption, link signing, sessions) gets its own derived key."""

    def __init__(self, master: bytes) -> None:
        if len(master) < 32:
            raise KeyUnusable("the master key must be at least 32 bytes")
        self._master = master

    def derive(self, purpose: str) -> bytes:
        hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=f"elicithub/{purpose}".encode())
        return hkdf.derive(self._master)

    @classmethod
    def generate(cls) -> Keys:
        return cls(secrets.token_bytes(32))


def _decode(text: str) -> bytes:
    text = text.strip()
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        raw = b""
    # Not base64 of 32+ bytes: take the text itself as the secret (a long passphrase).
    return raw if len(raw) >= 32 else text.encode()


def load_keys(config: SecretsConfig, environ: Mapping[str, str] | None = None) -> Keys:
    """The key from the environment variable, else from the key file, generating it (mode 0600) on first run."""
    environ = os.environ if environ is None else environ
    value = environ.get(config.key_env)
    if value:
        master = _decode(value)
        if len(master) < 32:
            raise KeyUnusable(f"{config.key_env}: the key must be at least 32 bytes (base64url of 32 random bytes)")
        return Keys(master)
    path = Path(config.key_file)
    if not path.exists():
        _generate(path)
    if path.stat().st_mode & 0o077:
        log.warning("%s is readable by other users; chmod 600 it", path)
    master = _decode(path.read_text())
    if len(master) < 32:
        raise KeyUnusable(f"{path}: the key must be at least 32 bytes")
    return Keys(master)


def _generate(path: Path) -> None:
    """Write a new key file atomically: whole in a private temp file, then linked into place. Of hubs starting at
    once exactly one key wins, and nobody ever reads a half-written file (they read the winner's)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temp = tempfile.mkstemp(prefix=".secret-", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode() + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(temp, path)  # fails if another process put its key there first
        except FileExistsError:
            return
        log.info("generated a new master key in %s", path)
    finally:
        os.unlink(temp)
