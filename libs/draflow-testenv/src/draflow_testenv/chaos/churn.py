"""The churn: pods coming and going at 70-90 % of the fleet's capacity while faults happen.

Pod kinds: ``whole`` (template claim, one whole GPU), ``opaque`` (the same with opaque driver config),
``first`` (firstAvailable: a large GPU, else any whole GPU), ``shared`` (two pods on one ResourceClaim the
churn makes: a user's claim), ``group`` (a PodGroup whose claim template is shared by its two pods:
DRAWorkloadResourceClaims), ``extended`` (``resources.limits`` of the whole-GPU DeviceClass's
``extendedResourceName``: the allocator makes the claim), ``part`` (template claim, one GPU partition).
Each takes one unit of its pool (a whole GPU or a partition). Whole-GPU kinds go to the first half of the
nodes and partitions to the other half (node affinity), so fragmentation never makes a pod unschedulable:
the churn only asks for what fits, and after settling every pod must run.
"""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from draflow_runtime.errors import AlreadyExists, NotFound
from draflow_runtime.kube import (
    DEVICE_CLASSES,
    POD_GROUPS,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    SERVICE_ACCOUNTS,
    KubeClient,
)
from draflow_testenv.binaries import repo_root

DRIVER = "gpu.draflow.example"
PARTITIONS_PER_GPU = 4  # the reference driver's partitionable profile
WHOLE_KINDS = ("whole", "opaque", "first", "shared", "group", "extended")
KINDS = (*WHOLE_KINDS, "part")
EXTENDED_RESOURCE = "gpu.draflow.example/gpu"  # deploy/demo/10-deviceclasses.yaml
IMPLICIT_EXTENDED_RESOURCE = "deviceclass.resource.kubernetes.io/gpu.draflow.example"
_OPAQUE = {"opaque": {"driver": DRIVER, "parameters": {
    "kind": "GpuConfig", "apiVersion": f"{DRIVER}/v1",
    "sharing": {"strategy": "TimeSlicing", "timeSlicing": {"interval": "Long"}}}}}


def _exactly(name: str, device_class: str) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class}}


def claim_specs() -> dict[str, dict[str, Any]]:
    """Template name -> claim spec of each kind with a template."""
    first = {"name": "gpu", "firstAvailable": [
        {"name": "large", "deviceClassName": "gpu-large.draflow.example"},
        {"name": "any", "deviceClassName": "gpu.draflow.example"}]}
    return {
        "whole": {"devices": {"requests": [_exactly("gpu", "gpu.draflow.example")]}},
        "opaque": {"devices": {"requests": [_exactly("gpu", "gpu.draflow.example")],
                               "config": [{"requests": ["gpu"], **_OPAQUE}]}},
        "first": {"devices": {"requests": [first]}},
        "part": {"devices": {"requests": [_exactly("gpu", "gpu-partition.draflow.example")]}},
    }


def device_classes() -> list[dict[str, Any]]:
    """The demo's DeviceClasses (deploy/demo/10-deviceclasses.yaml)."""
    demo = Path(repo_root()) / "deploy" / "demo" / "10-deviceclasses.yaml"
    return [obj for obj in yaml.safe_load_all(demo.read_text()) if obj]


def extended_names() -> frozenset[str]:
    """The extended resource names the demo's DeviceClasses back (``spec.extendedResourceName``)."""
    specs = (obj.get("spec") or {} for obj in device_classes())
    return frozenset(spec["extendedResourceName"] for spec in specs if spec.get("extendedResourceName"))


@dataclass
class Group:
    """Pods (and for ``shared`` the claim, for ``group`` the PodGroup) made together and deleted together."""

    kind: str
    pods: list[str]
    claim: str | None = None
    pod_group: str | None = None
    gang: bool = False


@dataclass
class Churn:
    kube: KubeClient
    namespace: str
    nodes: list[str]
    gpus: int
    rng: random.Random = field(default_factory=lambda: random.Random(16))
    groups: dict[str, Group] = field(default_factory=dict)
    created: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)  # groups made per kind
    replaced: int = 0  # PodGroup members replaced
    flashes: int = 0  # groups deleted right after they were made
    deleted: int = 0
    errors: int = 0
    _seq: int = 0

    @property
    def whole_nodes(self) -> list[str]:
        return self.nodes[: max(1, len(self.nodes) // 2)]

    @property
    def part_nodes(self) -> list[str]:
        return self.nodes[max(1, len(self.nodes) // 2):] or self.nodes

    def capacity(self, kind: str) -> int:
        if kind == "part":
            return len(self.part_nodes) * self.gpus * PARTITIONS_PER_GPU
        return len(self.whole_nodes) * self.gpus

    def used(self, kind: str) -> int:
        """Units in use by ``kind``'s pool: a partition, or a whole GPU per group."""
        partition = kind == "part"
        return sum(1 for g in self.groups.values() if (g.kind == "part") == partition)

    async def setup(self) -> None:
        for obj in device_classes():
            with contextlib.suppress(AlreadyExists):
                await self.kube.create(DEVICE_CLASSES, obj)
        with contextlib.suppress(AlreadyExists):
            await self.kube.create(SERVICE_ACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                                                      "metadata": {"name": "default"}},
                                   namespace=self.namespace)
        for name, spec in claim_specs().items():
            with contextlib.suppress(AlreadyExists):
                await self.kube.create(RESOURCE_CLAIM_TEMPLATES, {
                    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                    "metadata": {"name": name}, "spec": {"spec": spec}}, namespace=self.namespace)

    def _pod(self, name: str, kind: str, claim: str | None, group: str | None = None) -> dict[str, Any]:
        nodes = self.part_nodes if kind == "part" else self.whole_nodes
        template = "whole" if kind == "group" else kind
        source = {"resourceClaimName": claim} if claim else {"resourceClaimTemplateName": template}
        pod = self._pod_body(name, kind, nodes, source)
        if group:
            pod["spec"]["schedulingGroup"] = {"podGroupName": group}
        if kind == "extended":  # by the class's extendedResourceName, or its implicit name
            del pod["spec"]["resourceClaims"]
            resource = self.rng.choice((EXTENDED_RESOURCE, IMPLICIT_EXTENDED_RESOURCE))
            pod["spec"]["containers"][0]["resources"] = {"limits": {resource: "1"}}
        return pod

    @staticmethod
    def _pod_body(name: str, kind: str, nodes: list[str], source: dict[str, str]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "labels": {"draflow.dev/chaos": kind}},
                "spec": {"schedulerName": "draflow", "automountServiceAccountToken": False,
                         "terminationGracePeriodSeconds": 1,
                         "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                             "nodeSelectorTerms": [{"matchExpressions": [
                                 {"key": "kubernetes.io/hostname", "operator": "In", "values": nodes}]}]}}},
                         "resourceClaims": [{"name": "gpu", **source}],
                         "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                         "resources": {"claims": [{"name": "gpu"}]}}]}}

    async def add(self, kind: str) -> str:
        """Make a group of ``kind``; its base name."""
        self._seq += 1
        base = f"{kind}-{self._seq}"
        group = Group(kind, [f"{base}-a", f"{base}-b"] if kind in ("shared", "group") else [base])
        if kind == "group":
            group.pod_group = base
            group.gang = self.rng.random() < 0.5  # members placed together (GangScheduling) or each alone
            policy = {"gang": {"minCount": len(group.pods)}} if group.gang else {"basic": {}}
            await self.kube.create(POD_GROUPS, {
                "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": base},
                "spec": {"schedulingPolicy": policy,
                         "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "whole"}]}},
                namespace=self.namespace)
        if kind == "shared":
            group.claim = base
            await self.kube.create(RESOURCE_CLAIMS, {
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": base},
                "spec": claim_specs()["whole"]}, namespace=self.namespace)
        self.groups[base] = group  # counted from here: a half-made group still holds its unit
        self.by_kind[kind] += 1
        for pod in group.pods:
            await self.kube.create(PODS, self._pod(pod, kind, group.claim, group.pod_group),
                                   namespace=self.namespace)
            self.created += 1
        return base

    async def remove(self, base: str) -> None:
        """Delete the group's pods, then its claim or PodGroup; a PodGroup half of the time first (its
        protection finalizer keeps it until none of its pods is active)."""
        group = self.groups[base]
        if group.pod_group and self.rng.random() < 0.5:
            with contextlib.suppress(NotFound):
                await self.kube.delete(POD_GROUPS, group.pod_group, namespace=self.namespace)
        for pod in group.pods:
            with contextlib.suppress(NotFound):
                await self.kube.delete(PODS, pod, namespace=self.namespace)
                self.deleted += 1
        if group.claim:
            with contextlib.suppress(NotFound):
                await self.kube.delete(RESOURCE_CLAIMS, group.claim, namespace=self.namespace)
        if group.pod_group:
            with contextlib.suppress(NotFound):
                await self.kube.delete(POD_GROUPS, group.pod_group, namespace=self.namespace)
        del self.groups[base]

    async def replace_member(self) -> None:
        """A PodGroup (basic policy) that runs on loses a member and gets a new one: the group's claim stays
        reserved for the group, the new member must use it where it is allocated."""
        bases = [b for b, g in self.groups.items() if g.pod_group and not g.gang]
        if not bases:
            return
        group = self.groups[self.rng.choice(bases)]
        with contextlib.suppress(NotFound):
            await self.kube.delete(PODS, group.pods[0], namespace=self.namespace)
            self.deleted += 1
        group.pods.pop(0)
        self._seq += 1
        name = f"{group.pod_group}-m{self._seq}"
        group.pods.append(name)
        await self.kube.create(PODS, self._pod(name, "group", None, group.pod_group),
                               namespace=self.namespace)
        self.created += 1
        self.replaced += 1

    async def add_probe(self, name_ok: Callable[[str], bool] | None = None) -> str:
        """A partition pod outside the churn's groups (the runner's "serves again" probe; the churn leaves
        at least 10 % of the partitions free for it); its name, the first ``probe-<n>`` that ``name_ok``
        accepts (e.g. one in a given claim-controller shard)."""
        self._seq += 1
        while name_ok is not None and not name_ok(f"probe-{self._seq}"):
            self._seq += 1
        name = f"probe-{self._seq}"
        await self.kube.create(PODS, self._pod(name, "part", None), namespace=self.namespace)
        return name

    async def remove_probe(self, name: str) -> None:
        with contextlib.suppress(NotFound):
            await self.kube.delete(PODS, name, namespace=self.namespace)

    async def running(self, pod: str) -> bool:
        obj = await self.kube.get(PODS, pod, namespace=self.namespace)
        return (obj.get("status") or {}).get("phase") == "Running"

    async def step(self) -> None:
        """One tick: for each pool, delete a few groups and fill back to a random 70-90 %; now and then a
        PodGroup's member replaced, and a group made and deleted at once (its claims made for pods that
        are gone already must go too)."""
        for pool_kinds in (WHOLE_KINDS, ("part",)):
            cap = self.capacity(pool_kinds[0])
            target = int(cap * self.rng.uniform(0.7, 0.9))
            mine = [b for b, g in self.groups.items() if g.kind in pool_kinds]
            try:
                for base in self.rng.sample(mine, k=min(len(mine), max(1, min(cap // 10, 5)))):
                    await self.remove(base)
                while self.used(pool_kinds[0]) < target:
                    await self.add(self.rng.choice(pool_kinds))
                if "group" in pool_kinds and self.rng.random() < 0.3:
                    await self.replace_member()
                if "group" in pool_kinds and self.rng.random() < 0.3:  # gone before it is served
                    self.flashes += 1
                    await self.remove(await self.add(self.rng.choice(("group", "extended", "whole"))))
            except Exception:  # the API server may be down: a fault is running; next tick goes on
                self.errors += 1

    async def stop_and_fill(self) -> None:
        """Before settling: fill each pool to 80 % again (a removal during a fault may be half done)."""
        for kind in ("whole", "part"):
            target = int(self.capacity(kind) * 0.8)
            while self.used(kind) > target:
                base = next(b for b, g in self.groups.items() if (g.kind == "part") == (kind == "part"))
                await self.remove(base)
