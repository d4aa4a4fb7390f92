"""The documentation site builds with `mkdocs build --strict` (no broken link, anchor or nav entry, no warning), its
configuration reference covers every key of the config, the README stays a front page, and the example configs the
docs show are configs the hub accepts."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, get_args

import pytest
import yaml
from pydantic import BaseModel
from typer.testing import CliRunner

from elicithub.cli import app
from elicithub.config import Config, ModelEntry, load_config, parse_config
from elicithub.demo.launcher import SUGGESTIONS

REPO = Path(__file__).resolve().parents[1]


class Built:
    def __init__(self, process: subprocess.CompletedProcess[str], site: Path) -> None:
        self.process = process
        self.site = site


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """`mkdocs build --strict` of the repository's site, once for this module, offline (nothing in mkdocs.yml
    fetches: no web fonts, no social cards)."""
    site = tmp_path_factory.mktemp("docs") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    process = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False)
    return Built(process, site)


def test_the_site_builds_strictly_without_warnings(built: Built) -> None:
    assert built.process.returncode == 0, built.process.stderr
    assert "WARNING" not in built.process.stderr, built.process.stderr
    assert (built.site / "index.html").is_file()


def models(model: type[BaseModel] = Config) -> Iterator[type[BaseModel]]:
    """The config's models, from the top level down."""
    yield model
    for field in model.model_fields.values():
        for nested in held(field.annotation):
            yield from models(nested)


def held(annotation: Any) -> list[type[BaseModel]]:
    """The models a field's type holds: itself, optional, or in a list."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in get_args(annotation) for model in held(arg)]


def hook() -> ModuleType:
    path = REPO / "docs" / "hooks" / "config_reference.py"
    spec = importlib.util.spec_from_file_location("config_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_configuration_reference_is_generated_with_every_key_of_the_config(built: Built) -> None:
    assert not (REPO / "docs" / "config-reference.md").exists(), "the reference is generated, not kept in docs/"
    page = (built.site / "config-reference" / "index.html").read_text()
    for model in models():
        for name, field in model.model_fields.items():
            key = field.alias or name  # the key as a config file spells it (`from`, a Python keyword)
            assert f"<td><code>{key}</code></td>" in page, f"{model.__name__}.{name} is not in the reference"
    sections = ("top-level", "store", "auth-oidc", "mcp-servers", "mcp-servers-oauth", "a2a-agents", "slack", "teams")
    for section in (*sections, "email", "email-smtp"):
        assert f'id="{section}"' in page


def test_every_description_in_the_models_reaches_the_reference_beside_its_limits_and_default() -> None:
    markdown = hook().reference()
    for model in models():
        for name, field in model.model_fields.items():
            if field.description:
                assert " ".join(field.description.split()) in markdown, f"{model.__name__}.{name}"
    row = next(line for line in markdown.splitlines() if line.startswith("| `heartbeat_s` |"))
    assert "| number | `5` |" in row and "(> 0, ≤ 60)" in row
    assert "| `token` | string | required |" in markdown


def test_the_readme_is_a_front_page_whose_links_reach_files_of_the_repository() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if not re.match(r"^[a-z]+://", link)]
    assert "docs/getting-started.md" in local
    missing = [link for link in local if not (REPO / link).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_readme_gives_the_two_commands_first_serve_then_test() -> None:
    readme = (REPO / "README.md").read_text()
    commands = re.findall(r"```sh\n(.*?)\n```", readme, re.DOTALL)
    assert commands[:2] == ["./scripts/serve", "./scripts/test"]
    for script in ("scripts/serve", "scripts/test"):
        assert os.access(REPO / script, os.X_OK), script


def test_the_widget_suggests_every_demo_call_the_readme_shows() -> None:
    readme = (REPO / "README.md").read_text()
    demo = readme.split("## Try the demo", 1)[1].split("## ", 1)[0]
    calls = re.findall(r"^/call .+$", demo, re.MULTILINE)
    assert len(calls) == 5
    assert set(calls) <= {s["message"] for s in SUGGESTIONS}


def yaml_examples(page: str) -> list[str]:
    """The YAML code blocks of a page under docs/."""
    return re.findall(r"^```yaml\n(.*?)^```", (REPO / "docs" / page).read_text(), re.DOTALL | re.MULTILINE)


def test_every_yaml_example_of_the_models_page_is_a_config_the_hub_accepts() -> None:
    examples = yaml_examples("models.md")
    assert len(examples) >= 7  # the overview, OpenAI, Anthropic, Gemini, Ollama, vLLM, Azure
    providers = set()
    for example in examples:
        data = yaml.safe_load(example)
        variables = re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", example)
        config = parse_config(data, "docs/models.md", environ=dict.fromkeys(variables, "set"))
        assert isinstance(config.default_model(), ModelEntry), example  # each shows a model the agents run on
        providers |= {(m.provider, m.base_url) for m in config.models}
    bases = {base for provider, base in providers if provider == "openai-compatible"}
    assert {"http://127.0.0.1:11434/v1", "http://vllm:8000/v1", "https://NAME.openai.azure.com/openai/v1"} <= bases
    assert {"openai", "anthropic", "google"} <= {provider for provider, _ in providers}


def test_the_ollama_demo_config_passes_config_check_with_its_instructions_read() -> None:
    path = REPO / "deploy" / "ollama.yaml"
    result = CliRunner().invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "  model       local (openai-compatible qwen2.5)" in lines
    assert "  agent       assistant: model local, at most 6 steps" in lines
    config = load_config(path)
    assert config.demo.enabled
    [model] = config.models
    assert (model.provider, model.base_url) == ("openai-compatible", "http://127.0.0.1:11434/v1")
    assistant = config.agent("assistant")
    assert assistant.instructions == (REPO / "deploy" / "prompts" / "assistant.md").read_text()
    assert all(agent.instructions for agent in config.agents)
