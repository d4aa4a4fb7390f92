"""A real SMTP server on loopback for the email tests: aiosmtpd in a thread, plain, with STARTTLS or with implicit TLS
(a certificate for 127.0.0.1 from a test CA made here with `cryptography`), with or without a required login; every
message it takes is kept, parsed."""

from __future__ import annotations

import datetime
import email
import email.policy
import ipaddress
import ssl
import threading
import time
from email.message import EmailMessage
from pathlib import Path
from typing import Any, Literal

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.conftest import free_port
from tests.core_fixtures import DEADLINE_S

Tls = Literal["none", "starttls", "implicit"]


class PrivateCa:
    """A CA of the test's own, and a server certificate it signed for 127.0.0.1 and localhost."""

    def __init__(self, folder: Path) -> None:
        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "elicithub test CA")])
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        server = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        self.ca_file = folder / "ca.pem"
        self.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        self.cert_file = folder / "server.pem"
        self.cert_file.write_bytes(server.public_bytes(serialization.Encoding.PEM))
        self.key_file = folder / "server.key"
        self.key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_file, self.key_file)
        return context


class MailServer:
    """aiosmtpd on 127.0.0.1:`port`, keeping each message it takes (`messages`, with the login it came with)."""

    def __init__(
        self,
        tls: Tls = "none",
        ca: PrivateCa | None = None,
        login: tuple[str, str] | None = None,
        port: int | None = None,
    ) -> None:
        self.port = port or free_port()
        self.messages: list[EmailMessage] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        self.logins: list[str] = []
        self._changed = threading.Condition()
        options: dict[str, Any] = {}
        if tls != "none":
            assert ca is not None
            context = ca.server_context()
            if tls == "starttls":
                options.update(tls_context=context, require_starttls=True)
            else:
                options.update(ssl_context=context, auth_require_tls=False)
        if login is not None:
            options.update(authenticator=self._authenticator(login), auth_required=True)
        self.controller = Controller(self, hostname="127.0.0.1", port=self.port, **options)
        self.controller.start()

    def _authenticator(self, login: tuple[str, str]) -> Any:
        def check(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
            if isinstance(data, LoginPassword) and (data.login.decode(), data.password.decode()) == login:
                self.logins.append(data.login.decode())
                return AuthResult(success=True)
            # A failure that is not "handled" gets its 535 reply; a handled one leaves the client waiting.
            return AuthResult(success=False, handled=False)

        return check

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        parsed = email.message_from_bytes(envelope.original_content, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        with self._changed:
            self.messages.append(parsed)
            self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
            self._changed.notify_all()
        return "250 Message accepted for delivery"

    def wait(self, count: int) -> list[EmailMessage]:
        """The messages once there are at least `count` (the deadline only ends a test that would hang)."""
        end = time.monotonic() + DEADLINE_S
        with self._changed:
            while len(self.messages) < count:
                left = end - time.monotonic()
                assert left > 0, f"{len(self.messages)} of {count} messages came"
                self._changed.wait(left)
            return list(self.messages)

    def to(self, address: str) -> list[EmailMessage]:
        return [m for m in self.messages if m["To"] == address]

    def stop(self) -> None:
        self.controller.stop()
