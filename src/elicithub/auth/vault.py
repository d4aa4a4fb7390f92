"""The token vault: credentials per (server, user), client registrations, pending sign-ins and the widget's provider
sessions, encrypted at rest."""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from elicithub.auth.keys import Keys
from elicithub.core.ports import KeyValueStore


@dataclass(frozen=True)
class Credential:
    """What the hub keeps for one user of one server. Never logged, never put on a stream."""

    access_token: str
    token_type: str = "Bearer"
    refresh_token: str | None = None
    expires_at: float | None = None  # unix seconds
    scope: str | None = None

    def __repr__(self) -> str:  # keep tokens out of tracebacks and debug output
        return f"Credential(token_type={self.token_type!r}, expires_at={self.expires_at!r}, scope={self.scope!r})"


@dataclass(frozen=True)
class ClientRegistration:
    """The OAuth client the hub is at one authorization server (configured or dynamically registered)."""

    client_id: str
    client_secret: str | None = None
    token_endpoint_auth_method: str = "client_secret_post"
    scope: str | None = None  # what it was registered for, when the hub registered it

    def __repr__(self) -> str:
        return f"ClientRegistration(client_id={self.client_id!r})"


@dataclass(frozen=True)
class SignIn:
    """A sign-in between /auth/connect and /auth/callback, found again by its `state`."""

    elicitation_id: str
    user_id: str
    server_id: str
    code_verifier: str
    browser: str  # hash of the cookie set on the browser that started it

    def __repr__(self) -> str:
        return f"SignIn(elicitation_id={self.elicitation_id!r}, server_id={self.server_id!r})"


@dataclass(frozen=True)
class ProviderSession:
    """A widget session signed in at the identity provider: who, until when the provider's access token holds, the
    refresh token that renews it (None: the session ends with the access token), and the hub session's own end."""

    user_id: str
    name: str | None
    refresh_token: str | None
    expires_at: float  # unix seconds
    ends_at: float

    def __repr__(self) -> str:
        return f"ProviderSession(expires_at={self.expires_at!r}, ends_at={self.ends_at!r})"


Kept = TypeVar("Kept", Credential, ClientRegistration, SignIn, ProviderSession)
"""What the vault keeps, each sealed under the key it is stored at."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Vault:
    """Every value is sealed with AES-GCM under a key derived for the vault, bound to the key it is stored under."""

    def __init__(self, kv: KeyValueStore, keys: Keys) -> None:
        self.kv = kv
        self._aead = AESGCM(keys.derive("vault"))

    async def _put(self, key: str, record: Kept, ttl_s: float | None = None) -> None:
        nonce = os.urandom(12)
        sealed = nonce + self._aead.encrypt(nonce, json.dumps(asdict(record)).encode(), key.encode())
        await self.kv.put(key, sealed, ttl_s)

    def _opened(self, kind: type[Kept], key: str, sealed: bytes | None) -> Kept | None:
        if sealed is None or len(sealed) < 13:
            return None
        try:
            data: dict[str, Any] = json.loads(self._aead.decrypt(sealed[:12], sealed[12:], key.encode()))
        except (InvalidTag, ValueError):
            return None  # sealed under another key (the master key changed): as good as absent
        return kind(**data)

    @staticmethod
    def _credential_key(server_id: str, user_id: str) -> str:
        return f"credential:{server_id}:{_digest(user_id)}"

    async def credential(self, server_id: str, user_id: str) -> Credential | None:
        key = self._credential_key(server_id, user_id)
        return self._opened(Credential, key, await self.kv.get(key))

    async def save_credential(self, server_id: str, user_id: str, credential: Credential) -> None:
        await self._put(self._credential_key(server_id, user_id), credential)

    async def forget_credential(self, server_id: str, user_id: str) -> None:
        await self.kv.delete(self._credential_key(server_id, user_id))

    async def client(self, issuer: str) -> ClientRegistration | None:
        key = f"client:{_digest(issuer)}"
        return self._opened(ClientRegistration, key, await self.kv.get(key))

    async def save_client(self, issuer: str, client: ClientRegistration) -> None:
        await self._put(f"client:{_digest(issuer)}", client)

    async def start_sign_in(self, state: str, sign_in: SignIn, ttl_s: float) -> None:
        await self._put(f"signin:{_digest(state)}", sign_in, ttl_s)

    async def take_sign_in(self, state: str) -> SignIn | None:
        """The sign-in for this `state`, once: a replayed or unknown state gets None."""
        key = f"signin:{_digest(state)}"
        return self._opened(SignIn, key, await self.kv.take(key))

    async def provider_session(self, session_id: str) -> ProviderSession | None:
        key = f"session:{_digest(session_id)}"
        return self._opened(ProviderSession, key, await self.kv.get(key))

    async def save_provider_session(self, session_id: str, session: ProviderSession) -> None:
        """Kept until the session ends (`ends_at`)."""
        await self._put(f"session:{_digest(session_id)}", session, max(session.ends_at - time.time(), 1))

    async def forget_provider_session(self, session_id: str) -> None:
        await self.kv.delete(f"session:{_digest(session_id)}")
