"""Bearer JWTs from the company's OpenID provider: discovery, its signing keys (cached), and each token's checks."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection
from dataclasses import dataclass

import httpx
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, JWKRegistry, OKPKey, RSAKey
from joserfc.jws import extract_compact

from elicithub.config import OidcConfig
from elicithub.core.jsoncodec import JsonObject
from elicithub.errors import IdentityUnavailable

log = logging.getLogger(__name__)

PublicKey = RSAKey | ECKey | OKPKey

ALGORITHMS: dict[str, frozenset[str]] = {
    "RSA": frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}),
    "EC": frozenset({"ES256", "ES384", "ES512"}),
    "OKP": frozenset({"EdDSA", "Ed25519"}),
}
"""The algorithms a key of each type may verify: the key decides, so `none` and HS* (a public key as an HMAC
secret) never pass, whatever a token's header says. Symmetric keys in a JWKS are ignored."""

PRIVATE_MEMBERS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth"})
"""Private key members a careless provider might publish: dropped, so the key is only ever a public one."""

LEEWAY_S = 60
"""Clock skew allowed on `exp`, `nbf` and `iat`."""

KEYS_MAX_AGE_S = 3600.0
"""How long fetched keys are trusted before the next token refetches them (a key the provider withdrew goes then)."""

DISCOVERY_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Person:
    """Someone the provider signed in: the hub user (`user_claim`), the name to greet them by, and their address
    when the provider says it verified it (`email` with `email_verified: true`), if it gave them."""

    user_id: str
    name: str | None = None
    email: str | None = None


NAME_CLAIMS = ("name", "preferred_username", "email")
"""Where an ID token names its person for people to read, first found first (`sub` is often an opaque id)."""


class OidcVerifier:
    """Verifies the provider's JWTs. Keys are fetched once (at start or at the first token), again when they are
    old, and for a `kid` they lack at most once per `refetch_cooldown_s`: a rotated-in key works at once, while
    tokens with made-up kids cannot make the hub hammer the provider."""

    refetch_cooldown_s = 10.0

    def __init__(self, config: OidcConfig, audiences: Collection[str], http: httpx.AsyncClient | None = None) -> None:
        """`audiences`: any of these in `aud` makes a token the hub's (the configured audience, its resource URLs)."""
        self.config = config
        self.audiences = [config.audience, *(a for a in audiences if a != config.audience)]
        self._http = http or httpx.AsyncClient(timeout=DISCOVERY_TIMEOUT_S)
        self._metadata: JsonObject | None = None
        self._keys: dict[str, PublicKey] | None = None
        self._fetched_at = 0.0
        self._missed_at = -float("inf")
        self._lock = asyncio.Lock()

    @property
    def metadata(self) -> JsonObject | None:
        """The provider's discovery document, once fetched."""
        return self._metadata

    async def start(self) -> None:
        """Fetch the keys ahead of the first token; an unreachable provider is logged, not fatal (static users and
        sessions still work, and the next token tries again)."""
        try:
            await self._refresh()
        except IdentityUnavailable as exc:
            log.warning("%s", exc)

    async def close(self) -> None:
        await self._http.aclose()

    async def discover(self) -> JsonObject:
        """The provider's discovery document (OpenID Connect Discovery 1.0), fetched once."""
        if self._metadata is None:
            issuer = self.config.issuer
            url = issuer.rstrip("/") + "/.well-known/openid-configuration"
            metadata = await self._get_json(url, "discovery document")
            if metadata.get("issuer") != issuer:
                raise IdentityUnavailable(
                    f"The provider at {url} names its issuer {metadata.get('issuer')!r}, not {issuer!r}: "
                    "set auth.oidc.issuer to exactly the provider's issuer."
                )
            if not isinstance(metadata.get("jwks_uri"), str):
                raise IdentityUnavailable(f"The provider's discovery document at {url} has no jwks_uri.")
            self._metadata = metadata
        return self._metadata

    async def verify(self, token: str) -> str | None:
        """The hub user a JWT names; fetches the keys if they are missing, old, or lack the token's `kid`.

        Raises `IdentityUnavailable` when the token may be good but the provider's keys cannot be had."""
        return self.user(token) if await self._keys_for(token) else None

    async def signed_in(self, id_token: str, nonce: str) -> Person | None:
        """Who the ID token a sign-in got back names: issued to the hub's client, for this sign-in's nonce."""
        if not await self._keys_for(id_token):
            return None
        claims = self._claims(id_token, [self.config.client_id or ""])
        if claims is None or claims.get("nonce") != nonce:
            return None
        user = self._user_of(claims)
        return None if user is None else Person(user, _name(claims), _verified_email(claims))

    async def _keys_for(self, token: str) -> bool:
        """Whether `token` is a JWS; if so, the keys are made current enough to check it."""
        header = _header(token)
        if header is None:
            return False
        now = time.monotonic()
        if self._keys is None:
            await self._refresh()
        elif now - self._fetched_at > KEYS_MAX_AGE_S:
            await self._refresh(known=self._keys)
        elif header.get("kid") not in self._keys and now - self._missed_at > self.refetch_cooldown_s:
            self._missed_at = now
            await self._refresh(known=self._keys)
        return True

    async def _refresh(self, known: dict[str, PublicKey] | None = None) -> None:
        async with self._lock:
            if self._keys is not known:
                return  # another request refreshed them while this one waited
            metadata = await self.discover()
            document = await self._get_json(metadata["jwks_uri"], "key set")
            self._keys = _public_keys(document)
            self._fetched_at = time.monotonic()

    async def _get_json(self, url: str, what: str) -> JsonObject:
        try:
            response = await self._http.get(url, headers={"accept": "application/json"})
            response.raise_for_status()
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise IdentityUnavailable(
                f"The identity provider's {what} at {url} could not be fetched ({exc.__class__.__name__}); "
                "JWTs cannot be checked until it can."
            ) from None
        if not isinstance(body, dict):
            raise IdentityUnavailable(f"The identity provider's {what} at {url} is not a JSON object.")
        return body

    def user(self, token: str) -> str | None:
        """The hub user a JWT names, checked against the keys already fetched (no I/O); None if it is not valid."""
        claims = self._claims(token, self.audiences)
        return self._user_of(claims) if claims is not None else None

    def groups(self, token: str, *, id_token: bool = False) -> frozenset[str]:
        """The groups a valid JWT puts its person in (`groups_claim`), checked against the keys already fetched (no
        I/O); none when it is not valid. `id_token`: the ID token of a widget sign-in (issued to `client_id`), which
        `signed_in_user` has just checked, rather than a bearer token."""
        claims = self._claims(token, [self.config.client_id or ""] if id_token else self.audiences)
        listed = claims.get(self.config.groups_claim) if claims is not None else None
        if isinstance(listed, str):  # some providers give a lone group as a string
            listed = [listed]
        return frozenset(g for g in listed if isinstance(g, str) and g) if isinstance(listed, list) else frozenset()

    def _user_of(self, claims: JsonObject) -> str | None:
        user = claims.get(self.config.user_claim)
        return user if isinstance(user, str) and user else None

    def _claims(self, token: str, audiences: list[str]) -> JsonObject | None:
        header = _header(token)
        if header is None or self._keys is None:
            return None
        key = self._keys.get(str(header.get("kid")))
        alg = header.get("alg")
        if key is None or not isinstance(alg, str) or alg not in ALGORITHMS[key.key_type]:
            return None
        if key.get("alg") not in (None, alg):
            return None
        registry = jwt.JWTClaimsRegistry(
            leeway=LEEWAY_S,
            iss={"essential": True, "value": self.config.issuer},
            aud={"essential": True, "values": audiences},
            exp={"essential": True},
        )
        try:
            claims: JsonObject = jwt.decode(token, key, algorithms=[alg]).claims
            registry.validate(claims)
        except (JoseError, ValueError):
            return None
        return claims


def _name(claims: JsonObject) -> str | None:
    return next((v for c in NAME_CLAIMS if isinstance(v := claims.get(c), str) and v.strip()), None)


def _verified_email(claims: JsonObject) -> str | None:
    email = claims.get("email")
    return email if claims.get("email_verified") is True and isinstance(email, str) and "@" in email else None


def _header(token: str) -> JsonObject | None:
    """A compact JWS's protected header, unverified; None for anything else (a static token, say)."""
    if token.count(".") != 2:
        return None
    try:
        header: JsonObject = extract_compact(token.encode()).protected
    except (JoseError, ValueError):
        return None
    return header


def _public_keys(document: JsonObject) -> dict[str, PublicKey]:
    """The key set's asymmetric public keys by `kid`; anything else in it is skipped (RFC 7517 §5)."""
    keys: dict[str, PublicKey] = {}
    for data in document.get("keys", []):
        if not isinstance(data, dict) or data.get("use", "sig") != "sig" or not isinstance(data.get("kid"), str):
            continue
        if data.get("kty") not in ALGORITHMS:
            continue
        try:
            key = JWKRegistry.import_key({k: v for k, v in data.items() if k not in PRIVATE_MEMBERS})
        except (JoseError, ValueError):
            continue
        if isinstance(key, PublicKey):
            keys[data["kid"]] = key
    return keys
