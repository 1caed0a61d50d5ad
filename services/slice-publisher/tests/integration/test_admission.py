"""The admission policy and RBAC of deploy/kustomize/base/slice-publisher on the real kube-apiserver.

The node-bound identity is emulated like upstream's E2E tests do it: the admin impersonates the
``slice-publisher`` ServiceAccount and adds the user extra ``authentication.kubernetes.io/node-name`` that a
pod-bound token would carry (``Impersonate-Extra-authentication.kubernetes.io%2fnode-name``).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.aio import config as kube_config
from kubernetes.aio.client import ApiClient, Configuration

from draflow_runtime.errors import AlreadyExists, ApiError
from draflow_runtime.kube import RESOURCE_SLICES, KubeClient, Resource
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration

BASE = Path(__file__).resolve().parents[4] / "deploy" / "kustomize" / "base" / "slice-publisher"
NAMESPACE = "draflow-node"  # the node agents' (deploy/kustomize/base/common)
SA = "slice-publisher"
RESOURCES = {
    "ServiceAccount": Resource("", "v1", "serviceaccounts", "ServiceAccount", True),
    "ClusterRole": Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    "ClusterRoleBinding": Resource(
        "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
    ),
    "ValidatingAdmissionPolicy": Resource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        False,
    ),
    "ValidatingAdmissionPolicyBinding": Resource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        False,
    ),
}


async def apply_base(kube: KubeClient) -> None:
    """Create (or replace) everything the base declares except the DaemonSet (no kubelet here)."""
    for name in ("serviceaccount.yaml", "rbac.yaml", "admission-policy.yaml"):
        for doc in yaml.safe_load_all((BASE / name).read_text()):
            res = RESOURCES[doc["kind"]]
            ns = doc["metadata"].get("namespace") if res.namespaced else None
            try:
                await kube.create(res, doc, namespace=ns)
            except AlreadyExists:
                current = await kube.get(res, doc["metadata"]["name"], namespace=ns)
                doc["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                await kube.replace(res, doc)


async def node_bound_client(kubeconfig: Path, node: str) -> KubeClient:
    """Admin credentials impersonating the publisher ServiceAccount bound to ``node``."""
    configuration = Configuration()
    await kube_config.load_kube_config(
        config_file=str(kubeconfig), client_configuration=configuration, persist_config=False
    )
    api = ApiClient(configuration)
    api.set_default_header("Impersonate-Extra-authentication.kubernetes.io%2fnode-name", node)
    return KubeClient(
        api,
        impersonate=f"system:serviceaccount:{NAMESPACE}:{SA}",
        impersonate_groups=[
            "system:serviceaccounts",
            f"system:serviceaccounts:{NAMESPACE}",
            "system:authenticated",
        ],
    )


def slice_of(node: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "gpu.draflow.example",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}],
        },
    }


async def denied(call: Any) -> ApiError | None:
    try:
        await call
    except ApiError as exc:
        return exc if exc.status in (403, 422) else None
    return None


async def test_node_bound_publisher_may_only_write_its_own_nodes_slices(
    testenv: Any, kube: KubeClient
) -> None:
    await testenv.admin.ensure_namespace(NAMESPACE)
    await apply_base(kube)
    suffix = uuid.uuid4().hex[:6]
    node_a, node_b = f"vap-a-{suffix}", f"vap-b-{suffix}"
    as_a = await node_bound_client(testenv.kubeconfig, node_a)
    try:
        # The policy becomes active asynchronously: wait until a foreign create is denied.
        name_b = f"{node_b}-by-a"
        err = await eventually(
            lambda: denied(as_a.create(RESOURCE_SLICES, slice_of(node_b, name_b))), timeout=30
        )
        assert "may not write a ResourceSlice of node" in err.message

        # Its own node: create, update, delete are all allowed (RBAC suffices, the policy agrees).
        own = await as_a.create(RESOURCE_SLICES, slice_of(node_a, f"{node_a}-own"))
        own["spec"]["devices"].append({"name": "gpu-1"})
        own = await as_a.replace(RESOURCE_SLICES, own)
        await as_a.delete(RESOURCE_SLICES, own["metadata"]["name"])

        # Node B's slice (written by the admin): node A may neither update nor delete it.
        foreign = await kube.create(RESOURCE_SLICES, slice_of(node_b, f"{node_b}-admin"))
        foreign["spec"]["devices"].append({"name": "gpu-1"})
        assert await denied(as_a.replace(RESOURCE_SLICES, foreign))
        assert await denied(as_a.delete(RESOURCE_SLICES, foreign["metadata"]["name"]))
        assert await denied(as_a.delete_collection(RESOURCE_SLICES, field_selector=f"spec.nodeName={node_b}"))
        assert (await kube.get(RESOURCE_SLICES, foreign["metadata"]["name"]))["metadata"]["uid"]

        # Not node-bound at all (no node-name extra): denied even for "its own" node name.
        unbound = KubeClient(
            ApiClient(as_a._api.configuration),
            impersonate=f"system:serviceaccount:{NAMESPACE}:{SA}",
            impersonate_groups=["system:serviceaccounts", "system:authenticated"],
        )
        try:
            assert await denied(unbound.create(RESOURCE_SLICES, slice_of(node_a, f"{node_a}-unbound")))
        finally:
            await unbound.close()
        # A network-attached slice (no nodeName) is not for a node-bound publisher either.
        network = slice_of(node_a, f"{node_a}-net")
        del network["spec"]["nodeName"]
        network["spec"]["allNodes"] = True
        assert await denied(as_a.create(RESOURCE_SLICES, network))
    finally:
        await as_a.close()
        await kube.delete_collection(RESOURCE_SLICES, field_selector=f"spec.nodeName={node_b}")
        await kube.delete_collection(RESOURCE_SLICES, field_selector=f"spec.nodeName={node_a}")
