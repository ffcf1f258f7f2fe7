"""deploy/kubernetes/ against the Kubernetes API's own schemas, and against Gatehouse.

No cluster runs here: each document is validated strictly (no field the API does not
know) with kubernetes-validate's schemas of the oldest and the newest Kubernetes this
project names in docs/operators.md; then what the schemas cannot know: every container
command parses with Gatehouse's own command line, the probes are the ones the image
serves, secrets are only referred to (never carried), and each secret referred to is
one docs/operators.md tells the operator to create.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from shim.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "kubernetes"
OPERATORS = ROOT / "docs" / "operators.md"
# The Kubernetes releases the manifests are held to (docs/operators.md says the same).
VERSIONS = ("1.29.0", "1.37.0")


def _documents() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        out.extend((path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc)
    return out


DOCUMENTS = _documents()


def _pod_specs() -> list[tuple[str, dict[str, Any]]]:
    specs = []
    for _, doc in DOCUMENTS:
        if doc["kind"] in ("Deployment", "StatefulSet", "Job"):
            specs.append((doc["metadata"]["name"], doc["spec"]["template"]["spec"]))
    return specs


def _by_kind(kind: str) -> list[dict[str, Any]]:
    return [doc for _, doc in DOCUMENTS if doc["kind"] == kind]


def test_the_manifests_are_there() -> None:
    kinds = sorted(doc["kind"] for _, doc in DOCUMENTS)
    assert kinds == ["Deployment", "Job", "Service", "Service", "StatefulSet"], kinds


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("name", "doc"), DOCUMENTS, ids=[f"{n}:{d['kind']}" for n, d in DOCUMENTS])
def test_each_document_is_valid_for_the_api(name: str, doc: dict[str, Any], version: str) -> None:
    kubernetes_validate.validate(doc, version, strict=True)


def test_the_validation_refuses_a_field_the_api_does_not_know() -> None:
    doc = copy.deepcopy(_by_kind("StatefulSet")[0])
    doc["spec"]["replicass"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, VERSIONS[-1], strict=True)


def test_every_container_command_is_one_gatehouse_takes() -> None:
    parser = build_parser()
    for name, spec in _pod_specs():
        for container in spec["containers"]:
            args = container["args"]
            parsed = parser.parse_args(args)  # exits (fails the test) on an unknown flag
            assert parsed.command == args[0], (name, args)


def test_the_image_runs_as_its_own_user_without_privileges() -> None:
    for name, spec in _pod_specs():
        assert spec["securityContext"]["runAsUser"] == 10001, name  # the image's gatehouse
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["automountServiceAccountToken"] is False, name  # no use for the API
        for container in spec["containers"]:
            assert container["image"] == "localhost/gatehouse:0.1.0", name  # as compose's
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["capabilities"]["drop"] == ["ALL"], name


def test_the_shim_is_ready_on_readyz_and_the_workers_on_their_heartbeat() -> None:
    (shim,) = _by_kind("Deployment")
    container = shim["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    (workers,) = _by_kind("StatefulSet")
    worker = workers["spec"]["template"]["spec"]["containers"][0]
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    health = compose["x-worker-health"]["test"][1:]  # ["CMD", *command]
    assert worker["livenessProbe"]["exec"]["command"] == health
    assert (ROOT / "deploy" / "healthcheck.py").is_file()
    # the executor id outlives the pod: the StatefulSet's pod name
    env = {e["name"]: e for e in worker["env"]}
    field = env["GATEHOUSE_EXECUTOR_ID"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert field == "metadata.name"


def _secret_refs() -> set[str]:
    names: set[str] = set()
    for _, spec in _pod_specs():
        for volume in spec.get("volumes", []):
            if "secret" in volume:
                names.add(volume["secret"]["secretName"])
        for container in spec["containers"]:
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    names.add(ref["name"])
    return names


def test_secrets_are_referred_to_never_carried_and_the_docs_make_each() -> None:
    assert not _by_kind("Secret"), "a Secret's data does not belong in the repository"
    for _, spec in _pod_specs():
        for container in spec["containers"]:
            for env in container.get("env", []):
                assert "value" not in env or not env["name"].endswith("_URL"), env
    docs = OPERATORS.read_text()
    made = set(re.findall(r"kubectl create secret \S+ (gatehouse-[a-z-]+)", docs))
    assert _secret_refs() == made, (_secret_refs(), made)
    for version in VERSIONS:
        assert version.rsplit(".", 1)[0] in docs  # the releases held to, named there
