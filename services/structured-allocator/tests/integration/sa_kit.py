"""Builders and helpers of the structured-allocator integration tests (imported via conftest).

There is no claim-controller or kubelet here: template claims are created the way the claim-controller
creates them (owner reference to the pod, ``pod.status.resourceClaimStatuses`` written by the test).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from draflow_runtime.errors import NotFound
from draflow_runtime.kube import (
    DEVICE_CLASSES,
    DEVICE_TAINT_RULES,
    EVENTS,
    NODES,
    POD_GROUPS,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    KubeClient,
)
from draflow_testenv.identity import ServiceIdentity
from draflow_testenv.wait import eventually, gone
from structured_allocator.binder import Hooks
from structured_allocator.explain_http import ExplanationStore
from structured_allocator.scheduler import Scheduler
from structured_allocator.settings import Settings

DEFAULT_ALLOCATABLE = {"pods": "110", "cpu": "64", "memory": "256Gi", "ephemeral-storage": "1Ti"}


def devices_of(claim: dict[str, Any]) -> list[str]:
    results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
    return [f"{r['driver']}/{r['pool']}/{r['device']}" for r in results]


def group_ref(group: dict[str, Any]) -> dict[str, str]:
    """The entry a PodGroup has in a claim's ``reservedFor``."""
    return {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": group["metadata"]["name"],
            "uid": group["metadata"]["uid"]}


@dataclass
class Kit:
    kube: KubeClient  # admin: the test's own set-up and checks
    namespace: str
    identity: ServiceIdentity  # the allocator's: admin, or exactly its RBAC (fixture service_identity)
    suffix: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    schedulers: list[tuple[Scheduler, asyncio.Task[None]]] = field(default_factory=list)
    cluster_objects: list[tuple[Any, str]] = field(default_factory=list)

    @property
    def scheduler_name(self) -> str:
        return f"draflow-test-{self.suffix}"

    @property
    def driver(self) -> str:
        return f"gpu-{self.suffix}.test.draflow.dev"

    @property
    def device_class(self) -> str:
        return f"gpu-{self.suffix}"

    # -- the allocator under test

    async def start(self, *, hooks: Hooks | None = None, bus: Any = None,
                    explanations: ExplanationStore | None = None, tracer_provider: Any = None,
                    **overrides: Any) -> Scheduler:
        settings = Settings(http_port=0, nats_url="", scheduler_names=self.scheduler_name, **overrides)
        sched = Scheduler(settings, self.identity.kube, namespace=self.namespace, hooks=hooks, bus=bus,
                          explanations=explanations, tracer_provider=tracer_provider)
        task = asyncio.create_task(sched.run(), name="allocator-under-test")
        self.schedulers.append((sched, task))
        synced = asyncio.create_task(sched.wait_synced())
        await asyncio.wait([synced, task], timeout=60, return_when=asyncio.FIRST_COMPLETED)
        synced.cancel()
        if task.done():
            task.result()
        assert sched.synced, "allocator not synced after 60 s"
        return sched

    def task_of(self, sched: Scheduler) -> asyncio.Task[None]:
        return next(t for s, t in self.schedulers if s is sched)

    async def stop(self, sched: Scheduler) -> None:
        for entry in list(self.schedulers):
            if entry[0] is sched:
                self.schedulers.remove(entry)
                entry[1].cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await entry[1]

    async def close(self) -> None:
        for sched, _ in list(self.schedulers):
            await self.stop(sched)
        for res, name in reversed(self.cluster_objects):
            with contextlib.suppress(NotFound):
                await self.kube.delete(res, name)

    # -- cluster-scoped objects (deleted after the test)

    async def node(self, name: str, *, ready: bool = True, labels: dict[str, str] | None = None,
                   taints: list[dict[str, Any]] | None = None,
                   allocatable: dict[str, str] | None = None) -> str:
        """A Ready (or not) Node with ``status.allocatable`` (default: 110 pods, 64 cpu, 256Gi memory,
        as a kubelet would report)."""
        name = f"{name}-{self.suffix}"
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                                "metadata": {"name": name, "labels": labels or {}}, "spec": {}}
        if taints:
            body["spec"]["taints"] = taints
        await self.kube.create(NODES, body)
        self.cluster_objects.append((NODES, name))
        resources = allocatable if allocatable is not None else DEFAULT_ALLOCATABLE
        status = {"status": {"capacity": resources, "allocatable": resources,
                             "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                             "reason": "Test", "message": "test node",
                                             "lastHeartbeatTime": _now(), "lastTransitionTime": _now()}]}}
        await self.kube.patch(NODES, name, status, subresource="status")
        # The TaintNodesByCondition admission adds node.kubernetes.io/not-ready at creation and no node
        # lifecycle controller runs here to lift it: set the taints the test wants.
        await self.kube.patch(NODES, name, {"spec": {"taints": taints or None}})
        return name

    async def slice(self, node: str, devices: int, *, attrs: dict[str, Any] | None = None,
                    annotations: dict[str, str] | None = None, **device_fields: Any) -> str:
        """``device_fields`` go into every device (e.g. ``bindingConditions``)."""
        name = f"{node}-{self.driver}"
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": name, "annotations": annotations or {}},
                "spec": {"driver": self.driver, "nodeName": node,
                         "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": f"gpu-{i}", "attributes": {
                             "index": {"int": i}, **(attrs or {})}, **device_fields}
                             for i in range(devices)]}}
        await self.kube.create(RESOURCE_SLICES, body)
        self.cluster_objects.append((RESOURCE_SLICES, name))
        return name

    async def device_class_(self, name: str | None = None, *expressions: str,
                            extended_resource: str | None = None) -> str:
        """A DeviceClass of this driver's devices (``name`` or :attr:`device_class`), with more CEL
        ``expressions`` and an ``extendedResourceName`` when given."""
        name = name or self.device_class
        selectors = [{"cel": {"expression": f'device.driver == "{self.driver}"'}}]
        selectors += [{"cel": {"expression": e}} for e in expressions]
        spec: dict[str, Any] = {"selectors": selectors}
        if extended_resource:
            spec["extendedResourceName"] = extended_resource
        await self.kube.create(DEVICE_CLASSES, {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                                "metadata": {"name": name}, "spec": spec})
        self.cluster_objects.append((DEVICE_CLASSES, name))
        return name

    async def extended_class(self) -> str:
        """The device class :attr:`device_class` (this driver's devices) with an ``extendedResourceName``;
        returns that name."""
        resource = f"{self.suffix}.draflow.example/gpu"
        await self.device_class_(extended_resource=resource)
        return resource

    async def taint_rule(self, name: str, taint: dict[str, Any], **selector: str) -> str:
        """A DeviceTaintRule (resource.k8s.io/v1) tainting the devices ``selector`` picks."""
        name = f"{name}-{self.suffix}"
        await self.kube.create(DEVICE_TAINT_RULES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": selector, "taint": taint}})
        self.cluster_objects.append((DEVICE_TAINT_RULES, name))
        return name

    # -- namespaced objects

    def claim_spec(self, *, device_class: str | None = None, count: int = 1,
                   selectors: tuple[str, ...] = (),
                   tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        exactly: dict[str, Any] = {"deviceClassName": device_class or self.device_class, "count": count}
        if selectors:
            exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
        if tolerations:
            exactly["tolerations"] = tolerations
        return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}

    async def template(self, name: str, **kw: Any) -> str:
        await self.kube.create(RESOURCE_CLAIM_TEMPLATES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": self.claim_spec(**kw)}}, self.namespace)
        return name

    async def claim(self, name: str, **kw: Any) -> dict[str, Any]:
        return await self.kube.create(RESOURCE_CLAIMS, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": self.claim_spec(**kw)}, self.namespace)

    async def pod_group(self, name: str, policy: dict[str, Any],
                        claims: list[dict[str, str]] | None = None) -> dict[str, Any]:
        """A PodGroup (scheduling.k8s.io/v1beta1); ``claims``: its ``resourceClaims``."""
        spec: dict[str, Any] = {"schedulingPolicy": policy}
        if claims:
            spec["resourceClaims"] = claims
        return await self.kube.create(POD_GROUPS, {
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": spec}, self.namespace)

    async def group_sharing_a_claim(self, devices: int) -> tuple[str, dict[str, str]]:
        """Node ``n`` with ``devices`` devices, the device class, the claim ``shared`` and the PodGroup
        ``workers`` (basic policy) that lists it as ``gpu``: -> (the node, the group's ``reservedFor``
        entry). Its members: :meth:`worker`."""
        node = await self.node("n")
        await self.slice(node, devices)
        await self.device_class_()
        await self.claim("shared")
        group = await self.pod_group("workers", {"basic": {}},
                                     [{"name": "gpu", "resourceClaimName": "shared"}])
        return node, group_ref(group)

    async def worker(self, name: str) -> dict[str, Any]:
        """A pod of the PodGroup ``workers`` using its claim ``shared`` (:meth:`group_sharing_a_claim`)."""
        return await self.pod(name, {"gpu": {"resourceClaimName": "shared"}},
                              schedulingGroup={"podGroupName": "workers"})

    async def pod(self, name: str, claims: dict[str, dict[str, str]], *,
                  requests: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
        """A pod for this allocator; ``requests``: the container's resource requests."""
        resources: dict[str, Any] = {"claims": [{"name": c} for c in claims]}
        if requests:
            resources["requests"] = requests
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
            "schedulerName": self.scheduler_name,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                            "resources": resources}],
            "resourceClaims": [{"name": c, **ref} for c, ref in claims.items()], **spec}}
        return await self.kube.create(PODS, body, self.namespace)

    async def template_pod(self, name: str, template: str, *, node: str | None = None,
                           requests: dict[str, str] | None = None, spec: dict[str, Any] | None = None,
                           **kw: Any) -> dict[str, Any]:
        """A pod with one template claim ``gpu``, plus what the claim-controller would do: the claim
        (owned by the pod, spec from the template) and ``pod.status.resourceClaimStatuses``.
        ``spec``: more pod spec fields."""
        extra = {"nodeName": node} if node else {}
        pod = await self.pod(name, {"gpu": {"resourceClaimTemplateName": template}}, requests=requests,
                             **extra, **(spec or {}))
        tmpl = await self.kube.get(RESOURCE_CLAIM_TEMPLATES, template, self.namespace)
        claim = await self.kube.create(RESOURCE_CLAIMS, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"generateName": f"{name}-gpu-", "annotations": {
                "resource.kubernetes.io/pod-claim-name": "gpu", **kw.get("annotations", {})},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name,
                                     "uid": pod["metadata"]["uid"], "controller": True,
                                     "blockOwnerDeletion": True}]},
            "spec": tmpl["spec"]["spec"]}, self.namespace)
        await self.kube.patch(PODS, name, {"status": {"resourceClaimStatuses": [
            {"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}]}}, self.namespace,
            subresource="status")
        return pod

    async def get(self, res: Any, name: str) -> dict[str, Any] | None:
        try:
            return await self.kube.get(res, name, self.namespace)
        except NotFound:
            return None

    async def wait_gone(self, res: Any, name: str, what: str = "",
                        timeout: float = 30.0) -> None:  # noqa: ASYNC109
        """Until the object ``name`` of ``res`` in the test's namespace is gone from the API server."""
        await eventually(gone(self.kube, res, name, self.namespace), timeout, what or f"{name} gone")

    async def claim_of(self, pod_name: str) -> dict[str, Any]:
        pod = await self.kube.get(PODS, pod_name, self.namespace)
        statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
        name = statuses[0]["resourceClaimName"] if statuses else pod["spec"]["resourceClaims"][0][
            "resourceClaimName"]
        return await self.kube.get(RESOURCE_CLAIMS, name, self.namespace)

    async def wait_bound(self, pod_name: str, timeout: float = 30.0) -> str:  # noqa: ASYNC109
        async def check() -> str | None:
            pod = await self.get(PODS, pod_name)
            return (pod or {}).get("spec", {}).get("nodeName")
        return await eventually(check, timeout, what=f"pod {pod_name} bound")

    async def wait_condition(self, pod_name: str, contains: str = "",
                             timeout: float = 30.0) -> str:  # noqa: ASYNC109
        async def check() -> str | None:
            pod = await self.get(PODS, pod_name) or {}
            for cond in (pod.get("status") or {}).get("conditions") or []:
                if cond["type"] == "PodScheduled" and cond["status"] == "False" and \
                        contains in cond.get("message", ""):
                    return str(cond["message"])
            return None
        return await eventually(check, timeout, what=f"PodScheduled=False on {pod_name} with {contains!r}")

    async def events(self, pod_name: str) -> list[dict[str, Any]]:
        events = await self.kube.list(EVENTS, self.namespace,
                                      field_selector=f"involvedObject.name={pod_name}")
        return list(events["items"])


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
