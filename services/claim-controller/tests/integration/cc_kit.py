"""Builders and waiting helpers for the claim-controller integration tests (imported via conftest)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from claim_controller.context import Hooks
from claim_controller.controller import Controller
from claim_controller.settings import Settings
from draflow_runtime.dra import DELETE_PROTECTION_FINALIZER
from draflow_runtime.errors import NotFound
from draflow_runtime.kube import EVENTS, PODS, RESOURCE_CLAIMS, KubeClient
from draflow_testenv.identity import ServiceIdentity
from draflow_testenv.wait import eventually

DRIVER = "gpu.claim-controller-test.draflow.dev"
DEVICE_CLASS = "claim-controller-test-gpu"


def template(name: str, *, labels: dict[str, str] | None = None,
             annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "metadata": {"labels": labels or {}, "annotations": annotations or {}},
            "spec": plain_claim("")["spec"],
        },
    }


def plain_claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DEVICE_CLASS}}]}},
    }


def pod(name: str, claims: dict[str, dict[str, str]], *, node: str | None = None) -> dict[str, Any]:
    """A pod whose ``claims`` map pod-claim name -> ``{"resourceClaimTemplateName": ...}`` or
    ``{"resourceClaimName": ...}``; every claim is used by the one container."""
    spec: dict[str, Any] = {
        "containers": [{
            "name": "main",
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"claims": [{"name": c} for c in claims]},
        }],
        "resourceClaims": [{"name": c, **ref} for c, ref in claims.items()],
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def node_selector(node: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}
    ]}]}


def allocation(node: str, device: str = "gpu-0") -> dict[str, Any]:
    """A minimal valid allocation result, as the allocator writes it."""
    return {
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node, "device": device}]},
        "nodeSelector": node_selector(node),
    }


@dataclass
class Kit:
    kube: KubeClient  # admin: the test's own set-up and checks
    namespace: str
    identity: ServiceIdentity  # the controller's: admin, or exactly its RBAC (fixture service_identity)
    controllers: list[tuple[Controller, asyncio.Task[None]]] = field(default_factory=list)

    # -- the controller under test

    async def start_controller(self, *, hooks: Hooks | None = None, bus: Any = None,
                               requester: Any = None, tracer_provider: Any = None,
                               **overrides: Any) -> Controller:
        settings = Settings(http_port=0, nats_url="", workers=4, allocator_timeout=1.0,
                            allocation_recheck=2.0, **overrides)
        controller = Controller(settings, self.identity.kube, bus=bus, requester=requester,
                                namespace=self.namespace, hooks=hooks, tracer_provider=tracer_provider)
        task = asyncio.create_task(controller.run(), name="claim-controller-under-test")
        self.controllers.append((controller, task))
        await eventually(lambda: controller.synced or task.done(), what="controller synced")
        if task.done():
            task.result()
        return controller

    async def stop_controller(self, controller: Controller) -> None:
        for entry in list(self.controllers):
            if entry[0] is controller:
                self.controllers.remove(entry)
                entry[1].cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await entry[1]

    async def stop_all(self) -> None:
        for controller, _ in list(self.controllers):
            await self.stop_controller(controller)

    # -- objects

    async def create(self, res: Any, body: dict[str, Any]) -> dict[str, Any]:
        return await self.kube.create(res, body, self.namespace)

    async def get(self, res: Any, name: str) -> dict[str, Any] | None:
        try:
            return await self.kube.get(res, name, self.namespace)
        except NotFound:
            return None

    async def claims(self) -> list[dict[str, Any]]:
        return list((await self.kube.list(RESOURCE_CLAIMS, self.namespace))["items"])

    async def pod_events(self, pod_name: str) -> list[dict[str, Any]]:
        events = await self.kube.list(EVENTS, self.namespace,
                                      field_selector=f"involvedObject.name={pod_name}")
        return list(events["items"])

    async def wait_event(
        self, pod_name: str, reason: str, timeout: float = 30.0  # noqa: ASYNC109
    ) -> dict[str, Any]:
        async def check() -> dict[str, Any] | None:
            return next((e for e in await self.pod_events(pod_name) if e["reason"] == reason), None)
        return await eventually(check, timeout, what=f"Event {reason} on pod {pod_name}")

    async def set_phase(self, pod_name: str, phase: str) -> None:
        await self.kube.patch(PODS, pod_name, {"status": {"phase": phase}}, self.namespace,
                              subresource="status")

    async def allocate(self, claim_name: str, node: str, *consumers: dict[str, Any],
                       device: str = "gpu-0", device_status: bool = False) -> dict[str, Any]:
        """What the allocator does: finalizer, then allocation + reservedFor in one status write."""
        finalizer = [{"op": "add", "path": "/metadata/finalizers", "value": [DELETE_PROTECTION_FINALIZER]}]
        await self.kube.patch(RESOURCE_CLAIMS, claim_name, finalizer, self.namespace, patch_type="json")
        status: dict[str, Any] = {"allocation": allocation(node, device)}
        if device_status:  # what the driver reports (status.devices)
            status["devices"] = [{"driver": DRIVER, "pool": node, "device": device, "conditions": [{
                "type": "Ready", "status": "True", "reason": "Prepared", "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }]}]
        if consumers:
            status["reservedFor"] = [consumer(p) for p in consumers]
        return await self.kube.patch(RESOURCE_CLAIMS, claim_name, {"status": status}, self.namespace,
                                     subresource="status")


def consumer(p: dict[str, Any]) -> dict[str, str]:
    """The reservedFor entry of pod ``p``."""
    return {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}


async def http_get(url: str) -> tuple[int, str]:
    """Status and body of a GET (0, "" when nothing answers)."""
    try:
        async with aiohttp.ClientSession() as session, session.get(url) as resp:
            return resp.status, await resp.text()
    except aiohttp.ClientError:
        return 0, ""


async def metric(port: int, line_prefix: str) -> float | None:
    """The value of the sample line starting with ``line_prefix`` on a service's /metrics."""
    _, text = await http_get(f"http://127.0.0.1:{port}/metrics")
    for line in text.splitlines():
        if line.startswith(line_prefix + " "):
            return float(line.split()[-1])
    return None
