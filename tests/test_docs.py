"""The documentation site builds with `mkdocs build --strict` (no broken link, anchor or nav entry, no warning), its
configuration reference covers every key of the config, and the README stays a front page."""

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
from pydantic import BaseModel

from elicithub.config import Config
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
        for name in model.model_fields:
            assert f"<td><code>{name}</code></td>" in page, f"{model.__name__}.{name} is not in the reference"
    for section in ("top-level", "store", "auth-oidc", "mcp-servers", "mcp-servers-oauth", "a2a-agents", "slack"):
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
