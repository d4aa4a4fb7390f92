"""The widget's sessions at the identity provider: the refresh token kept sealed in the vault, used at the provider
once the access token has expired, and the session ended when the provider refuses it. Only a hub with a provider
has any: authlib is imported by the first sign-in or refresh."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import httpx2

from elicithub.auth.vault import ProviderSession, Vault
from elicithub.config import OidcConfig
from elicithub.errors import IdentityUnavailable

if TYPE_CHECKING:
    from authlib.integrations.httpx_client import AsyncOAuth2Client

    from elicithub.auth.oidc import OidcVerifier, Person

log = logging.getLogger(__name__)

CALLBACK_PATH = "/auth/signed-in"
"""The redirect URI to register at the provider: PUBLIC_URL + this."""

UNSTATED_EXPIRY_S = 300.0
"""How long an access token is taken to hold when the provider does not say (`expires_in`): the session is checked
with the provider that often."""


@dataclass(frozen=True)
class Session:
    """Who a browser's session cookie signs in: the hub user, and the name the provider gave them, if any."""

    user_id: str
    name: str | None = None


def widget_client(oidc: OidcConfig, public_url: str, client_secret: str | None) -> AsyncOAuth2Client:
    """The widget's OAuth client at the provider (authlib): the sign-in's code exchange and each refresh."""
    from authlib.integrations.httpx_client import AsyncOAuth2Client

    return AsyncOAuth2Client(
        client_id=oidc.client_id,
        client_secret=client_secret,
        scope=" ".join(oidc.scopes),
        redirect_uri=public_url.rstrip("/") + CALLBACK_PATH,
        code_challenge_method="S256",
        token_endpoint_auth_method="client_secret_post" if client_secret else "none",
        timeout=10,
    )


class ProviderSessions:
    """Sessions that last while the provider's do, `session_s` at most. `client` makes the widget's OAuth client."""

    def __init__(
        self, vault: Vault, verifier: OidcVerifier, client: Callable[[], AsyncOAuth2Client], session_s: float
    ) -> None:
        self.vault = vault
        self.verifier = verifier
        self.client = client
        self.session_s = session_s
        self._refreshing: dict[str, asyncio.Future[ProviderSession | None]] = {}

    async def start(self, person: Person, token: Mapping[str, Any]) -> str:
        """A session for the person the provider has just signed in, with the tokens it gave; returns its id."""
        session_id = secrets.token_urlsafe(32)
        now = time.time()
        refresh = token.get("refresh_token")
        session = ProviderSession(
            person.user_id,
            person.name,
            refresh if isinstance(refresh, str) and refresh else None,
            _expiry(token, now),
            now + self.session_s,
        )
        await self.vault.save_provider_session(session_id, session)
        return session_id

    async def current(self, session_id: str) -> ProviderSession | None:
        """The session while the provider holds it: refreshed first when its access token has expired; None once the
        provider refused that (or the session ended). Raises `IdentityUnavailable` when the provider is out of reach."""
        session = await self.vault.provider_session(session_id)
        if session is None or session.expires_at > time.time():
            return session
        refreshing = self._refreshing.get(session_id)
        if refreshing is None:
            # One refresh at a time per session on this hub: a provider that rotates refresh tokens takes each once.
            refreshing = asyncio.ensure_future(self._refresh(session_id))
            self._refreshing[session_id] = refreshing
            refreshing.add_done_callback(lambda done: self._refreshed(session_id, done))
        return await asyncio.shield(refreshing)

    async def end(self, session_id: str) -> None:
        await self.vault.forget_provider_session(session_id)

    def _refreshed(self, session_id: str, done: asyncio.Future[ProviderSession | None]) -> None:
        self._refreshing.pop(session_id, None)
        if not done.cancelled():
            done.exception()  # seen here, should every request that waited for it have gone

    async def _refresh(self, session_id: str) -> ProviderSession | None:
        session = await self.vault.provider_session(session_id)
        if session is None or session.expires_at > time.time():
            return session  # refreshed meanwhile (by a request on another hub), or ended
        if session.refresh_token is None:
            await self.end(session_id)  # the provider gave no way to renew it: it ends with its access token
            return None
        token = await self._token(session.refresh_token)
        if token is None:
            latest = await self.vault.provider_session(session_id)
            if latest is not None and latest.refresh_token != session.refresh_token:
                return latest  # another hub refreshed it first, and the provider rotated the refresh token
            await self.end(session_id)
            return None
        refresh = token.get("refresh_token")
        refreshed = replace(
            session,
            refresh_token=refresh if isinstance(refresh, str) and refresh else session.refresh_token,
            expires_at=_expiry(token, time.time()),
        )
        await self.vault.save_provider_session(session_id, refreshed)
        return refreshed

    async def _token(self, refresh_token: str) -> Mapping[str, Any] | None:
        """The provider's answer to a refresh grant; None when it refused it (the person's session there ended)."""
        from authlib.integrations.httpx_client import OAuthError as AuthlibOAuthError

        metadata = await self.verifier.discover()
        try:
            async with self.client() as client:
                token: Mapping[str, Any] = await client.refresh_token(
                    metadata["token_endpoint"], refresh_token=refresh_token
                )
        except AuthlibOAuthError as exc:
            log.info("the identity provider refused to refresh a widget session (%s): it ends", exc.error)
            return None
        except httpx2.HTTPStatusError as exc:
            if exc.response.status_code >= 500:
                raise _unavailable(exc) from None
            log.info(
                "the identity provider refused to refresh a widget session (HTTP %s): it ends", exc.response.status_code
            )
            return None
        except (httpx2.HTTPError, ValueError) as exc:
            raise _unavailable(exc) from None
        return token


def _unavailable(exc: Exception) -> IdentityUnavailable:
    return IdentityUnavailable(
        f"The identity provider's token endpoint did not answer a refresh ({exc.__class__.__name__}); the widget "
        "session is checked again at its next request."
    )


def _expiry(token: Mapping[str, Any], now: float) -> float:
    """When the access token of a token response expires."""
    try:
        return now + float(token["expires_in"])
    except (KeyError, TypeError, ValueError):
        return now + UNSTATED_EXPIRY_S
