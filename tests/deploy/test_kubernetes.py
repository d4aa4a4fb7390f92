"""deploy/kubernetes: each overlay renders with `kubectl kustomize`, every object validates against the Kubernetes
schemas, the probes reach the hub's real routes, and the ConfigMap's hub.yaml is a config the hub accepts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import kubernetes_validate
import pytest
import yaml

from elicithub.config import ServerConfig, parse_config
from tests.conftest import RunningHub
from tests.deploy.engine import REPO

pytestmark = pytest.mark.timeout(1800)  # the first test to run builds the stand-in bases and the hub image

KUBERNETES = REPO / "deploy" / "kubernetes"
OVERLAYS = ["redis", "postgres"]
STORE_URLS = {"redis": "redis://redis:6379/0", "postgres": "postgresql://elicithub:secret@postgres:5432/elicithub"}
"""What each overlay's ELICITHUB_STORE_URL says (for postgres, what its Secret would hold)."""


def kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        pytest.fail("kubectl is not installed: ./scripts/test installs it")
    version = json.loads(subprocess.run([found, "version", "--client", "-o", "json"], capture_output=True).stdout)
    kustomize = re.match(r"v(\d+)", version.get("kustomizeVersion", "v0"))
    if kustomize is None or int(kustomize.group(1)) < 4:
        pytest.skip(f"kubectl's kustomize ({version.get('kustomizeVersion', 'none')}) is older than v4")
    return found


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    overlay: str = request.param
    done = subprocess.run(
        [kubectl(), "kustomize", str(KUBERNETES / "overlays" / overlay)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return overlay, [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind]
    return found


def test_every_object_validates_against_the_kubernetes_schemas(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objects = rendered
    assert sorted(o["kind"] for o in objects) == ["ConfigMap", "Deployment", "PodDisruptionBudget", "Service"]
    for obj in objects:
        kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)


def test_two_non_root_replicas_on_a_read_only_root_with_writable_data_and_tmp(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    _, objects = rendered
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
    [hub] = pod["containers"]
    assert hub["securityContext"]["readOnlyRootFilesystem"] is True
    assert hub["securityContext"]["allowPrivilegeEscalation"] is False
    empty = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
    writable = {m["mountPath"] for m in hub["volumeMounts"] if m["name"] in empty and not m.get("readOnly")}
    assert writable == {"/data", "/tmp"}


def test_the_master_key_comes_from_a_secret_and_the_config_from_the_configmap(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    _, objects = rendered
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    [hub] = pod["containers"]
    env = {e["name"]: e for e in hub["env"]}
    assert env["ELICITHUB_SECRET_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "elicithub", "key": "secret-key"}
    [config_volume] = [v for v in pod["volumes"] if "configMap" in v]
    assert config_volume["configMap"]["name"] == one(objects, "ConfigMap")["metadata"]["name"]
    [mount] = [m for m in hub["volumeMounts"] if m["name"] == config_volume["name"]]
    assert env["ELICITHUB_CONFIG"]["value"] == f"{mount['mountPath']}/hub.yaml"


def test_the_service_and_the_disruption_budget_select_the_pods(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objects = rendered
    labels = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    service, budget = one(objects, "Service"), one(objects, "PodDisruptionBudget")
    assert service["spec"]["selector"].items() <= labels.items()
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert budget["spec"]["minAvailable"] == 1
    [hub] = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert [p["targetPort"] for p in service["spec"]["ports"]] == [p["name"] for p in hub["ports"]]


def test_the_probes_answer_200_from_a_running_hub(rendered: tuple[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    _, objects = rendered
    [hub] = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert hub["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert hub["readinessProbe"]["httpGet"]["path"] == "/readyz"
    ports = {p["name"]: p["containerPort"] for p in hub["ports"]}
    assert ports[hub["readinessProbe"]["httpGet"]["port"]] == 8700
    config = parse_config(
        {"store": {"url": f"sqlite:///{tmp_path / 'hub.db'}"}, "secrets": {"key_file": str(tmp_path / "key")}}
    )
    running = RunningHub(config)
    try:
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            assert httpx.get(running.url + hub[probe]["httpGet"]["path"]).status_code == 200, probe
    finally:
        running.stop()


def test_a_rollout_replaces_one_pod_at_a_time_and_gives_each_its_drain(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    _, objects = rendered
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    pod = deployment["spec"]["template"]["spec"]
    [hub] = pod["containers"]
    drain_s = ServerConfig(
        **(yaml.safe_load(one(objects, "ConfigMap")["data"]["hub.yaml"]).get("server") or {})
    ).drain_s
    assert pod["terminationGracePeriodSeconds"] >= drain_s + 5  # drained and exited before any SIGKILL
    readiness = hub["readinessProbe"]
    assert readiness["httpGet"]["path"] == "/readyz"  # not ready from the SIGTERM on
    assert readiness["periodSeconds"] * readiness["failureThreshold"] <= drain_s  # out of the Service before it stops
    assert hub["livenessProbe"]["httpGet"]["path"] == "/healthz"  # 200 while it drains: never restarted then


def test_the_configmaps_hub_yaml_passes_config_check(
    rendered: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    overlay, objects = rendered
    [hub] = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    store = next(e for e in hub["env"] if e["name"] == "ELICITHUB_STORE_URL")
    assert store.get("value", STORE_URLS[overlay]) == STORE_URLS[overlay]
    config = tmp_path / "hub.yaml"
    config.write_text(one(objects, "ConfigMap")["data"]["hub.yaml"])
    done = subprocess.run(
        [sys.executable, "-c", "from elicithub.cli import main; main()", "config", "check", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "ELICITHUB_STORE_URL": STORE_URLS[overlay]},
    )
    assert done.returncode == 0, done.stderr
    assert f"store       {STORE_URLS[overlay].replace(':secret@', ':***@')}" in done.stdout
