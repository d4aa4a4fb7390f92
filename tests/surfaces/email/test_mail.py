"""The mail approvers get, through a real SMTP server on loopback: multipart text and HTML that say what is asked, the
tool, the arguments, who asks and until when, with a link per decision page; sent to each approver with an address
(never the requester), by way of the outbox, so a mail server that is down delays the mail and never the approval."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from tests.auth.oidc_provider import oidc_provider
from tests.auth.test_oidc_sign_in import sign_in
from tests.conftest import RunningHub, eventually, free_port
from tests.surfaces.email.conftest import SENDER, EmailHub, email_config, links, parts, post
from tests.surfaces.email.mailserver import MailServer, PrivateCa
from tests.triggers.approving import RESTART, OpsServer, Requester, answer, policy, tool_output


def counted(hub: RunningHub, outcome: str) -> float:
    """`elicithub_notifications_total{channel="email", outcome=...}` in the hub's /metrics."""
    metrics = httpx.get(f"{hub.url}/metrics").text
    found = re.search(rf'^elicithub_notifications_total{{channel="email",outcome="{outcome}"}} (\S+)$', metrics, re.M)
    return float(found.group(1)) if found else 0.0


def test_each_approver_with_an_address_gets_a_multipart_mail_with_a_link_per_decision_page(
    email_hub: EmailHub, mail: MailServer, ops: OpsServer
) -> None:
    hub = email_hub()
    with Requester(hub.url, "alice", "conv-mail", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        messages = mail.wait(2)
        assert sorted(m["To"] for m in messages) == ["bob@acme.test", "carol@acme.test"]  # not alice, nor dave
        deadline = datetime.fromisoformat(pending["data"]["expiresAt"].replace("Z", "+00:00")).astimezone(UTC)
        clock = deadline.strftime("%Y-%m-%d %H:%M UTC")
        for message in messages:
            assert message["From"] == SENDER and message["Subject"] == "Approval needed: ops.restart for alice"
            assert message["Auto-Submitted"] == "auto-generated" and message["Message-ID"].endswith("@acme.test>")
            text, markup = (part.replace("\r\n", "\n") for part in parts(message))
            for part in (text, markup):
                assert "alice asks to call ops.restart. Approve this call?" in part
                assert "ops.restart" in part and "alice" in part and "group ops" in part
                assert clock in part
            assert '"service": "orders",\n    "replicas": 2' in text  # the arguments, as JSON
            assert "&quot;replicas&quot;: 2" in markup
            assert list(links(message)) == ["approve", "deny"]
            assert "opening it decides nothing" in text
        assert links(messages[0]) != links(messages[1])  # each approver's links are their own
        assert ops.calls == []
        assert answer(hub.url, "carol", pending["id"], content={"approve": True}).status_code == 200
        assert tool_output(alice.rest()) == ("Restarted orders with 2 replicas.", False)
    assert counted(hub, "sent") == 2
    assert len(mail.messages) == 2  # nothing more once it ended


def test_without_an_address_or_when_the_requester_approves_nobody_is_mailed(
    email_hub: EmailHub, mail: MailServer, ops: OpsServer
) -> None:
    hub = email_hub(policy(approvers="requester", self_approval=True), email={"users": {"bob": "bob@acme.test"}})
    with Requester(hub.url, "alice", "conv-own", RESTART) as alice:
        pending = alice.until("data-elicitation-request")  # her own question: her chat shows it
        assert answer(hub.url, "alice", pending["data"]["elicitationId"], content={"approve": True}).status_code == 200
        alice.rest()
    assert mail.messages == [] and counted(hub, "sent") == 0


def test_mail_goes_through_starttls_with_a_private_ca_and_a_login(
    email_hub: EmailHub, ops: OpsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SMTP_USER", "hub")
    monkeypatch.setenv("SMTP_PASSWORD", "s3cret-pass")
    ca = PrivateCa(tmp_path)
    server = MailServer("starttls", ca, ("hub", "s3cret-pass"))
    try:
        smtp = {"host": "127.0.0.1", "port": server.port, "tls": "starttls", "ca_file": str(ca.ca_file)}
        smtp |= {"username_env": "SMTP_USER", "password_env": "SMTP_PASSWORD"}
        hub = email_hub(email={"smtp": smtp})
        with Requester(hub.url, "alice", "conv-tls", RESTART) as alice:
            alice.until("data-approval-pending")
            assert sorted(m["To"] for m in server.wait(2)) == ["bob@acme.test", "carol@acme.test"]
        assert server.logins == ["hub", "hub"]
    finally:
        server.stop()


def test_a_mail_server_that_is_down_delays_the_mail_and_never_the_approval(email_hub: EmailHub, ops: OpsServer) -> None:
    down = MailServer()
    down.stop()  # its port, with nothing listening on it
    hub = email_hub(email=email_config(down))
    with Requester(hub.url, "alice", "conv-down", RESTART) as alice:
        pending = alice.until("data-approval-pending")  # asked at once: nothing waits on the mail
        eventually(lambda: counted(hub, "retried") >= 2, "the mail was not tried again")
        assert counted(hub, "sent") == 0
        back = MailServer(port=down.port)
        try:
            assert sorted(m["To"] for m in back.wait(2)) == ["bob@acme.test", "carol@acme.test"]
            [bob] = back.to("bob@acme.test")
            assert list(links(bob)) == ["approve", "deny"]
        finally:
            back.stop()
        assert answer(hub.url, "bob", pending["id"], content={"approve": True}).status_code == 200
        assert tool_output(alice.rest())[1] is False
    eventually(lambda: counted(hub, "sent") == 2, "the mails were not counted sent")


def test_with_oidc_the_address_the_provider_verified_at_sign_in_is_mailed(
    email_hub: EmailHub, mail: MailServer, ops: OpsServer
) -> None:
    with oidc_provider() as oidc:
        port = free_port()
        oidc.provider.register_web_client(f"http://127.0.0.1:{port}/auth/signed-in")
        oidc.provider.emails |= {"gina": ("gina@acme.test", True), "hal": ("hal@acme.test", False)}
        approvers = policy(approvers={"users": ["gina", "hal", "ivy"]})
        hub = email_hub(approvers, port=port, auth={"oidc": oidc.config()})
        for person in ("gina", "hal", "ivy"):  # ivy's ID token has no address; hal's is not verified
            with httpx.Client(timeout=30) as browser:
                assert sign_in(browser, hub, oidc, person).status_code == 302
        with Requester(hub.url, "alice", "conv-oidc", RESTART) as alice:
            pending = alice.until("data-approval-pending")
            [mailed] = mail.wait(1)
            assert mailed["To"] == "gina@acme.test"
            assert answer(hub.url, "bob", pending["id"], content={"approve": True}).status_code == 404  # not his
            page = links(mailed)["approve"]
            assert post(page, {"replicas": "2"}).status_code == 303
            assert tool_output(alice.rest()) == ("Restarted orders with 2 replicas.", False)
        assert [m["To"] for m in mail.messages] == ["gina@acme.test"]
