"""The pages a mail's links open, without a browser: GET and HEAD (what mail scanners and link previews do) never
answer; only the page's own POST does, once, as the link's recipient, with the channel `email` in the audit; a forged,
altered or foreign link is 404 and shows nothing; after its question ends anywhere a link's page says how and by whom.
"""

from __future__ import annotations

import re
from email.message import EmailMessage

import httpx

from elicithub.auth.keys import Keys
from elicithub.auth.links import LinkSigner
from tests.conftest import RunningHub
from tests.surfaces.email.conftest import EmailHub, form_token, links, post, status_of
from tests.surfaces.email.mailserver import MailServer
from tests.surfaces.pages.inboxes import listed
from tests.triggers.approving import PEOPLE, RESTART, OpsServer, Requester, answer, audit_record, policy, tool_output

ROLLBACK = '/call ops.rollback {"service": "orders"}'


def mail_of(mail: MailServer, address: str, count: int = 2) -> EmailMessage:
    mail.wait(count)
    [found] = mail.to(address)
    return found


def still_open(hub: RunningHub, user: str = "carol") -> bool:
    return len(listed(hub.url, PEOPLE[user])) == 1


def shows_nothing(response: httpx.Response) -> None:
    assert response.status_code == 404
    assert "This link does not work" in response.text
    for detail in ("ops.restart", "orders", "alice", "Approve"):
        assert detail not in response.text


def test_opening_a_link_as_a_mail_scanner_does_changes_nothing(
    email_hub: EmailHub, mail: MailServer, ops: OpsServer
) -> None:
    hub = email_hub()
    with Requester(hub.url, "alice", "conv-scan", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        bob = links(mail_of(mail, "bob@acme.test"))
        for url in (bob["approve"], bob["deny"]):
            for _ in range(3):  # a scanner, a link preview, the person: each GET and HEAD shows, none answers
                shown = httpx.get(url)
                assert shown.status_code == 200 and "alice asks to call ops.restart" in shown.text
                head = httpx.head(url)
                assert head.status_code == 200 and head.content == b""
                for response in (shown, head):
                    assert response.headers["cache-control"] == "no-store"
                    assert response.headers["referrer-policy"] == "no-referrer"
                    csp = response.headers["content-security-policy"]
                    assert "default-src 'none'" in csp and "form-action 'self'" in csp
            # Nothing from anywhere else: no script, one stylesheet of the hub's own, links only to its pages.
            assert "<script" not in shown.text
            assert re.findall(r'(?:href|src|action)="([^"]*)"', shown.text)[0] == "../../static/email.css"
            assert not re.search(r'(?:href|src|action)="(?:https?:)?//', shown.text)
        assert still_open(hub) and still_open(hub, "bob") and ops.calls == []
        assert answer(hub.url, "carol", pending["id"], content={"approve": False}).status_code == 200
        alice.rest()


def test_the_pages_post_answers_as_its_recipient_once_and_the_audit_says_email(
    email_hub: EmailHub, mail: MailServer, ops: OpsServer
) -> None:
    hub = email_hub()
    with Requester(hub.url, "alice", "conv-post", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        bob = links(mail_of(mail, "bob@acme.test"))
        shown = httpx.get(bob["approve"]).text
        assert 'value="2"' in shown and "You answer as <b>bob</b>" in shown  # the editable replicas, its value now
        csrf = form_token(shown)
        answered = post(bob["approve"], {"replicas": "3", "reason": "during the window"}, csrf)
        assert answered.status_code == 303 and answered.headers["location"] == bob["approve"]
        rest = alice.rest()
    assert tool_output(rest) == ("Restarted orders with 3 replicas.", False)
    record = audit_record(hub.url, pending["id"])
    assert (record["answeredBy"], record["channel"], record["outcome"]) == ("bob", "email", "approved")
    assert record["reason"] == "during the window" and record["arguments"]["replicas"] == 3
    for url in (bob["approve"], bob["deny"]):
        assert status_of(url) == "Approved by bob: during the window."
        again = post(url, {"replicas": "5", "reason": "twice"}, csrf)  # the link answered once: that is all
        assert again.status_code == 409 and "Approved by bob: during the window." in again.text
    assert len(ops.calls) == 1 and audit_record(hub.url, pending["id"]) == record


def test_an_invalid_edit_is_refused_on_the_page_and_the_link_still_answers(
    email_hub: EmailHub, mail: MailServer, ops: OpsServer
) -> None:
    hub = email_hub()
    with Requester(hub.url, "alice", "conv-invalid", RESTART) as alice:
        alice.until("data-approval-pending")
        bob = links(mail_of(mail, "bob@acme.test"))
        refused = post(bob["approve"], {"replicas": "11"})  # the tool allows at most 10
        assert refused.status_code == 422 and 'class="error"' in refused.text and 'value="11"' in refused.text
        assert still_open(hub) and ops.calls == []
        assert post(bob["approve"], {"replicas": "4"}).status_code == 303
        assert tool_output(alice.rest()) == ("Restarted orders with 4 replicas.", False)


def test_a_deny_with_a_reason_calls_nothing_and_every_link_then_says_who_denied_it_and_why(
    email_hub: EmailHub, mail: MailServer, ops: OpsServer
) -> None:
    hub = email_hub()
    with Requester(hub.url, "alice", "conv-deny", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        carol = links(mail_of(mail, "carol@acme.test"))
        bob = links(mail_of(mail, "bob@acme.test"))
        deny = httpx.get(carol["deny"]).text
        assert "Deny this call?" in deny and 'name="replicas"' not in deny  # a reason only
        assert post(carol["deny"], {"reason": "not during the freeze"}).status_code == 303
        rest = alice.rest()
    assert tool_output(rest) == ("Call of ops.restart was not approved: denied by carol: not during the freeze", True)
    assert ops.calls == []
    record = audit_record(hub.url, pending["id"])
    assert (record["answeredBy"], record["channel"], record["outcome"]) == ("carol", "email", "denied")
    assert record["reason"] == "not during the freeze"
    for url in (*carol.values(), *bob.values()):  # bob's too: it ended for everyone
        assert status_of(url) == "Denied by carol: not during the freeze."


def test_after_an_answer_elsewhere_the_page_shows_the_end_and_its_post_answers_nothing(
    email_hub: EmailHub, mail: MailServer, ops: OpsServer
) -> None:
    hub = email_hub()
    with Requester(hub.url, "alice", "conv-elsewhere", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        bob = links(mail_of(mail, "bob@acme.test"))
        csrf = form_token(httpx.get(bob["deny"]).text)  # bob has the page open...
        assert answer(hub.url, "carol", pending["id"], content={"approve": True}).status_code == 200  # ...carol answers
        alice.rest()
    late = post(bob["deny"], {"reason": "too late"}, csrf)
    assert late.status_code == 409 and "Approved by carol." in late.text and "<form" not in late.text
    assert status_of(bob["approve"]) == "Approved by carol."
    assert audit_record(hub.url, pending["id"])["channel"] == "chat"
    assert ops.calls == [{"service": "orders", "replicas": 2}]


def test_a_forged_altered_or_foreign_link_is_404_and_shows_nothing(
    email_hub: EmailHub, mail: MailServer, ops: OpsServer
) -> None:
    hub = email_hub()
    with Requester(hub.url, "alice", "conv-forged", RESTART) as alice:
        pending = alice.until("data-approval-pending")
        bob = links(mail_of(mail, "bob@acme.test"))
        base, token = bob["approve"].rsplit("/", 1)
        flipped = token[:40] + ("A" if token[40] != "A" else "B") + token[41:]
        other_key = LinkSigner(Keys.generate(), purpose="email-link")  # another hub's, or a guess
        foreign = other_key.seal({"e": pending["id"], "u": "bob", "o": "x", "x": 4_000_000_000})
        sign_in = LinkSigner(hub.hub.keys).sign(pending["id"], "bob")  # a sign-in link of this hub opens no page
        for url in (
            f"{base}/{flipped}",
            f"{base}/{foreign}",
            f"{base}/{sign_in}",
            f"{base}/not-a-token",
            bob["approve"].replace("/approve/", "/answer/"),  # bob's own link on a page that is not its question's
            bob["approve"].replace("/approve/", "/delete/"),
        ):
            shows_nothing(httpx.get(url))
            shows_nothing(post(url, {"reason": "x"}, csrf="0" * 64))
        assert still_open(hub) and ops.calls == []
        assert answer(hub.url, "carol", pending["id"], content={"approve": False}).status_code == 200
        alice.rest()


def test_a_post_without_the_pages_form_token_or_from_another_site_answers_nothing(
    email_hub: EmailHub, mail: MailServer, ops: OpsServer
) -> None:
    hub = email_hub()
    with Requester(hub.url, "alice", "conv-csrf", RESTART) as alice:
        alice.until("data-approval-pending")
        bob = links(mail_of(mail, "bob@acme.test"))
        csrf = form_token(httpx.get(bob["approve"]).text)
        for refused in (
            httpx.post(bob["approve"], data={"replicas": "2"}),
            post(bob["approve"], {"replicas": "2"}, csrf="0" * 64),
            post(bob["approve"], {"replicas": "2"}, csrf, **{"sec-fetch-site": "cross-site"}),
        ):
            assert refused.status_code == 403 and "Nothing was answered" in refused.text
        assert still_open(hub) and ops.calls == []
        assert post(bob["approve"], {"replicas": "2"}, csrf, **{"sec-fetch-site": "same-origin"}).status_code == 303
        assert tool_output(alice.rest())[1] is False


def test_a_link_past_its_time_is_404_and_an_expired_approval_says_so(
    email_hub: EmailHub, mail: MailServer, ops: OpsServer
) -> None:
    hub = email_hub(policy(timeout_s=2))
    with Requester(hub.url, "alice", "conv-expiry", RESTART) as alice:
        alice.until("data-approval-pending")
        bob = links(mail_of(mail, "bob@acme.test"))
        csrf = form_token(httpx.get(bob["approve"]).text)
        assert tool_output(alice.rest()) == ("Call of ops.restart was not approved: nobody answered within 2 s", True)
    assert status_of(bob["approve"]) == "Expired."
    late = post(bob["approve"], {"replicas": "2"}, csrf)
    assert late.status_code == 409 and "Expired." in late.text and ops.calls == []
    # A day after its deadline the hub forgets the question, and its links stop working.
    signer = hub.hub.email.links.signer if hub.hub.email is not None else None
    assert signer is not None
    signer.clock = lambda: 10**10
    shows_nothing(httpx.get(bob["approve"]))


def test_a_persons_own_question_is_mailed_after_notify_after_s_with_its_form_on_the_page(
    email_hub: EmailHub, mail: MailServer, ops: OpsServer
) -> None:
    hub = email_hub(policy(tools=["ops.restart"]), email={"questions": True, "notify_after_s": 0})
    with Requester(hub.url, "alice", "conv-own", ROLLBACK) as alice:
        alice.until("data-elicitation-request")
        [mailed] = mail.wait(1)
        assert mailed["To"] == "alice@acme.test" and mailed["Subject"] == "Waiting for your answer: Roll orders back?"
        own = links(mailed)
        assert list(own) == ["answer"]
        page = httpx.get(own["answer"]).text
        assert 'type="checkbox"' in page and 'name="confirm"' in page and "Roll orders back?" in page
        assert ">Submit<" in page and ">Decline<" in page
        assert post(own["answer"], {"confirm": "true", "action": "accept"}).status_code == 303
        assert tool_output(alice.rest()) == ("Rolled orders back.", False)
    assert status_of(own["answer"]) == "Answered."


def test_a_persons_own_question_answered_in_time_is_not_mailed_and_a_decline_from_the_page_declines(
    email_hub: EmailHub, mail: MailServer, ops: OpsServer
) -> None:
    hub = email_hub(policy(tools=["ops.restart"]), email={"questions": True, "notify_after_s": 3600})
    with Requester(hub.url, "alice", "conv-in-time", ROLLBACK) as alice:
        question = alice.until("data-elicitation-request")
        assert answer(hub.url, "alice", question["id"], content={"confirm": True}).status_code == 200
        assert tool_output(alice.rest()) == ("Rolled orders back.", False)
    hub = email_hub(policy(tools=["ops.restart"]), email={"questions": True, "notify_after_s": 0})
    with Requester(hub.url, "alice", "conv-decline", ROLLBACK) as alice:
        alice.until("data-elicitation-request")
        [mailed] = mail.wait(1)  # only this run's: the first was answered before it was due
        assert post(links(mailed)["answer"], {"action": "decline"}).status_code == 303
        assert tool_output(alice.rest()) == ("orders was not rolled back.", False)
    assert status_of(links(mailed)["answer"]) == "Declined."
