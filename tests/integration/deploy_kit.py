"""What the deploy/ tests share: the kustomize targets, the services, and helpers over built objects."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from draflow_testenv.identity import RBAC_KINDS

REPO = Path(__file__).resolve().parents[2]
KUSTOMIZE_DIR = REPO / "deploy" / "kustomize"
DOCKERFILE = REPO / "deploy" / "images" / "Dockerfile"
NAMESPACE = "draflow-system"  # the controllers' (Pod Security: restricted)
NODE_NAMESPACE = "draflow-node"  # the node agents' (privileged: host paths, uid 0)
SERVICES = [
    "claim-controller", "structured-allocator", "slice-publisher", "kubelet-dra-shim", "reference-driver",
]
CONTROLLERS = ["claim-controller", "structured-allocator"]
NODE_AGENTS = ["slice-publisher", "kubelet-dra-shim", "reference-driver"]
BASES = ["common", *SERVICES]
OVERLAYS = ["dev", "sim", "production"]
FIELD_MANAGER = "draflow-deploy-test"

VAP_KINDS = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
EXPECTED_KINDS: dict[str, set[str]] = {
    "common": {"Namespace", "ConfigMap", "ClusterRole"},
    "claim-controller": RBAC_KINDS | {"Deployment"},
    "structured-allocator": RBAC_KINDS | {"Deployment"},
    "slice-publisher": {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"} | VAP_KINDS,
    "kubelet-dra-shim": {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"},
    "reference-driver": {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet", "DeviceClass"},
    "dev": RBAC_KINDS | VAP_KINDS | {"Namespace", "ConfigMap", "Deployment", "DaemonSet", "Service",
                                     "DeviceClass"},
    "sim": RBAC_KINDS | VAP_KINDS | {"Namespace", "ConfigMap", "Deployment", "Service", "DeviceClass"},
    "production": RBAC_KINDS | VAP_KINDS | {"Namespace", "ConfigMap", "Deployment", "DaemonSet",
                                            "DeviceClass", "PodDisruptionBudget"},
}


def env_prefix(service: str) -> str:
    return "DRAFLOW_" + service.upper().replace("-", "_") + "_"


def target_dir(target: str) -> Path:
    return KUSTOMIZE_DIR / ("overlays" if target in OVERLAYS else "base") / target



def identity(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    group = obj["apiVersion"].rpartition("/")[0]
    return group, obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def workloads(objs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    yield from (o for o in objs if o["kind"] in ("Deployment", "DaemonSet"))


def find(objs: list[dict[str, Any]], kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    """The one object of ``kind`` and ``name`` (in ``namespace``, when one is given)."""
    matches = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name
               and namespace in (None, o["metadata"].get("namespace"))]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} objects"
    return matches[0]


def draflow_containers(objs: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(workload, container) for every container that runs a draflow service."""
    for w in workloads(objs):
        for c in w["spec"]["template"]["spec"]["containers"]:
            if c.get("command", [""])[0] in SERVICES:
                yield w, c


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}



async def run_ok(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0, f"{shlex.join(argv)} failed:\n{out.decode()[-3000:]}"
    return out.decode()

