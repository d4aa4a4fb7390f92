"""Cassettes: byte-stable recordings of every round, replayed with no server, and a readable diff when they differ."""

from __future__ import annotations

from pathlib import Path

import yaml

from elicithub.testing.cassette import Normalizer
from tests.conftest import McpProcess
from tests.testing.conftest import DEPLOY_STDIO, LEGACY_STDIO, SuiteFactory, run_suite

DEPLOY_TESTS = """
- name: deploy in one round
  call: {tool: deploy_service, arguments: {service: orders}}
  inputResponses:
    deploy: {content: {region: eu-west-1, confirm: true}}
  expect: {text_equals: Deployed orders to eu-west-1 with 2 replicas.}
"""
LEGACY_TESTS = """
- name: provision
  call: {tool: provision, arguments: {name: orders}}
  inputResponses:
    region: {content: {region: eu-west-1}}
  expect: {text_equals: Provisioned orders in eu-west-1.}
"""


def files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*.yaml"))}


def test_recording_twice_gives_identical_bytes_even_with_a_sealed_request_state(
    write_suite: SuiteFactory, tmp_path: Path
) -> None:
    deploy = write_suite(DEPLOY_STDIO, DEPLOY_TESTS, name="deploy.elicit.yaml")
    legacy = write_suite(f"{LEGACY_STDIO}, protocol: legacy", LEGACY_TESTS, name="legacy.elicit.yaml")
    for path in (deploy, legacy):
        for take in ("a", "b"):
            assert [o.failures for o in run_suite(path, record=tmp_path / take)] == [[]]
    first, second = files(tmp_path / "a"), files(tmp_path / "b")
    assert sorted(first) == ["deploy/deploy-in-one-round.yaml", "legacy/provision.yaml"]
    assert first == second
    recorded = yaml.safe_load(first["deploy/deploy-in-one-round.yaml"])
    states = [
        m[side].get("result", m[side].get("params", {})).get("requestState") for m in recorded["messages"] for side in m
    ]
    assert [s for s in states if s is not None] == ["<requestState 1>", "<requestState 1>"]
    assert b"v1." not in first["deploy/deploy-in-one-round.yaml"]  # the SDK's sealed state never reaches the file


def test_a_cassette_holds_every_exchange_of_every_round(write_suite: SuiteFactory, tmp_path: Path) -> None:
    legacy = write_suite(f"{LEGACY_STDIO}, protocol: legacy", LEGACY_TESTS, name="legacy.elicit.yaml")
    run_suite(legacy, record=tmp_path)
    recorded = yaml.safe_load((tmp_path / "legacy" / "provision.yaml").read_text())
    assert recorded["format"] == "elicithub-cassette/1" and recorded["test"] == "provision"
    sent = [(side, m.get("method")) for item in recorded["messages"] for side, m in item.items()]
    assert sent[:6] == [
        ("client", "initialize"),
        ("server", None),
        ("client", "notifications/initialized"),
        ("client", "tools/call"),
        ("server", "elicitation/create"),
        ("client", None),  # the answer to elicitation/create
    ]
    answer = recorded["messages"][5]["client"]
    assert answer["result"] == {"action": "accept", "content": {"region": "eu-west-1"}}


def test_replay_runs_with_the_server_gone(write_suite: SuiteFactory, tmp_path: Path) -> None:
    server = McpProcess("mrtr_server.py")
    tests = """
    - name: two rounds of questions
      call: {tool: deploy, arguments: {name: api}}
      inputResponses:
        confirm: {content: {confirm: true}}
        region: {content: {region: us-east-1}}
      expect: {text_equals: Deployed api to us-east-1., rounds: 1}
    """
    try:
        path = write_suite(f"url: {server.url}", tests)
        assert [o.failures for o in run_suite(path, record=tmp_path / "tapes")] == [[]]
    finally:
        server.kill()
    assert [o.failures for o in run_suite(path, replay=tmp_path / "tapes")] == [[]]
    # Nothing is started on replay: not even a command that does not exist.
    path = write_suite("command: [no-such-server-anywhere]", tests)
    assert [o.failures for o in run_suite(path, replay=tmp_path / "tapes")] == [[]]


def test_replay_after_an_edited_suite_fails_with_a_diff(write_suite: SuiteFactory, tmp_path: Path) -> None:
    path = write_suite(DEPLOY_STDIO, DEPLOY_TESTS, name="deploy.elicit.yaml")
    run_suite(path, record=tmp_path / "tapes")
    write_suite(DEPLOY_STDIO, DEPLOY_TESTS.replace("region: eu-west-1", "region: us-east-1"), name="deploy.elicit.yaml")
    [outcome] = run_suite(path, replay=tmp_path / "tapes")
    [failure] = outcome.failures
    lines = failure.splitlines()
    assert lines[0] == "the client sent a request that differs from the recording:"
    assert lines[1:3] == ["--- recorded message 5", "+++ sent"]
    assert "-        region: eu-west-1" in lines and "+        region: us-east-1" in lines


def test_replay_without_a_cassette_says_how_to_make_one(write_suite: SuiteFactory, tmp_path: Path) -> None:
    path = write_suite(DEPLOY_STDIO, DEPLOY_TESTS, name="deploy.elicit.yaml")
    [outcome] = run_suite(path, replay=tmp_path / "none")
    assert outcome.failures == [
        f"no cassette at {tmp_path / 'none' / 'deploy' / 'deploy-in-one-round.yaml'}; record one with --record"
    ]


def test_replay_fails_when_the_run_stops_short_of_the_recording(write_suite: SuiteFactory, tmp_path: Path) -> None:
    path = write_suite(DEPLOY_STDIO, DEPLOY_TESTS, name="deploy.elicit.yaml")
    run_suite(path, record=tmp_path / "tapes")
    tape = tmp_path / "tapes" / "deploy" / "deploy-in-one-round.yaml"
    recorded = yaml.safe_load(tape.read_text())
    recorded["messages"].append({"client": {"jsonrpc": "2.0", "id": 9, "method": "ping"}})
    tape.write_text(yaml.safe_dump(recorded))
    [outcome] = run_suite(path, replay=tmp_path / "tapes")
    assert outcome.failures == ["the recording has 1 more request(s) the run never sent"]


def test_ids_states_timestamps_and_sessions_are_normalized() -> None:
    normalizer = Normalizer()
    call = {
        "jsonrpc": "2.0",
        "id": 41,
        "method": "tools/call",
        "params": {"_meta": {"sessionId": "s-9", "at": "2026-11-24T10:00:00Z"}},
    }
    assert normalizer.normalize("client", call) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"_meta": {"sessionId": "<session>", "at": "<timestamp>"}},
    }
    round_ = {"jsonrpc": "2.0", "id": 41, "result": {"requestState": "random-1", "note": "2026-11-24T10:00:00Z"}}
    assert normalizer.normalize("server", round_)["result"] == {
        "requestState": "<requestState 1>",
        "note": "2026-11-24T10:00:00Z",  # outside _meta a timestamp is content, kept as is
    }
    retry = {"jsonrpc": "2.0", "id": 42, "method": "tools/call", "params": {"requestState": "random-1"}}
    assert normalizer.normalize("client", retry) == {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"requestState": "<requestState 1>"},
    }
    asked = {"jsonrpc": "2.0", "id": "srv-7", "method": "elicitation/create", "params": {}}
    assert normalizer.normalize("server", asked)["id"] == 1
    assert normalizer.normalize("client", {"jsonrpc": "2.0", "id": "srv-7", "result": {}})["id"] == 1
