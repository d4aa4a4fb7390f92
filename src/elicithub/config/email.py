"""Email: the SMTP server mail goes out through, who it comes from, and who has an address (`email:`)."""

from __future__ import annotations

import re
from email.headerregistry import Address
from email.utils import parseaddr
from typing import Literal

from pydantic import Field, field_validator, model_validator

from elicithub.config.base import Strict

ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
_ADDRESS = re.compile(r"^[^@\s<>\"(),;:]+@[^@\s<>\"(),;:]+\.[^@\s<>\"(),;:]+$")
DEFAULT_PORTS = {"starttls": 587, "implicit": 465, "none": 25}


class SmtpConfig(Strict):
    """The mail server (RFC 5321); its credentials come from the environment, never from the config file."""

    host: str = Field(min_length=1, pattern=r"^[^\s/]+$")
    """The server's host name (it is also the name its certificate must carry)."""
    port: int | None = Field(default=None, ge=1, le=65535)
    """Unset: 587 with `starttls`, 465 with `implicit`, 25 with `none`."""
    tls: Literal["starttls", "implicit", "none"] = "starttls"
    """`starttls`: upgrade the connection (RFC 3207), refusing a server that does not offer it; `implicit`: TLS from
    the first byte; `none`: plain text (a relay on loopback only)."""
    ca_file: str | None = Field(default=None, min_length=1)
    """A PEM file of the private CA to trust for the server's certificate (unset: the system's)."""
    username_env: str | None = Field(default=None, pattern=ENV_NAME)
    """The environment variable holding the user name to log in with (unset: no login)."""
    password_env: str | None = Field(default=None, pattern=ENV_NAME)
    """The environment variable holding the password."""
    timeout_s: float = Field(default=30, gt=0, le=300)
    """How long one attempt to send may take before it counts as failed (and is tried again later)."""

    @model_validator(mode="after")
    def _consistent(self) -> SmtpConfig:
        if (self.username_env is None) != (self.password_env is None):
            raise ValueError("give both username_env and password_env, or neither")
        if self.ca_file is not None and self.tls == "none":
            raise ValueError("ca_file: needs tls starttls or implicit")
        return self

    @property
    def port_or_default(self) -> int:
        return self.port if self.port is not None else DEFAULT_PORTS[self.tls]


def _check_address(address: str) -> str:
    if not _ADDRESS.match(address):
        raise ValueError(f"{address!r} is not an email address")
    return address


class EmailConfig(Strict):
    """Approvers, and with `questions` people whose own questions wait, reached by mail with links to pages that
    answer; unset: no mail."""

    smtp: SmtpConfig
    sender: str = Field(alias="from", min_length=1)
    """Who mail comes from: an address, or a name and an address (`ACME agents <agents@acme.com>`)."""
    users: dict[str, str] = {}
    """Hub user id -> their address; with OIDC, a person not here is mailed at the address their identity provider
    verified at their latest sign-in; anyone else gets no mail."""
    questions: bool = False
    """Also mail people the questions of their own runs that are still open `notify_after_s` after they were asked."""
    notify_after_s: float = Field(default=300, ge=0)
    """How long a person's own question waits before it is mailed (with `questions`)."""

    @field_validator("sender")
    @classmethod
    def _sender(cls, sender: str) -> str:
        name, address = parseaddr(sender)
        if not _ADDRESS.match(address) or "," in sender.replace(name, "", 1):
            raise ValueError(f"{sender!r} names no email address")
        return str(Address(display_name=name, addr_spec=address)) if name else address

    @field_validator("users")
    @classmethod
    def _addresses(cls, users: dict[str, str]) -> dict[str, str]:
        for user_id, address in users.items():
            if not user_id:
                raise ValueError("a hub user id must not be empty")
            try:
                _check_address(address)
            except ValueError as exc:
                raise ValueError(f"{user_id}: {exc}") from None
        return users
