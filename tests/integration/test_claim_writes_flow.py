"""API writes of placing pods with template claims: claim-controller and structured-allocator as processes
against the real kube-apiserver, nodes and ResourceSlices written by the test (no node side: nothing
here needs a pod to run).

The claim-controller creates each generated claim with the delete-protection finalizer
(``--create-with-finalizer``, its default), so the allocator, which adds the finalizer before it allocates a
claim without it, writes none: no PATCH of ``resourceclaims`` (the main resource, where the finalizer
lives) while the pods are placed, counted by the API server itself (``apiserver_request_total``). With the
claim-controller's setting off the allocator writes it, one PATCH per claim, as upstream's kube-scheduler
does for kube-controller-manager's claims.
"""

from __future__ import annotations

import contextlib
import sys
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from draflow_runtime.dra import DELETE_PROTECTION_FINALIZER, claim_names
from draflow_runtime.errors import NotFound
from draflow_runtime.kube import (
    DEVICE_CLASSES,
    NODES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    KubeClient,
)
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration

PODS_PLACED = 4
FINALIZER_PATCH = ("PATCH", "resourceclaims", "")


async def writes(kube: KubeClient) -> Counter[tuple[str, str, str]]:
    """Write requests the API server has answered so far, by (verb, resource, subresource)."""
    counts: Counter[tuple[str, str, str]] = Counter()
    for family in text_string_to_metric_families(await kube.get_text("/metrics")):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            labels = sample.labels
            if sample.name.endswith("_total") and labels.get("verb") in ("POST", "PUT", "PATCH", "APPLY"):
                counts[(labels["verb"], labels.get("resource", ""), labels.get("subresource", ""))] += \
                    int(sample.value)
    return counts


class Cluster:
    """Two Ready nodes with a slice of four devices each, a DeviceClass and a template; removed after."""

    def __init__(self, kube: KubeClient, ns: str) -> None:
        self.kube, self.ns = kube, ns
        self.suffix = uuid.uuid4().hex[:6]
        self.driver = f"gpu-{self.suffix}.writes.draflow.dev"
        self.device_class = f"writes-{self.suffix}"
        self.scheduler = f"draflow-writes-{self.suffix}"
        self.nodes = [f"writes-{self.suffix}-{i}" for i in range(2)]

    async def create(self) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        resources = {"pods": "110", "cpu": "64", "memory": "256Gi"}
        for node in self.nodes:
            await self.kube.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {
                "name": node, "labels": {"kubernetes.io/hostname": node}}, "spec": {}})
            await self.kube.patch(NODES, node, {"status": {
                "capacity": resources, "allocatable": resources, "conditions": [{
                    "type": "Ready", "status": "True", "reason": "Test", "message": "test node",
                    "lastHeartbeatTime": now, "lastTransitionTime": now}]}}, subresource="status")
            # No node-lifecycle controller here lifts the not-ready taint admission added.
            await self.kube.patch(NODES, node, {"spec": {"taints": None}})
            await self.kube.create(RESOURCE_SLICES, {
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": node},
                "spec": {"driver": self.driver, "nodeName": node,
                         "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": f"gpu-{i}"} for i in range(4)]}})
        await self.kube.create(DEVICE_CLASSES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": self.device_class},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{self.driver}"'}}]}})
        await self.kube.create(RESOURCE_CLAIM_TEMPLATES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": self.device_class}}]}}}}, namespace=self.ns)

    async def remove(self) -> None:
        with contextlib.suppress(NotFound):
            await self.kube.delete(DEVICE_CLASSES, self.device_class)
        for node in self.nodes:
            for res in (RESOURCE_SLICES, NODES):
                with contextlib.suppress(NotFound):
                    await self.kube.delete(res, node)

    async def create_pod(self, name: str) -> None:
        await self.kube.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
            "schedulerName": self.scheduler,
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": self.nodes}]}]}}},
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"claims": [{"name": "gpu"}]}}]}}, namespace=self.ns)


async def _place(kube: KubeClient, ns: str, run_service: Callable[..., Awaitable[Any]],
                 claim_controller_args: list[str]) -> tuple[int, list[dict[str, Any]]]:
    """Place :data:`PODS_PLACED` pods; the finalizer PATCHes made meanwhile and the claims as placed."""
    cluster = Cluster(kube, ns)
    bin_dir = Path(sys.executable).parent
    common = ["--log-format", "json", "--http-port", "0"]
    try:
        await cluster.create()
        await run_service([str(bin_dir / "claim-controller"), *common, "--namespace", ns,
                           *claim_controller_args], name=f"claim-controller-{cluster.suffix}")
        await run_service([str(bin_dir / "structured-allocator"), *common, "--scheduler-names",
                           cluster.scheduler], name=f"structured-allocator-{cluster.suffix}")
        before = await writes(kube)
        names = [f"p{i}" for i in range(PODS_PLACED)]
        for name in names:
            await cluster.create_pod(name)

        async def bound() -> list[dict[str, Any]] | None:
            pods = [await kube.get(PODS, n, namespace=ns) for n in names]
            return pods if all(p["spec"].get("nodeName") for p in pods) else None

        pods = await eventually(bound, 180, "every pod bound", interval=0.5)
        claims = [await kube.get(RESOURCE_CLAIMS, claim_names(p)[0], namespace=ns) for p in pods]
        return (await writes(kube))[FINALIZER_PATCH] - before[FINALIZER_PATCH], claims
    finally:
        await kube.delete_collection(PODS, namespace=ns)
        await cluster.remove()


@pytest.mark.timeout(600)
async def test_placing_pods_writes_no_finalizer_patch_for_generated_claims(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
    run_service: Callable[..., Awaitable[Any]],
) -> None:
    """Before: the allocator PATCHed the finalizer onto every generated claim, one write per pod."""
    patches, claims = await _place(kube, await make_namespace("cwf"), run_service, [])
    for claim in claims:
        assert claim["status"].get("allocation") and claim["status"].get("reservedFor"), claim["status"]
        assert claim["metadata"]["finalizers"] == [DELETE_PROTECTION_FINALIZER]
    assert patches == 0


@pytest.mark.timeout(600)
async def test_with_the_setting_off_the_allocator_adds_the_finalizer_itself(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
    run_service: Callable[..., Awaitable[Any]],
) -> None:
    patches, claims = await _place(kube, await make_namespace("cwf"), run_service,
                                   ["--no-create-with-finalizer"])
    for claim in claims:
        assert claim["status"].get("allocation") and claim["status"].get("reservedFor"), claim["status"]
        assert claim["metadata"]["finalizers"] == [DELETE_PROTECTION_FINALIZER]
    assert patches >= PODS_PLACED  # one each (a lost compare-and-swap would add a retry)
