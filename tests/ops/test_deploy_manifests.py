"""The Kubernetes manifests in ops/deploy/kubernetes/ say what their README promises:
probes on assern's own endpoints, a drain longer than the front's deadline, a budget
and a headless Service that select the replicas, an assern configuration assern
accepts, and the balancer rules of ops/deploy/haproxy/haproxy.cfg."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from needed_tools import needs_haproxy

DEPLOY = Path(__file__).resolve().parents[2] / "ops" / "deploy"
K8S = DEPLOY / "kubernetes"
#: the Kubernetes releases whose APIs the manifests are checked against: an old one
#: still in wide use, and the newest the schema package knows
KUBERNETES = ("1.29", "latest")


def documents(name: str) -> dict[str, dict[str, Any]]:
    """The documents of one manifest file by `Kind/name`."""
    loaded = [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in loaded}


ASSERN = documents("assern.yaml")
HAPROXY = documents("haproxy.yaml")


@pytest.mark.parametrize("release", KUBERNETES)
@pytest.mark.parametrize("name", sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml"))
def test_every_manifest_is_valid_against_the_kubernetes_api_schemas(name: str, release: str) -> None:
    # Strict: a misspelt or misplaced field is an error, as `kubectl apply` would make it.
    import kubernetes_validate

    version = kubernetes_validate.latest_version() if release == "latest" else release
    for document in yaml.safe_load_all((K8S / name).read_text()):
        if document:
            kubernetes_validate.validate(document, version, strict=True)


def test_a_misplaced_field_is_caught_by_that_check() -> None:
    import kubernetes_validate

    deployment = yaml.safe_load_all((K8S / "assern.yaml").read_text())
    [broken] = [d for d in deployment if d and d["kind"] == "Deployment"]
    broken["spec"]["template"]["spec"]["containers"][0]["readinessprobe"] = {}  # lower-case p
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, kubernetes_validate.latest_version(), strict=True)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_builds_the_kustomization_into_every_document() -> None:
    built = subprocess.run(
        ["kubectl", "kustomize", str(K8S)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    kinds = sorted(f"{d['kind']}/{d['metadata']['name']}" for d in yaml.safe_load_all(built) if d)
    expected = sorted({*ASSERN, *HAPROXY, *documents("namespace.yaml")})
    assert kinds == expected
    assert all(
        d["metadata"].get("namespace") == "assern"
        for d in yaml.safe_load_all(built)
        if d and d["kind"] != "Namespace"
    )


def test_kustomize_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    assert listed == {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}


def test_the_replicas_are_probed_on_readyz_and_healthz_and_drain_within_their_grace() -> None:
    pod = ASSERN["Deployment/assern"]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    config = tomllib.loads(ASSERN["ConfigMap/assern-config"]["data"]["config.toml"])
    pause = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert pod["terminationGracePeriodSeconds"] > pause + config["listen"]["graceful_timeout"]


def test_the_budget_and_the_headless_service_select_the_replicas() -> None:
    labels = ASSERN["Deployment/assern"]["spec"]["template"]["metadata"]["labels"]
    assert ASSERN["PodDisruptionBudget/assern"]["spec"]["selector"]["matchLabels"] == labels
    service = ASSERN["Service/assern-replicas"]["spec"]
    assert service["clusterIP"] == "None"
    assert service["selector"] == labels
    assert (
        ASSERN["Deployment/assern"]["spec"]["replicas"]
        > ASSERN["PodDisruptionBudget/assern"]["spec"]["minAvailable"]
    )


def test_the_configuration_in_the_config_map_is_one_assern_accepts(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(ASSERN["ConfigMap/assern-config"]["data"]["config.toml"])
    done = subprocess.run(
        [sys.executable, "-c", "from assern.app.ctl import main; main()", "config", "validate", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def balancer_rules(text: str) -> list[str]:
    """The lines that decide where requests go and when they are resent."""
    starts = ("stick", "retry-on", "retries", "option redispatch", "option http-buffer-request", "http-check")
    lines = [line.strip() for line in text.splitlines()]
    return [re.sub(r"\s+", " ", line) for line in lines if line.startswith(starts)]


def test_the_cluster_balancer_keeps_the_rules_of_the_shipped_haproxy_configuration() -> None:
    in_cluster = HAPROXY["ConfigMap/assern-haproxy"]["data"]["haproxy.cfg"]
    shipped = (DEPLOY / "haproxy" / "haproxy.cfg").read_text()
    assert balancer_rules(in_cluster) == balancer_rules(shipped)
    assert "assern-replicas.assern.svc.cluster.local" in in_cluster


@needs_haproxy
def test_the_cluster_balancer_configuration_is_valid(tmp_path: Path) -> None:
    config = tmp_path / "haproxy.cfg"
    config.write_text(HAPROXY["ConfigMap/assern-haproxy"]["data"]["haproxy.cfg"])
    done = subprocess.run(["haproxy", "-c", "-f", str(config)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
