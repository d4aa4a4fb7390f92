"""Local stand-ins of Microsoft's services for a Teams bot, on 127.0.0.1, in Microsoft's wire formats:

- the Bot Framework's OpenID metadata and key set (`/v1/.well-known/openidconfiguration`, `/v1/.well-known/keys`):
  a real RSA key, whose private half signs the activities the tests send the hub (`sign`);
- Entra's token endpoint (`/{tenant}/oauth2/v2.0/token`): client credentials for the bot's app id and secret;
- the Bot Connector (`/teams/v3/conversations...`): a 1:1 chat opened, activities posted, updated, and streamed, each
  call checked for the bot's token and recorded, messages kept as Teams keeps them.

Served in a thread of the test process: the SDK fetches the keys with a blocking client, from the hub's event loop.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.conftest import ServedInThread
from tests.core_fixtures import DEADLINE_S

ISSUER = "https://api.botframework.com"
KEY_ID = "standin-key-1"


@dataclass
class Message:
    """A bot's message as Teams keeps it: its text, or its one Adaptive Card."""

    conversation: str
    id: str
    text: str = ""
    card: dict[str, Any] | None = None
    streaming: bool = False  # still a stream of typing updates: not yet final
    updates: int = 0

    def actions(self) -> list[dict[str, Any]]:
        return list((self.card or {}).get("actions") or [])

    def titles(self) -> list[str]:
        return [str(a.get("title")) for a in self.actions()]

    def texts(self) -> str:
        """Every text the card shows (its text blocks and facts), one line each."""
        found: list[str] = []

        def walk(element: Any) -> None:
            if isinstance(element, dict):
                if element.get("type") == "TextBlock":
                    found.append(str(element.get("text")))
                if element.get("type") == "FactSet":
                    found.extend(f"{f['title']}: {f['value']}" for f in element.get("facts") or [])
                for value in element.values():
                    walk(value)
            elif isinstance(element, list):
                for value in element:
                    walk(value)

        walk((self.card or {}).get("body"))
        return "\n".join(found)

    def inputs(self) -> dict[str, dict[str, Any]]:
        """The card's inputs by their label (or a toggle's title)."""
        inputs = [e for e in (self.card or {}).get("body") or [] if str(e.get("type", "")).startswith("Input.")]
        return {str(e.get("label") or e.get("title") or e["id"]): e for e in inputs}


@dataclass
class Recorded:
    method: str
    path: str
    body: Any
    query: dict[str, str] = field(default_factory=dict)


class MicrosoftStandIn:
    def __init__(self, app_id: str, password: str, tenant_id: str) -> None:
        self.app_id, self.password, self.tenant_id = app_id, password, tenant_id
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.calls: list[Recorded] = []
        self.tokens_issued: list[str] = []
        self.messages: dict[str, Message] = {}
        self.chats: dict[str, str] = {}  # person (as the hub named them) -> their 1:1 chat's conversation id
        self.refuse_tokens = False
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        app = Starlette(
            routes=[
                Route("/v1/.well-known/openidconfiguration", self._metadata),
                Route("/v1/.well-known/keys", self._keys),
                Route("/{tenant}/oauth2/v2.0/token", self._token, methods=["POST"]),
                Route("/teams/v3/conversations", self._create_conversation, methods=["POST"]),
                Route("/teams/v3/conversations/{conversation}/activities", self._post, methods=["POST"]),
                Route("/teams/v3/conversations/{conversation}/activities/{activity}", self._update, methods=["PUT"]),
            ]
        )
        self.served = ServedInThread(app)
        self.url = self.served.url
        self.service_url = f"{self.url}/teams/"
        self.openid_metadata_url = f"{self.url}/v1/.well-known/openidconfiguration"
        self.login_url = f"{self.url}/"

    def stop(self) -> None:
        self.served.stop()

    # -- signing what Teams sends

    def sign(
        self,
        service_url: str | None = None,
        *,
        audience: str | None = None,
        issuer: str = ISSUER,
        expires_in: float = 3600,
        key: rsa.RSAPrivateKey | None = None,
    ) -> str:
        """A Bot Framework token for an activity, as the connector signs it (RS256, its key id)."""
        now = int(time.time())
        claims = {
            "iss": issuer,
            "aud": audience or self.app_id,
            "iat": now - 10,
            "nbf": now - 10,
            "exp": now + int(expires_in),
            "serviceurl": service_url or self.service_url,
        }
        return jwt.encode(claims, key or self.key, algorithm="RS256", headers={"kid": KEY_ID})

    # -- what the tests read

    def count(self, method: str, part: str = "") -> int:
        with self._lock:
            return sum(1 for c in self.calls if c.method == method and part in c.path)

    def in_conversation(self, conversation: str) -> list[Message]:
        """The bot's messages in a conversation, in the order they were posted."""
        with self._lock:
            return [m for m in self.messages.values() if m.conversation == conversation]

    def chat_with(self, person: str) -> list[Message]:
        """The bot's messages in its 1:1 chat with a person (whom the hub named by Teams id or object id)."""
        with self._lock:
            chat = self.chats.get(person)
            return [] if chat is None else self.in_conversation(chat)

    def wait(self, what: Callable[[], Any], timeout: float = DEADLINE_S) -> Any:
        """Until `what()` is truthy (the hub sends from its own tasks); returns what it returned."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                found = what()
            if found:
                return found
            time.sleep(0.02)
        raise AssertionError(f"not seen in time; calls so far: {[(c.method, c.path) for c in self.calls]}")

    # -- the services

    async def _metadata(self, request: Request) -> JSONResponse:
        return JSONResponse({"issuer": ISSUER, "jwks_uri": f"{self.url}/v1/.well-known/keys"})

    async def _keys(self, request: Request) -> JSONResponse:
        jwk = RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return JSONResponse({"keys": [{**jwk, "kid": KEY_ID, "use": "sig", "alg": "RS256"}]})

    async def _token(self, request: Request) -> JSONResponse:
        form = dict(await request.form())
        with self._lock:
            self.calls.append(Recorded("POST", request.url.path, form))
            good = (
                request.path_params["tenant"] == self.tenant_id
                and form.get("grant_type") == "client_credentials"
                and form.get("client_id") == self.app_id
                and form.get("client_secret") == self.password
                and form.get("scope") == "https://api.botframework.com/.default"
            )
            if not good or self.refuse_tokens:
                return JSONResponse({"error": "invalid_client"}, status_code=401)
            now = int(time.time())
            claims = {"aud": "https://api.botframework.com", "iss": f"https://sts.windows.net/{self.tenant_id}/"}
            claims.update({"appid": self.app_id, "tid": self.tenant_id, "jti": f"t{next(self._ids)}"})
            token = jwt.encode({**claims, "iat": now, "exp": now + 3599}, self.key, algorithm="RS256")
            self.tokens_issued.append(token)
        return JSONResponse({"token_type": "Bearer", "expires_in": 3599, "access_token": token})

    def _authorized(self, request: Request) -> bool:
        given = request.headers.get("authorization", "").removeprefix("Bearer ")
        return given in self.tokens_issued

    async def _create_conversation(self, request: Request) -> JSONResponse:
        if not self._authorized(request):
            return JSONResponse({"error": {"code": "Unauthorized"}}, status_code=401)
        body = await request.json()
        with self._lock:
            self.calls.append(Recorded("POST", request.url.path, body))
            members = body.get("members") or []
            if len(members) != 1 or body.get("isGroup") or body.get("tenantId") != self.tenant_id:
                return JSONResponse({"error": {"code": "BadArgument"}}, status_code=400)
            person = str(members[0]["id"])
            chat = self.chats.setdefault(person, f"a:chat-with-{person}")  # Teams gives the same chat back
        return JSONResponse({"id": chat}, status_code=201)

    async def _post(self, request: Request) -> JSONResponse:
        if not self._authorized(request):
            return JSONResponse({"error": {"code": "Unauthorized"}}, status_code=401)
        body = await request.json()
        conversation = request.path_params["conversation"]
        with self._lock:
            self.calls.append(Recorded("POST", request.url.path, body, dict(request.query_params)))
            stream = next((e for e in body.get("entities") or [] if e.get("type") == "streaminfo"), None)
            if stream is not None and body.get("id") in self.messages:  # a stream's next update, or its end
                message = self.messages[body["id"]]
                message.text, message.updates = str(body.get("text") or ""), message.updates + 1
                message.streaming = stream.get("streamType") != "final"
                return JSONResponse({"id": message.id}, status_code=201)
            message = Message(conversation, f"{1_700_000_000_000 + next(self._ids)}")
            self._fill(message, body)
            message.streaming = stream is not None
            self.messages[message.id] = message
        return JSONResponse({"id": message.id}, status_code=201)

    async def _update(self, request: Request) -> JSONResponse:
        if not self._authorized(request):
            return JSONResponse({"error": {"code": "Unauthorized"}}, status_code=401)
        body = await request.json()
        with self._lock:
            self.calls.append(Recorded("PUT", request.url.path, body))
            message = self.messages.get(request.path_params["activity"])
            if message is None or message.conversation != request.path_params["conversation"]:
                return JSONResponse({"error": {"code": "NotFound"}}, status_code=404)
            self._fill(message, body)
            message.updates += 1
        return JSONResponse({"id": message.id})

    @staticmethod
    def _fill(message: Message, body: dict[str, Any]) -> None:
        message.text = str(body.get("text") or "")
        adaptive = "application/vnd.microsoft.card.adaptive"
        cards = [a for a in body.get("attachments") or [] if a["contentType"] == adaptive]
        message.card = cards[0]["content"] if cards else None
