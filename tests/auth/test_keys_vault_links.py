"""The hub's keys, the encrypted vault, link tokens and log redaction, without a network."""

from __future__ import annotations

import base64
import logging
import os
import stat
import time
from pathlib import Path

import anyio
import pytest

from elicithub.auth.keys import Keys, KeyUnusable, load_keys
from elicithub.auth.links import BadLink, LinkSigner, LinkTickets
from elicithub.auth.vault import Credential, SignIn, Vault
from elicithub.config import SecretsConfig
from elicithub.core.ports import Backend, KeyValueStore
from elicithub.server.app import redact_access_log


@pytest.fixture
def kv(backend: Backend) -> KeyValueStore:
    return backend.kv


def test_first_run_generates_a_private_key_file_and_reuses_it(tmp_path: Path) -> None:
    config = SecretsConfig(key_file=str(tmp_path / "dir" / "secret.key"))
    first = load_keys(config, environ={})
    mode = stat.S_IMODE(os.stat(config.key_file).st_mode)
    assert mode == 0o600
    assert load_keys(config, environ={}).derive("vault") == first.derive("vault")
    assert first.derive("vault") != first.derive("link")


def test_key_from_the_environment_wins_and_must_be_long_enough(tmp_path: Path) -> None:
    config = SecretsConfig(key_file=str(tmp_path / "secret.key"))
    key = base64.urlsafe_b64encode(os.urandom(32)).decode()
    keys = load_keys(config, environ={"ELICITHUB_SECRET_KEY": key})
    assert not Path(config.key_file).exists()
    assert keys.derive("x") == Keys(base64.urlsafe_b64decode(key)).derive("x")
    with pytest.raises(KeyUnusable, match="ELICITHUB_SECRET_KEY"):
        load_keys(config, environ={"ELICITHUB_SECRET_KEY": "short"})


@pytest.mark.anyio
async def test_credentials_are_sealed_per_server_and_user(kv: KeyValueStore) -> None:
    vault = Vault(kv, Keys.generate())
    credential = Credential("at-secret-123", refresh_token="rt-secret-456", expires_at=time.time() + 60)
    await vault.save_credential("tracker", "alice", credential)
    assert await vault.credential("tracker", "alice") == credential
    assert await vault.credential("tracker", "bob") is None
    assert await vault.credential("other", "alice") is None
    key = Vault._credential_key("tracker", "alice")
    sealed = await kv.get(key)
    assert sealed is not None and b"at-secret-123" not in sealed and b"alice" not in key.encode()
    # A sealed value moved under another user's key does not open: the key is bound into the ciphertext.
    await kv.put(Vault._credential_key("tracker", "bob"), sealed)
    assert await vault.credential("tracker", "bob") is None
    # Another master key cannot read it either.
    assert await Vault(kv, Keys.generate()).credential("tracker", "alice") is None
    await vault.forget_credential("tracker", "alice")
    assert await vault.credential("tracker", "alice") is None


@pytest.mark.anyio
async def test_a_sign_in_is_taken_once_and_expires(kv: KeyValueStore) -> None:
    vault = Vault(kv, Keys.generate())
    sign_in = SignIn("eli_1", "alice", "tracker", "verifier", "browser-tag")
    await vault.start_sign_in("state-1", sign_in, ttl_s=60)
    assert await vault.take_sign_in("state-1") == sign_in
    assert await vault.take_sign_in("state-1") is None
    await vault.start_sign_in("state-2", sign_in, ttl_s=0.05)
    await anyio.sleep(0.1)
    assert await vault.take_sign_in("state-2") is None
    assert "verifier" not in repr(sign_in)


def test_link_tokens_are_opaque_bound_and_short_lived() -> None:
    keys = Keys.generate()
    signer = LinkSigner(keys)
    token = signer.sign("eli_abc", "alice")
    assert "alice" not in token and "eli_abc" not in token
    link = signer.verify(token, max_age_s=60)
    assert link.elicitation_id == "eli_abc"
    assert link.for_user("alice", signer) and not link.for_user("bob", signer) and not link.for_user(None, signer)
    with pytest.raises(BadLink):
        LinkSigner(Keys.generate()).verify(token, max_age_s=60)
    with pytest.raises(BadLink):
        signer.verify(token[:-2] + ("AA" if token[-2:] != "AA" else "BB"), max_age_s=60)
    with pytest.raises(BadLink):
        signer.verify("", max_age_s=60)


@pytest.mark.anyio
async def test_a_single_use_link_carries_its_ticket_and_the_ticket_is_taken_once(kv: KeyValueStore) -> None:
    signer, tickets = LinkSigner(Keys.generate()), LinkTickets(kv)
    ticket = await tickets.issue(ttl_s=60)
    link = signer.verify(signer.sign("eli_abc", "alice", once=ticket), max_age_s=60)
    assert link.once == ticket and link.for_user("alice", signer)
    assert signer.verify(signer.sign("eli_abc", "alice"), max_age_s=60).once is None
    assert await tickets.take(ticket) and not await tickets.take(ticket)
    assert not await tickets.take("never-issued")


def access_line(path: str) -> str:
    """An access log line for `path`, as uvicorn's access logger (with the hub's filters) would write it."""
    logger = logging.getLogger("uvicorn.access")
    args = ("1.2.3.4", "GET", path, "1.1", 200)
    record = logger.makeRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d', args, None)
    for f in logger.filters:
        f.filter(record)
    return record.getMessage()


def test_access_log_keeps_auth_queries_out() -> None:
    redact_access_log()
    line = access_line("/auth/callback?code=c0de&state=st4te")
    assert "c0de" not in line and "/auth/callback?[redacted]" in line
    assert "/healthz?x=1" in access_line("/healthz?x=1")


def test_hubs_starting_at_once_all_get_the_one_key_written_whole(tmp_path: Path) -> None:
    import multiprocessing

    config = SecretsConfig(key_env="ELICITHUB_TEST_UNSET_KEY", key_file=str(tmp_path / "fresh" / "secret.key"))
    context = multiprocessing.get_context("fork")
    with context.Pool(8) as pool:
        derived = pool.map(_derive_session_key, [config] * 32)
    assert len(set(derived)) == 1  # nobody failed, and everybody read the same key
    assert stat.S_IMODE((tmp_path / "fresh" / "secret.key").stat().st_mode) == 0o600
    assert [p.name for p in (tmp_path / "fresh").iterdir()] == ["secret.key"]  # no temp file left behind


def _derive_session_key(config: SecretsConfig) -> bytes:
    return load_keys(config, environ={}).derive("session")
