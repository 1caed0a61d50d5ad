"""Objects the CLI's integration tests create (the conftest puts this directory on sys.path)."""

from __future__ import annotations

from typing import Any

from draflow_runtime.kube import RESOURCE_CLAIMS, KubeClient


def resource_slice(driver: str, node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver.split('.')[0]}"},
        "spec": {"driver": driver, "nodeName": node, "devices": devices,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}},
    }


async def allocated_claim(
    kube: KubeClient, namespace: str, name: str, driver: str, pool: str, device: str,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    claim = await kube.create(RESOURCE_CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.draflow.example"}}
        ]}},
    }, namespace=namespace)
    if not device:
        return claim
    claim["status"] = {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": driver, "pool": pool, "device": device}]},
        "nodeSelector": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [pool]}]}
        ]},
    }}
    return await kube.replace(RESOURCE_CLAIMS, claim, subresource="status")
