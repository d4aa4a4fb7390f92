"""deploy/ollama.yaml, the demo on a local Ollama: served against a stand-in of Ollama's OpenAI-compatible endpoint
(OLLAMA_URL), the assistant's request carries its instructions file and the demo's tools, and its answer streams."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from openai import OpenAI

from elicithub.config import SecretsConfig, StoreConfig, UserConfig, load_config
from tests.conftest import RunningHub, free_port
from tests.models.script import Gate, Text
from tests.models.standins import ModelStandIn
from tests.runtime.test_model_streaming import system_prompt
from tests.server.test_chat_openai import items

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def standin() -> Iterator[ModelStandIn]:
    with ModelStandIn() as server:
        yield server


@pytest.fixture
def hub(standin: ModelStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningHub]:
    monkeypatch.setenv("OLLAMA_URL", standin.openai_base_url)
    monkeypatch.setenv("OLLAMA_MODEL", "llama3.2")
    config = load_config(REPO / "deploy" / "ollama.yaml")
    port = free_port()
    served = RunningHub(
        config.model_copy(
            update={
                "public_url": f"http://127.0.0.1:{port}",
                "store": StoreConfig(url=f"sqlite:///{tmp_path / 'hub.db'}"),
                "secrets": SecretsConfig(key_file=str(tmp_path / "secret.key")),
                "users": [UserConfig(id="alice", token="alice-secret")],
            }
        ),
        port,
    )
    yield served
    served.stop()


def test_the_assistant_answers_from_the_model_with_its_instructions_and_the_demos_tools(
    hub: RunningHub, standin: ModelStandIn
) -> None:
    gate = Gate()
    reply = standin.reply(Text("I can deploy "), gate, Text("services and book trips."))
    client = OpenAI(base_url=f"{hub.url}/run/v1", api_key="alice-secret", max_retries=0)
    stream = client.chat.completions.create(
        model="assistant", messages=[{"role": "user", "content": "What can you do?"}], stream=True
    )
    pieces = items(stream)
    assert next(pieces) == "I can deploy "  # streamed: the model still holds the rest
    gate.release()
    assert "".join(str(p) for p in pieces) == "services and book trips."
    recorded = reply.served()
    assert recorded.body["model"] == "llama3.2"
    assert system_prompt(recorded) == (REPO / "deploy" / "prompts" / "assistant.md").read_text()
    tools = {t["function"]["name"] for t in recorded.body["tools"]}
    assert {"deploy__deploy_service", "release__rollback", "planner__delegate"} <= tools
