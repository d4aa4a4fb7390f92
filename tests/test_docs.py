"""The documentation site builds with `mkdocs build --strict`: no broken link, anchor or nav entry, no warning."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build(site: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` of the repository's site into `site`, offline (nothing in mkdocs.yml fetches)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_the_site_builds_strictly_without_warnings(tmp_path: Path) -> None:
    built = build(tmp_path / "site")
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    assert (tmp_path / "site" / "index.html").is_file()


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
