"""The documentation site builds with `mkdocs build --strict`: no broken link, anchor or nav entry, no warning."""

from __future__ import annotations

import os
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
