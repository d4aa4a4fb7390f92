"""Sending through a real SMTP server on loopback (aiosmtpd): plain, STARTTLS and implicit TLS with a private CA, with
a login from the environment; a server that cannot be trusted, will not upgrade, or refuses the login sends nothing."""

from __future__ import annotations

from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import aiosmtplib
import pytest

from elicithub.config import SmtpConfig
from elicithub.errors import EmailUnusable
from elicithub.surfaces.email.smtp import Smtp
from elicithub.surfaces.outbox import Undeliverable
from tests.surfaces.email.mailserver import MailServer, PrivateCa, Tls

# aiosmtpd warns of AUTH without STARTTLS, which is what an implicit-TLS server (TLS from the first byte) has.
pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")]

LOGIN = ("hub", "s3cret-pass")


@pytest.fixture
def ca(tmp_path: Path) -> PrivateCa:
    return PrivateCa(tmp_path)


@pytest.fixture
def servers() -> Iterator[list[MailServer]]:
    started: list[MailServer] = []
    yield started
    for server in started:
        server.stop()


def serve(servers: list[MailServer], tls: Tls, ca: PrivateCa | None = None, login: bool = False) -> MailServer:
    servers.append(MailServer(tls, ca, LOGIN if login else None))
    return servers[-1]


def message() -> EmailMessage:
    sent = EmailMessage()
    sent["From"], sent["To"], sent["Subject"] = "agents@acme.test", "bob@acme.test", "Approval needed"
    sent.set_content("Approve this call?")
    return sent


def smtp(server: MailServer, tls: Tls, **changes: Any) -> Smtp:
    return Smtp(SmtpConfig.model_validate({"host": "127.0.0.1", "port": server.port, "tls": tls, **changes}))


@pytest.fixture
def login_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("SMTP_USER", LOGIN[0])
    monkeypatch.setenv("SMTP_PASSWORD", LOGIN[1])
    return {"username_env": "SMTP_USER", "password_env": "SMTP_PASSWORD"}


async def test_plain_smtp_delivers_the_message(servers: list[MailServer]) -> None:
    server = serve(servers, "none")
    await smtp(server, "none").send(message())
    [received] = server.wait(1)
    assert received["Subject"] == "Approval needed" and server.envelopes == [("agents@acme.test", ["bob@acme.test"])]


@pytest.mark.parametrize("tls", ["starttls", "implicit"])
async def test_tls_with_a_private_ca_and_a_login_from_the_environment(
    tls: Tls, servers: list[MailServer], ca: PrivateCa, login_env: dict[str, str]
) -> None:
    server = serve(servers, tls, ca, login=True)
    await smtp(server, tls, ca_file=str(ca.ca_file), **login_env).send(message())
    assert len(server.wait(1)) == 1 and server.logins == [LOGIN[0]]


@pytest.mark.parametrize("tls", ["starttls", "implicit"])
async def test_a_server_whose_certificate_no_trusted_ca_signed_gets_nothing(
    tls: Tls, servers: list[MailServer], ca: PrivateCa
) -> None:
    server = serve(servers, tls, ca)
    with pytest.raises((aiosmtplib.SMTPException, OSError)):
        await smtp(server, tls).send(message())  # the system's CAs only
    assert server.messages == []


async def test_starttls_refuses_a_server_that_does_not_offer_it(servers: list[MailServer], ca: PrivateCa) -> None:
    server = serve(servers, "none")
    with pytest.raises(aiosmtplib.SMTPException):
        await smtp(server, "starttls", ca_file=str(ca.ca_file)).send(message())
    assert server.messages == []


async def test_a_refused_login_is_given_up_not_tried_again(
    servers: list[MailServer], ca: PrivateCa, login_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = serve(servers, "starttls", ca, login=True)
    monkeypatch.setenv("SMTP_PASSWORD", "wrong")
    with pytest.raises(Undeliverable, match="535"):
        await smtp(server, "starttls", ca_file=str(ca.ca_file), **login_env).send(message())
    assert server.messages == []


def test_a_login_variable_that_is_not_set_or_a_ca_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    names = {"username_env": "NO_SUCH_SMTP_USER", "password_env": "NO_SUCH_SMTP_PASSWORD"}
    config = SmtpConfig.model_validate({"host": "127.0.0.1", **names})
    with pytest.raises(EmailUnusable, match=r"\$NO_SUCH_SMTP_USER is not set"):
        Smtp(config)
    config = SmtpConfig.model_validate({"host": "127.0.0.1", "ca_file": str(tmp_path / "missing.pem")})
    with pytest.raises(EmailUnusable, match=r"email\.smtp\.ca_file: cannot read"):
        Smtp(config)
