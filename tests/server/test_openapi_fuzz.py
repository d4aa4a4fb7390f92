"""schemathesis over /openapi.json, with and without a token: whatever it sends, the hub never answers 5xx."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from elicithub.config import parse_config
from tests.conftest import USERS, RunningHub


@pytest.fixture(scope="module")
def fuzzed_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningHub]:
    workdir = tmp_path_factory.mktemp("fuzz")
    config = parse_config(
        {"store": {"url": "memory://"}, "secrets": {"key_file": str(workdir / "secret.key")}, "users": USERS}
    )
    hub = RunningHub(config)
    yield hub
    hub.stop()


@pytest.mark.parametrize("token", [None, "alice-secret"], ids=["anonymous", "alice"])
def test_no_request_gets_a_server_error(fuzzed_hub: RunningHub, token: str | None) -> None:
    schema = schemathesis.openapi.from_url(f"{fuzzed_hub.url}/openapi.json")
    headers = {"x-supports-elicitation": "true"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 8

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
        def no_server_error(case: schemathesis.Case) -> None:
            case.call_and_validate(headers=headers, checks=[not_a_server_error], timeout=30)

        no_server_error()
