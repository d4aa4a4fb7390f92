"""Fixtures for the email surface: a loopback SMTP server, a hub whose approvals of `ops.*` go to the group ops (bob
and carol, who have addresses, as does dave), and reading a mail's parts, links and pages."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import pytest

from elicithub.config import parse_config
from tests.conftest import RunningHub, free_port
from tests.surfaces.email.mailserver import MailServer
from tests.triggers.approving import GROUPS, USERS, OpsServer, policy

ADDRESSES = {"alice": "alice@acme.test", "bob": "bob@acme.test", "carol": "carol@acme.test", "dave": "dave@acme.test"}
SENDER = "ACME agents <agents@acme.test>"


def email_config(mail: MailServer, **changes: Any) -> dict[str, Any]:
    """`email:` sending through `mail` (plain SMTP on loopback), every person with an address."""
    return {
        "smtp": {"host": "127.0.0.1", "port": mail.port, "tls": "none"},
        "from": SENDER,
        "users": ADDRESSES,
        **changes,
    }


@pytest.fixture
def mail() -> Iterator[MailServer]:
    server = MailServer()
    yield server
    server.stop()


@pytest.fixture
def ops() -> Iterator[OpsServer]:
    server = OpsServer()
    with server.served() as app:
        server.url = f"{app.url}/mcp"
        yield server


class EmailHubs:
    """Hubs whose `ops.*` calls need the approval of the group ops (`policy()`, or the policies given), mailing
    through `mail`; dave is an admin (he reads the audit). Stopped before the ops server (whose stream they hold)."""

    def __init__(self, mail: MailServer, ops: OpsServer, folder: Path) -> None:
        self.mail = mail
        self.ops = ops
        self.folder = folder
        self.hubs: list[RunningHub] = []

    def __call__(
        self, *policies: dict[str, Any], email: dict[str, Any] | None = None, port: int | None = None, **changes: Any
    ) -> RunningHub:
        port = port or free_port()
        settings: dict[str, Any] = {
            "public_url": f"http://127.0.0.1:{port}",
            "store": {"url": f"sqlite:///{self.folder / f'hub-{port}.db'}"},
            "secrets": {"key_file": str(self.folder / "secret.key")},
            "users": USERS,
            "groups": GROUPS,
            "admins": ["dave"],
            "mcp_servers": [{"id": "ops", "url": self.ops.url, "protocol": "legacy"}],  # rollback asks mid-call
            "approvals": list(policies) or [policy()],
            "email": email_config(self.mail, **(email or {})),
            **changes,
        }
        self.hubs.append(RunningHub(parse_config(settings), port))
        return self.hubs[-1]

    def stop(self) -> None:
        for hub in self.hubs:
            hub.stop()


EmailHub = Callable[..., RunningHub]


@pytest.fixture
def email_hub(mail: MailServer, ops: OpsServer, tmp_path: Path) -> Iterator[EmailHub]:
    hubs = EmailHubs(mail, ops, tmp_path)
    yield hubs
    hubs.stop()


def parts(message: EmailMessage) -> tuple[str, str]:
    """The mail's text and HTML: a multipart/alternative of exactly those two, text first."""
    assert message.get_content_type() == "multipart/alternative"
    text, markup = list(message.iter_parts())
    assert (text.get_content_type(), markup.get_content_type()) == ("text/plain", "text/html")
    return str(text.get_content()), str(markup.get_content())


def links(message: EmailMessage) -> dict[str, str]:
    """The mail's links by page (`approve`, `deny`, `answer`), the same in its text and its HTML."""
    text, markup = parts(message)
    in_text = re.findall(r"https?://\S+/email/(\w+)/(\S+)", text)
    in_html = [
        (page, html.unescape(token)) for page, token in re.findall(r'href="https?://[^"]+/email/(\w+)/([^"]+)"', markup)
    ]
    assert in_text == in_html, (in_text, in_html)
    base = re.search(r"(https?://\S+?)/email/", text)
    assert base is not None
    return {page: f"{base.group(1)}/email/{page}/{token}" for page, token in in_text}


def form_token(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None, page
    return found.group(1)


def post(url: str, fields: dict[str, str | list[str]], csrf: str | None = None, **headers: str) -> httpx.Response:
    """Submit the page at `url` as a browser without JavaScript does: its form, with the token the page carries
    (read from the page unless given)."""
    with httpx.Client(timeout=30) as client:
        if csrf is None:
            shown = client.get(url)
            assert shown.status_code == 200, shown.text
            csrf = form_token(shown.text)
        return client.post(url, data={**fields, "csrf": csrf}, headers=headers)


def status_of(url: str) -> str:
    """What a link's page says of its question's end (its status line), or "" while it is open."""
    page = httpx.get(url, timeout=30).text
    found = re.search(r'<p class="status" role="status">([^<]*)</p>', page)
    return html.unescape(found.group(1)) if found else ""
