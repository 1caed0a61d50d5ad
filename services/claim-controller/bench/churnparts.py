"""Pieces of ``churn.py``: the load generator standing in for a scheduler (``--allocate``) and the
controller's NATS bus (``--nats``)."""

from __future__ import annotations

from collections import Counter

from apiwrites import WriteKey

from draflow_runtime.bus import EventBus
from draflow_runtime.kube import PODS, RESOURCE_CLAIMS, KubeClient
from draflow_runtime.lifecycle import ensure_events_stream

FINALIZER = "resource.kubernetes.io/delete-protection"


async def start_bus(url: str) -> EventBus:
    """The controller's NATS bus (claim lifecycle events on JetStream), as the service starts it."""
    bus = EventBus(url, name="claim-controller-bench")
    await ensure_events_stream(bus)
    await bus.start()
    return bus


async def allocate_claims(kube: KubeClient, namespace: str, pod_name: str, own: Counter[WriteKey]) -> None:
    """What a scheduler does for the pod's claims: the delete-protection finalizer, then the allocation
    with the pod in ``reservedFor`` (fake device; nothing checks it against slices)."""
    pod = await kube.get(PODS, pod_name, namespace)
    for status in (pod.get("status") or {}).get("resourceClaimStatuses") or ():
        name = status["resourceClaimName"]
        await kube.patch(RESOURCE_CLAIMS, name, {"metadata": {"finalizers": [FINALIZER]}}, namespace)
        allocation = {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.bench.example", "pool": "bench", "device": name}]}}
        consumer = {"resource": "pods", "name": pod_name, "uid": pod["metadata"]["uid"]}
        status_patch = {"status": {"allocation": allocation, "reservedFor": [consumer]}}
        await kube.patch(RESOURCE_CLAIMS, name, status_patch, namespace, subresource="status")
        own[("PATCH", "resource.k8s.io/resourceclaims", "")] += 1
        own[("PATCH", "resource.k8s.io/resourceclaims", "status")] += 1
