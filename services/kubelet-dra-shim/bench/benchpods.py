"""What the shim benchmarks (``prepare.py``, ``fleet.py``) create: a pod bound to a node whose one claim is
allocated and reserved for it, as the allocator would have written it."""

from __future__ import annotations

from typing import Any

from draflow_runtime.kube import PODS, RESOURCE_CLAIMS, KubeClient


async def allocated_pod(kube: KubeClient, ns: str, name: str, node: str, cls: str, driver: str,
                        device: str) -> dict[str, Any]:
    """Claim ``name`` (one request of class ``cls``), pod ``name`` on ``node`` using it, then the claim's
    allocation (``device`` of ``driver`` in the node's pool) and ``reservedFor`` the pod; returns the pod."""
    await kube.create(
        RESOURCE_CLAIMS,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}},
        },
        namespace=ns,
    )
    pod = await kube.create(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "nodeName": node,
                "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                "containers": [{"name": "c", "image": "pause", "resources": {"claims": [{"name": "gpu"}]}}],
            },
        },
        namespace=ns,
    )
    selector = {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    ]}
    await kube.patch(
        RESOURCE_CLAIMS,
        name,
        {
            "status": {
                "allocation": {
                    "devices": {
                        "results": [{"request": "gpu", "driver": driver, "pool": node, "device": device}]
                    },
                    "nodeSelector": selector,
                },
                "reservedFor": [{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}],
            }
        },
        namespace=ns,
        subresource="status",
    )
    return pod
