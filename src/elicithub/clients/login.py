"""`elicithub login`: an access token for the hub from its identity provider, through the browser and a loopback
redirect (RFC 8252: authorization code with PKCE), found from the hub's own protected-resource metadata."""

from __future__ import annotations

import asyncio
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import httpx
from authlib.integrations.httpx_client import AsyncOAuth2Client

from elicithub.clients.terminal import Opener, open_browser
from elicithub.errors import HubError

CALLBACK_PATH = "/callback"
WAIT_S = 300.0
"""How long the person may take at the provider."""


class LoginFailed(HubError):
    """No token: the hub names no provider, the provider refused, or the person did not finish in time."""

    code = "login_failed"


@dataclass(frozen=True)
class Provider:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    scopes: list[str]


async def find_provider(hub_url: str, http: httpx.AsyncClient) -> Provider:
    """The provider the hub's metadata (RFC 9728) names, and its endpoints (OpenID Connect Discovery)."""
    base = hub_url.rstrip("/")
    try:
        resource = (await http.get(f"{base}/.well-known/oauth-protected-resource")).raise_for_status().json()
        issuer = str(resource["authorization_servers"][0])
        discovery = f"{issuer.rstrip('/')}/.well-known/openid-configuration"
        metadata = (await http.get(discovery)).raise_for_status().json()
        return Provider(
            issuer,
            str(metadata["authorization_endpoint"]),
            str(metadata["token_endpoint"]),
            [str(s) for s in resource.get("scopes_supported", ["openid"])],
        )
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise LoginFailed(
            f"The hub at {base} names no identity provider to sign in with ({exc.__class__.__name__}); "
            "use a token from its admin in $ELICITHUB_TOKEN instead."
        ) from None


async def login(
    hub_url: str, client_id: str, say: Callable[[str], object], *, port: int = 0, opener: Opener = open_browser
) -> str:
    """Sign in at the hub's provider as the public client `client_id` (registered with the redirect URI
    http://127.0.0.1:PORT/callback); returns the access token. `say` tells the person what to do."""
    async with httpx.AsyncClient(timeout=10) as http:
        provider = await find_provider(hub_url, http)
    answer: asyncio.Future[dict[str, str]] = asyncio.get_running_loop().create_future()
    server = await asyncio.start_server(lambda r, w: _callback(r, w, answer), "127.0.0.1", port)
    redirect_uri = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}{CALLBACK_PATH}"
    verifier = secrets.token_urlsafe(48)
    async with (
        server,
        AsyncOAuth2Client(
            client_id=client_id,
            scope=" ".join(provider.scopes),
            redirect_uri=redirect_uri,
            code_challenge_method="S256",
            token_endpoint_auth_method="none",
            timeout=10,
        ) as client,
    ):
        url, state = client.create_authorization_url(
            provider.authorization_endpoint, code_verifier=verifier, resource=hub_url.rstrip("/")
        )
        if not opener(url):
            say(f"Open this link to sign in:\n{url}")
        try:
            returned = await asyncio.wait_for(answer, WAIT_S)
        except TimeoutError:
            raise LoginFailed(f"No sign-in came back within {WAIT_S:.0f} s.") from None
        if "error" in returned:
            raise LoginFailed(f"The identity provider said: {returned['error']}.")
        if not hmac.compare_digest(returned.get("state", ""), state):
            raise LoginFailed("The sign-in that came back is not this one's; run elicithub login again.")
        token = await client.fetch_token(provider.token_endpoint, code=returned.get("code", ""), code_verifier=verifier)
    access: str = token["access_token"]
    return access


async def _callback(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, answer: asyncio.Future[dict[str, str]]
) -> None:
    """The browser's one request to the loopback redirect URI: its query is the sign-in's answer."""
    try:
        request_line = (await reader.readline()).decode("latin-1")
        target = request_line.split(" ")[1] if request_line.count(" ") >= 2 else ""
        parts = urlsplit(target)
        if parts.path == CALLBACK_PATH and not answer.done():
            answer.set_result({k: v[0] for k, v in parse_qs(parts.query).items()})
            body = b"Signed in. You can close this tab and go back to the terminal."
            status = b"200 OK"
        else:
            body, status = b"Not found.", b"404 Not Found"
        head = (
            b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
        )
        writer.write(head % len(body) + body)
        await writer.drain()
    finally:
        writer.close()
