"""Sending one message through the configured SMTP server (RFC 5321): STARTTLS (RFC 3207), implicit TLS or plain,
with a login when the config names its variables."""

from __future__ import annotations

import os
import ssl
from email.message import EmailMessage

import aiosmtplib

from elicithub.config import SmtpConfig
from elicithub.errors import EmailUnusable
from elicithub.surfaces.outbox import Undeliverable


def _variable(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise EmailUnusable(f"email.smtp: ${name} is not set; it must hold the mail server's login.")
    return value


class Smtp:
    """The server, with its login read from the environment once, when the hub is built."""

    def __init__(self, config: SmtpConfig) -> None:
        self.config = config
        self.login = (
            (_variable(config.username_env), _variable(config.password_env))
            if config.username_env is not None and config.password_env is not None
            else None
        )
        self.tls_context: ssl.SSLContext | None = None
        if config.tls != "none":
            try:
                self.tls_context = ssl.create_default_context(cafile=config.ca_file)
            except OSError as exc:
                raise EmailUnusable(f"email.smtp.ca_file: cannot read {config.ca_file}: {exc.strerror}") from None

    async def send(self, message: EmailMessage) -> None:
        """Send it, or raise: `Undeliverable` when the server refuses it for good (a 5xx reply), else the error that
        stopped this attempt (the server down, a timeout, a 4xx reply)."""
        config = self.config
        username, password = self.login if self.login is not None else (None, None)
        try:
            await aiosmtplib.send(
                message,
                hostname=config.host,
                port=config.port_or_default,
                username=username,
                password=password,
                use_tls=config.tls == "implicit",
                start_tls=config.tls == "starttls",  # never upgraded only when offered: asked for, or refused
                tls_context=self.tls_context,
                timeout=config.timeout_s,
            )
        except aiosmtplib.SMTPResponseException as exc:
            if exc.code >= 500:
                raise Undeliverable(f"the mail server refused it: {exc.code} {exc.message}") from exc
            raise
        except aiosmtplib.SMTPRecipientsRefused as exc:
            if all(refused.code >= 500 for refused in exc.recipients):
                raise Undeliverable(f"the mail server refused its recipient: {exc.recipients[0].message}") from exc
            raise
