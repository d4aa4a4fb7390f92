"""Who callers are: static users and their tokens, and the company's OpenID provider."""

from __future__ import annotations

from pydantic import Field

from elicithub.config.base import Strict


class UserConfig(Strict):
    """A static user and their bearer token (development and tests; a deployment names its identity provider)."""

    id: str = Field(min_length=1)
    """The hub user."""
    token: str = Field(min_length=8)
    """Their bearer token."""


SESSION_S = 8 * 3600
"""How long a widget session lasts by default (`auth.oidc.session_s`; the demo's dev session too)."""


class OidcConfig(Strict):
    """The company's OpenID provider: its JWTs name hub users on every surface that takes a bearer token."""

    issuer: str = Field(pattern=r"^https?://[^/\s]+")
    """The provider; discovery at `ISSUER/.well-known/openid-configuration`."""
    audience: str = Field(min_length=1)
    """The `aud` a bearer JWT must carry."""
    client_id: str | None = None
    """The widget's sign-in (authorization code + PKCE); unset: no sign-in in the browser."""
    client_secret_env: str | None = None
    """A confidential client's secret, by environment variable; a public client has none."""
    user_claim: str = Field(default="sub", min_length=1)
    """The claim that names the hub user."""
    groups_claim: str = Field(default="groups", min_length=1)
    """The claim listing a person's groups (a list of names), in their JWTs and ID tokens."""
    admin_group: str | None = Field(default=None, min_length=1)
    """Its members are admins of the hub (see `admins`)."""
    scopes: list[str] = ["openid", "profile", "email"]
    """What the sign-in asks for, and what a 401 names."""
    session_s: int = Field(default=SESSION_S, ge=60, le=30 * 24 * 3600)
    """How long a widget session lasts at most; the provider's session bounds it sooner (refresh token refused)."""


class AuthConfig(Strict):
    """Who callers are: the company's identity provider, and whether anyone unidentified may chat."""

    oidc: OidcConfig | None = None
    """The identity provider; unset: only `users:` tokens (and the demo's dev user)."""
    anonymous: bool = True
    """false: chat needs a user (a bearer token or a signed-in session)."""
