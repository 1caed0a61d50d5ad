"""Install draflow on a ``ClusterEnvironment`` the way a user would: the image, then ``deploy/kustomize``.

``install(env)`` builds (or reuses) the draflow image (``image_draflow``) and imports it into the node's
containerd, writes ``<state>/kustomize/kustomization.yaml`` — the ``overlays/e2e`` overlay plus what only
the running environment knows: the API server's port, the NATS and OTLP endpoints, a free HTTP port per
workload, and for the two DaemonSets the nodes' directories: every node of the cluster lives under one root
(``<root>/<node name>``), which the DaemonSets mount at its host path (a DRA driver advertises its socket by
its host path), each pod naming its node's kubelet plugin directories and CDI directory with
``$(NODE_NAME)``, and serving HTTP on its node's address (the pods share the host network, so two nodes'
pods on one machine need different addresses for the same port) — then, as a user would,
``kubectl apply --server-side -k <state>/kustomize`` with kubectl v1.37.1 (``hack/binaries.sh``) and the
environment's kubeconfig. ``build`` (``kustomize build`` of the same directory) is for tests that only look.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import yaml

from draflow_testenv.binaries import ensure_binary, repo_root
from draflow_testenv.cluster import ClusterEnvironment
from draflow_testenv.image_draflow import DRAFLOW_IMAGE, draflow_archive
from draflow_testenv.images import run
from draflow_testenv.servers import HOST, free_port

NAMESPACE = "draflow-system"  # the controllers'
NODE_NAMESPACE = "draflow-node"  # the node agents' (deploy/kustomize/base/common/namespace.yaml)
NODE_AGENTS = frozenset({"slice-publisher", "kubelet-dra-shim", "reference-driver"})


def namespace_of(workload: str) -> str:
    """Where ``workload`` runs: node agents in draflow-node, controllers in draflow-system."""
    return NODE_NAMESPACE if workload in NODE_AGENTS else NAMESPACE


def _workload_patch(kind: str, name: str, prefix: str, port: int, env: dict[str, str | dict[str, Any]],
                    mounts: dict[str, Path] | None = None) -> dict[str, Any]:
    """A workload's HTTP port (host network: one free port each, so parallel clusters never collide), env
    values (a string, or a ``valueFrom`` source) and, for ``mounts``, its volumes, each mounted at its host
    path (lists replaced whole)."""
    container: dict[str, Any] = {
        "name": name,
        "env": [{"name": k, "value": v} if isinstance(v, str) else {"name": k, "valueFrom": v}
                for k, v in {f"DRAFLOW_{prefix}_HTTP_PORT": str(port), **env}.items()],
        "ports": [{"$patch": "replace"}, {"name": "http", "containerPort": port}],
    }
    spec: dict[str, Any] = {"containers": [container]}
    if mounts is not None:
        container["volumeMounts"] = [{"$patch": "replace"},
                                     *({"name": v, "mountPath": str(p)} for v, p in mounts.items())]
        spec["volumes"] = [{"$patch": "replace"},
                           *({"name": v, "hostPath": {"path": str(p), "type": "DirectoryOrCreate"}}
                             for v, p in mounts.items())]
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": name, "namespace": namespace_of(name)},
            "spec": {"template": {"spec": spec}}}


def _configmap(name: str, data: dict[str, str], namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": data}


def kustomization(env: ClusterEnvironment, overlay: str) -> dict[str, Any]:
    """``overlay``: the e2e overlay's path relative to where this kustomization is written (kustomize
    refuses absolute resource paths)."""
    node = env.node
    pod_ip: dict[str, Any] = {"fieldRef": {"fieldPath": "status.podIP"}}  # host network: the node's address
    # Again, so that it comes before the paths naming it: a strategic-merge patch puts its new entries
    # first, and the kubelet expands $(NODE_NAME) only from variables defined earlier in the list.
    node_name: dict[str, Any] = {"fieldRef": {"fieldPath": "spec.nodeName"}}
    patches = [
        *(_configmap("draflow-cluster", {"KUBERNETES_SERVICE_HOST": HOST,
                                         "KUBERNETES_SERVICE_PORT": str(env.ports.apiserver)}, ns)
          for ns in (NAMESPACE, NODE_NAMESPACE)),
        *(_configmap("draflow-endpoints", {"NATS_URL": env.nats_url,
                                           "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{env.otlp_grpc_endpoint}",
                                           "OTEL_EXPORTER_OTLP_INSECURE": "true"}, ns)
          for ns in (NAMESPACE, NODE_NAMESPACE)),
        _workload_patch("Deployment", "claim-controller", "CLAIM_CONTROLLER", free_port(), {}),
        _workload_patch("Deployment", "structured-allocator", "STRUCTURED_ALLOCATOR", free_port(), {}),
        _workload_patch("DaemonSet", "reference-driver", "REFERENCE_DRIVER", free_port(), {
            "NODE_NAME": node_name,
            "DRAFLOW_REFERENCE_DRIVER_HTTP_HOST": pod_ip,
            "DRAFLOW_REFERENCE_DRIVER_REGISTRY_DIR": node.on_any_node(node.plugins_registry),
            "DRAFLOW_REFERENCE_DRIVER_PLUGINS_DIR": node.on_any_node(node.plugins_dir),
            "DRAFLOW_REFERENCE_DRIVER_CDI_ROOT": node.on_any_node(node.cdi_dir),
            "DRAFLOW_REFERENCE_DRIVER_STATE_DIR": node.on_any_node(node.driver_state_dir),
        }, {"nodes": node.root}),
        _workload_patch("DaemonSet", "slice-publisher", "SLICE_PUBLISHER", free_port(), {
            "NODE_NAME": node_name,
            "DRAFLOW_SLICE_PUBLISHER_HTTP_HOST": pod_ip,
            "DRAFLOW_SLICE_PUBLISHER_REGISTRY_DIR": node.on_any_node(node.plugins_registry),
        }, {"nodes": node.root}),
    ]
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [overlay],
        "patches": [{"patch": yaml.safe_dump(p, sort_keys=False)} for p in patches],
    }


def write_kustomization(env: ClusterEnvironment) -> Path:
    """``<state>/kustomize/kustomization.yaml`` over ``overlays/e2e``; returns its directory."""
    out = env.state_dir / "kustomize"
    out.mkdir(parents=True, exist_ok=True)
    overlay = repo_root() / "deploy" / "kustomize" / "overlays" / "e2e"
    doc = kustomization(env, os.path.relpath(overlay, out))
    (out / "kustomization.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


async def build(env: ClusterEnvironment) -> list[dict[str, Any]]:
    """``kustomize build`` of the e2e overlay with this environment's values; the objects."""
    out = await asyncio.to_thread(write_kustomization, env)
    kustomize = await ensure_binary("kustomize")
    text = await run([kustomize, "build", out])
    return [d for d in yaml.safe_load_all(text) if d]


FIELD_MANAGER = "draflow"  # what docs/deploy.md tells users to apply with


async def kubectl_apply_k(env: ClusterEnvironment, directory: Path) -> list[dict[str, Any]]:
    """``kubectl apply --server-side -k DIRECTORY`` against the environment; the applied objects."""
    kubectl = await ensure_binary("kubectl")
    argv = [str(kubectl), f"--kubeconfig={env.kubeconfig}", "apply", "--server-side",
            f"--field-manager={FIELD_MANAGER}", "-k", str(directory), "-o", "json"]
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode != 0:
        detail = err.decode(errors="replace")[-4000:]
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n{detail}")
    doc = json.loads(out)
    items: list[dict[str, Any]] = doc["items"] if doc.get("kind") == "List" else [doc]
    return items


async def install(env: ClusterEnvironment) -> list[dict[str, Any]]:
    """The image into the node's containerd, then ``kubectl apply -k`` of the layered overlay."""
    archive, out = await asyncio.gather(draflow_archive(), asyncio.to_thread(write_kustomization, env))
    await env.import_image(archive)
    return await kubectl_apply_k(env, out)


WORKLOADS = frozenset({"claim-controller", "structured-allocator", "slice-publisher", "reference-driver"})
KINDS = {"claim-controller": "Deployment", "structured-allocator": "Deployment",
         "slice-publisher": "DaemonSet", "reference-driver": "DaemonSet"}


def write_tilt_kustomization(env: ClusterEnvironment) -> Path:
    """``<state>/kustomize-tilt/kustomization.yaml``: ``<state>/kustomize`` with writable root filesystems, so
    Tilt's live update can sync changed sources into the running containers (the Tiltfile's ``--real-node``
    mode). The reference driver runs as uid 0 without capabilities, and the image's venv belongs to uid
    65532: without ``DAC_OVERRIDE`` its root cannot replace a file there (tar: "Cannot open: File exists").
    Returns its directory."""
    out = env.state_dir / "kustomize-tilt"
    out.mkdir(parents=True, exist_ok=True)
    writable: dict[str, Any] = {"readOnlyRootFilesystem": False}
    patches = [{"apiVersion": "apps/v1", "kind": kind,
                "metadata": {"name": name, "namespace": namespace_of(name)},
                "spec": {"template": {"spec": {"containers": [{"name": name, "securityContext": (
                    {**writable, "capabilities": {"add": ["DAC_OVERRIDE"]}} if name == "reference-driver"
                    else writable)}]}}}}
               for name, kind in sorted(KINDS.items())]
    doc = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
           "resources": ["../kustomize"],
           "patches": [{"patch": yaml.safe_dump(p, sort_keys=False)} for p in patches]}
    (out / "kustomization.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


async def import_into_running(state_dir: Path, ref: str) -> list[Path]:
    """Build (or reuse) the draflow image and load it as ``ref`` into the containerd of every node of the
    cluster a ``draflow-testenv up --real-node`` runs from ``state_dir`` (Tilt's custom_build in the
    Tiltfile's ``--real-node`` mode). Returns the containerd sockets it loaded into."""
    sockets = sorted((state_dir / "nodes").glob("*/containerd/containerd.sock"))
    if not sockets:
        raise RuntimeError(f"no node of a running `draflow-testenv up --real-node` under {state_dir}")
    ctr = (await ensure_binary("containerd")).parent / "ctr"
    archive = await draflow_archive()
    for sock in sockets:
        await run([ctr, "--address", sock, "--namespace", "k8s.io", "images", "import",
                   "--platform", "linux/amd64", archive])
        await run([ctr, "--address", sock, "--namespace", "k8s.io", "images", "tag", "--force",
                   DRAFLOW_IMAGE, ref])
    return sockets


async def workloads_ready(env: ClusterEnvironment) -> bool:
    """Each of the overlay's four workloads has a Ready pod (pods carry their service's name label)."""
    pods = [p for ns in (NAMESPACE, NODE_NAMESPACE)
            for p in (await env.admin.request("GET", f"/api/v1/namespaces/{ns}/pods"))["items"]]
    ready = {p["metadata"].get("labels", {}).get("app.kubernetes.io/name") for p in pods
             if any(c["type"] == "Ready" and c["status"] == "True"
                    for c in p.get("status", {}).get("conditions", []))}
    return ready >= WORKLOADS
