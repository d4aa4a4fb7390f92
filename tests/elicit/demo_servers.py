"""The project's demo servers (deploy: 2026-07-28, release: 2025-11-25) on stdio, for the suites beside this file."""

from __future__ import annotations

import sys

from elicithub.demo.deploy import deploy_server, release_server

if __name__ == "__main__":
    (deploy_server() if sys.argv[1] == "deploy" else release_server()).run("stdio")
