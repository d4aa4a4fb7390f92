"""Podman and buildah as this machine runs them (shared/reference/containers.md): vfs storage under one fixed folder,
runc, cgroupfs, netavark, and no ulimits; the stand-in base images built from Debian's packages, kept across
sessions; the hub's image built once per session."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/var/tmp/elicithub-containers")
"""The test storage: images, containers and networks of the container tests, and nothing else's."""

REPO = Path(__file__).resolve().parents[2]

_CONTAINERS_CONF = """\
[containers]
default_ulimits = []
[network]
network_backend = "netavark"
network_config_dir = "{root}/networks"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
"""

_STORAGE_CONF = """\
[storage]
driver = "vfs"
graphroot = "{root}/storage"
runroot = "{root}/run"
"""

ROOTS: dict[str, tuple[str, ...]] = {
    "python": ("python3", "python3-venv", "ca-certificates"),
    "services": ("redis-server", "postgresql", "nginx-light"),
}
"""Two small Debian roots (vfs copies an image whole into each container: every megabyte counts): the base of the
hub's image, and one for the stand-ins of the services around it."""

_SLIM = (
    *(f"--dpkgopt=path-exclude=/usr/share/{d}/*" for d in ("doc", "man", "info", "locale", "i18n")),
    # PostgreSQL's optional JIT: two thirds of the services root, never used by a stand-in.
    '--customize-hook=rm -f "$1"/usr/lib/postgresql/*/lib/llvmjit* "$1"/usr/lib/x86_64-linux-gnu/libLLVM* '
    '"$1"/usr/lib/x86_64-linux-gnu/libz3*',
    '--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/*',
)

_TRUST = (
    "--customize-hook=copy-in /usr/local/share/ca-certificates /usr/local/share/",
    '--customize-hook=chroot "$1" update-ca-certificates',
)
"""The machine's proxy CA certificates, for the builds that install packages from the python base."""

_POSTGRES_ENTRYPOINT = """\
#!/bin/sh
# Stand-in for the official postgres image's entrypoint: the same variables, Debian's PostgreSQL 15.
set -eu
PGDATA=${PGDATA:-/var/lib/postgresql/data}
user=${POSTGRES_USER:-postgres}
bin=/usr/lib/postgresql/15/bin
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    mkdir -p "$PGDATA" /run/postgresql
    chown postgres:postgres "$PGDATA" /run/postgresql
    printf '%s\\n' "$POSTGRES_PASSWORD" > /tmp/pwfile
    chown postgres /tmp/pwfile
    as_postgres "$bin/initdb" -D "$PGDATA" -U "$user" --pwfile=/tmp/pwfile --auth-local=trust \\
        --auth-host=scram-sha-256 >/dev/null
    rm /tmp/pwfile
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    if [ "${POSTGRES_DB:-$user}" != postgres ]; then
        echo "CREATE DATABASE \\"${POSTGRES_DB:-$user}\\" OWNER \\"$user\\"" \\
            | as_postgres "$bin/postgres" --single -D "$PGDATA" postgres >/dev/null
    fi
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups "$bin/postgres" -D "$PGDATA" -c listen_addresses='*'
"""

_CERTS = "/etc/ssl/certs/ca-certificates.crt"

STANDINS: dict[str, tuple[str, tuple[str, ...]]] = {
    # A build installs packages through the machine's TLS-inspecting proxy: the python base trusts its CAs.
    "python": (
        "python",
        (f"ENV SSL_CERT_FILE={_CERTS}", f"ENV PIP_CERT={_CERTS}", f"ENV REQUESTS_CA_BUNDLE={_CERTS}", "CMD python3"),
    ),
    "redis": ("services", ('CMD ["redis-server"]',)),
    "postgres": (
        "services",
        (
            "ENV PGDATA=/var/lib/postgresql/data",
            'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]',
            'CMD ["postgres"]',
        ),
    ),
    "nginx": ("services", ('CMD ["nginx", "-g", "daemon off;"]',)),
}
"""The stand-ins, by the official image each replaces: their root, and what `podman import --change` sets on it."""


class EngineError(RuntimeError):
    pass


@dataclass(frozen=True)
class Engine:
    """podman, buildah and podman-compose pointed at the test storage."""

    root: Path = ROOT

    def prepare(self) -> None:
        for sub in ("storage", "run", "networks"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        (self.root / "containers.conf").write_text(_CONTAINERS_CONF.format(root=self.root))
        (self.root / "storage.conf").write_text(_STORAGE_CONF.format(root=self.root))

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "CONTAINERS_CONF": str(self.root / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(self.root / "storage.conf"),
            "STORAGE_DRIVER": "vfs",
        }

    def run(
        self, args: Sequence[str], *, timeout: float = 600, check: bool = True, env: Mapping[str, str] | None = None
    ) -> str:
        done = subprocess.run(
            list(args),
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=REPO,
        )
        if check and done.returncode != 0:
            raise EngineError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def podman(self, *args: str, timeout: float = 600, check: bool = True) -> str:
        return self.run(["podman", *args], timeout=timeout, check=check)

    def podman_succeeds(self, *args: str) -> bool:
        return subprocess.run(["podman", *args], env=self.env, capture_output=True, check=False).returncode == 0

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Sessions sharing the storage build each stand-in once between them."""
        with (self.root / "lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def standins(self) -> dict[str, str]:
        """The stand-in images by the official image each replaces, built when this recipe has none yet."""
        recipe = hashlib.sha256(repr((ROOTS, _SLIM, _TRUST, _POSTGRES_ENTRYPOINT, STANDINS)).encode()).hexdigest()[:12]
        names = {kind: f"localhost/elicithub-standin-{kind}:{recipe}" for kind in STANDINS}
        with self.locked():
            if all(self.podman_succeeds("image", "exists", name) for name in names.values()):
                return names
            with tempfile.TemporaryDirectory(dir=self.root) as work:
                tarballs = {root: self._debian_root(root, Path(work)) for root in ROOTS}
                for kind, (root, changes) in STANDINS.items():
                    self.podman("import", *(f"--change={c}" for c in changes), str(tarballs[root]), names[kind])
            # Those of an older recipe are of no more use: vfs keeps each whole.
            listed = self.podman("images", "--format", "{{.Repository}}:{{.Tag}}").split()
            stale = [i for i in listed if i.startswith("localhost/elicithub-standin-") and not i.endswith(recipe)]
            if stale:
                self.podman("rmi", "--force", *stale, check=False)
        return names

    def _debian_root(self, root: str, work: Path) -> Path:
        entrypoint = work / "docker-entrypoint.sh"
        entrypoint.write_text(_POSTGRES_ENTRYPOINT)
        entrypoint.chmod(0o755)
        tarball = work / f"{root}.tar"
        self.run(
            [
                "mmdebstrap",
                "--variant=minbase",
                f"--include={','.join(ROOTS[root])}",
                *_SLIM,
                *(_TRUST if root == "python" else ()),
                f"--customize-hook=upload {entrypoint} /usr/local/bin/docker-entrypoint.sh",
                '--customize-hook=chmod 755 "$1"/usr/local/bin/docker-entrypoint.sh',
                "bookworm",
                str(tarball),
            ],
            timeout=900,
        )
        return tarball

    def build_hub(self, tag: str, base: str) -> None:
        """The repository's Dockerfile, built from the work tree (its .dockerignore keeps the context small)."""
        self.run(
            [
                "buildah",
                "bud",
                "--isolation",
                "chroot",
                "--layers=false",
                "--build-arg",
                f"BASE={base}",
                "-t",
                tag,
                ".",
            ],
            timeout=900,
        )


def tools_missing() -> list[str]:
    return [
        tool for tool in ("podman", "buildah", "mmdebstrap", "runc", "podman-compose") if shutil.which(tool) is None
    ]
