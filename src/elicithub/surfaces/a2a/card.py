"""Who calls the hub's A2A server, and the agent card that tells clients how: bearer tokens of the hub's users, or
JWTs from its OpenID provider."""

from __future__ import annotations

from collections.abc import Callable

from a2a.auth.user import UnauthenticatedUser, User
from a2a.server.context import ServerCallContext
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    OpenIdConnectSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
)
from a2a.types.a2a_pb2 import StringList
from a2a.utils.errors import InvalidRequestError
from starlette.requests import Request

from elicithub import __version__
from elicithub.runtime.conversations import Caller
from elicithub.surfaces.gates import user_of


class HubUser(User):
    def __init__(self, user_id: str) -> None:
        self.user_id = user_id

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self.user_id


class BearerCallContext(DefaultServerCallContextBuilder):
    """The caller is the hub user of the request's bearer token (tasks are scoped to them by the SDK)."""

    def __init__(self, user_for: Callable[[str], str | None]) -> None:
        self.user_for = user_for

    def build_user(self, request: Request) -> User:
        user = user_of(request.headers, self.user_for)
        return HubUser(user) if user is not None else UnauthenticatedUser()


def a2a_caller(context: ServerCallContext | None) -> Caller:
    user = context.user if context is not None else None
    if not isinstance(user, HubUser):
        raise InvalidRequestError(message="No user: send a bearer token of one of the hub's users.")
    return Caller(user.user_id, supports_elicitation=True, surface="a2a")


def agent_card(public_url: str, agents: dict[str, str], issuer: str | None = None) -> AgentCard:
    """`issuer`: the OpenID provider whose access tokens the hub takes, as a second way in."""
    base = public_url.rstrip("/")
    schemes = {
        "bearer": SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="bearer", description="A token of one of the hub's users (config users:)."
            )
        )
    }
    if issuer is not None:
        schemes["oidc"] = SecurityScheme(
            open_id_connect_security_scheme=OpenIdConnectSecurityScheme(
                open_id_connect_url=issuer.rstrip("/") + "/.well-known/openid-configuration",
                description="An access token (JWT) from the company's identity provider, sent as a bearer token.",
            )
        )
    return AgentCard(
        name="elicithub",
        description="The hub's assistant: it calls tools, and asks you when a tool needs your input or a sign-in.",
        version=__version__,
        supported_interfaces=[AgentInterface(url=f"{base}/a2a", protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        security_schemes=schemes,
        security_requirements=[SecurityRequirement(schemes={name: StringList()}) for name in schemes],
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(id=name, name=name, description=text, tags=["elicitation"]) for name, text in agents.items()
        ],
    )
