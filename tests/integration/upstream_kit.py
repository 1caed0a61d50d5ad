"""The demo workload (``deploy/demo`` and its README *Try it* extras, ``deploy/demo/extras``: the claim
that fits nowhere and the pod asking for GPUs through ``resources.limits``) made fit for a test namespace
and a flow's nodes, plus what the demo lacks of DRA (a ``matchAttribute`` constraint, an admin-access
claim, a DeviceTaintRule), and the checks of what the node side did for a pod: used by the tests that run
draflow's node side under upstream's kube-scheduler and kube-controller-manager.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from draflow_runtime.dra import claim_names, claim_results
from draflow_runtime.kube import PODS, RESOURCE_CLAIMS, KubeClient
from draflow_testenv import klog
from draflow_testenv.fleetflow import DRIVER, ServiceFlow
from draflow_testenv.flow import apply_demo, demo_extras, demo_objects

CDI_ANNOTATION = "draflow.dev/cdi-devices"
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
DEMO_EXTENDED_RESOURCE = "gpu.draflow.example/gpu"
UNFIT = "too-big"  # the pod of the demo's extras that fits nowhere
# Pods added to the demo: two partitions of one GPU (matchAttribute), a monitoring pod with admin access.
PAIRED, ADMIN = "paired", "monitor"


def _rename_class(name: str, prefix: str) -> str:
    return f"{prefix}-{name}"


def namespaced_demo(ns: str, prefix: str, nodes: Sequence[str], *, scheduler: str | None = None,
                    ) -> list[dict[str, Any]]:
    """``deploy/demo`` and its extras in namespace ``ns``: DeviceClasses renamed ``<prefix>-<name>``
    (their extended resource ``<prefix>.<name>``, so nothing clashes with another test's demo), pods kept
    to ``nodes`` by node affinity and scheduled by ``scheduler`` (None: the default scheduler), plus
    :func:`extra_objects`. The demo's Namespace and ServiceAccount are left out (the test has its own)."""
    classes = {o["metadata"]["name"] for o in demo_objects() if o["kind"] == "DeviceClass"}
    extended = f"{prefix}.{DEMO_EXTENDED_RESOURCE}"
    out = []
    for obj in [*demo_objects(), *demo_extras(), *extra_objects()]:
        obj = copy.deepcopy(obj)
        kind = obj["kind"]
        if kind in ("Namespace", "ServiceAccount"):
            continue
        if kind == "DeviceClass":
            obj["metadata"]["name"] = _rename_class(obj["metadata"]["name"], prefix)
            if obj["spec"].get("extendedResourceName"):
                obj["spec"]["extendedResourceName"] = extended
        else:
            obj["metadata"]["namespace"] = ns
        for request in _requests(obj):
            for sub in [request.get("exactly") or {}, *(request.get("firstAvailable") or [])]:
                if sub.get("deviceClassName") in classes:
                    sub["deviceClassName"] = _rename_class(sub["deviceClassName"], prefix)
        if kind == "Pod":
            spec = obj["spec"]
            spec.pop("schedulerName", None)
            if scheduler:
                spec["schedulerName"] = scheduler
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": list(nodes)}]}]}}}
            for container in spec["containers"]:
                limits = (container.get("resources") or {}).get("limits") or {}
                if DEMO_EXTENDED_RESOURCE in limits:
                    limits[extended] = limits.pop(DEMO_EXTENDED_RESOURCE)
        out.append(obj)
    return out


def _requests(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    if obj["kind"] == "ResourceClaimTemplate":
        return list(obj["spec"]["spec"]["devices"]["requests"])
    if obj["kind"] == "ResourceClaim":
        return list(obj["spec"]["devices"]["requests"])
    return []


def _pod(name: str, claim_ref: Mapping[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "draflow-demo"},
            "spec": {"automountServiceAccountToken": False,
                     "resourceClaims": [{"name": "dev", **claim_ref}],
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"claims": [{"name": "dev"}]}}]}}


def extra_objects() -> list[dict[str, Any]]:
    """What the demo does not show, in the demo's namespace and classes: ``paired`` (two partitions with
    the same ``parentUUID``: a matchAttribute constraint), ``monitor`` (admin access to a whole GPU; its
    namespace needs the :data:`ADMIN_ACCESS_LABEL`), ``versioned`` (CEL on a version and an int attribute)
    and ``mixed`` (a whole GPU and a partition in one claim, a matchAttribute across both requests: never
    the same GPU, whose partitions share its counters)."""
    paired = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
              "metadata": {"name": "two-partitions-one-gpu", "namespace": "draflow-demo"},
              "spec": {"spec": {"devices": {
                  "requests": [{"name": "parts", "exactly": {
                      "deviceClassName": "gpu-partition.draflow.example", "count": 2}}],
                  "constraints": [{"requests": ["parts"], "matchAttribute": f"{DRIVER}/parentUUID"}]}}}}
    admin = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "monitor-gpu", "namespace": "draflow-demo"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": "gpu.draflow.example", "adminAccess": True}}]}}}
    versioned = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                 "metadata": {"name": "driver-at-least-1", "namespace": "draflow-demo"},
                 "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                     "deviceClassName": "gpu.draflow.example", "selectors": [{"cel": {"expression":
                         f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("0.9.0")) && '
                         f'device.attributes["{DRIVER}"].index >= 0'}}]}}]}}}}
    mixed = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
             "metadata": {"name": "gpu-and-partition", "namespace": "draflow-demo"},
             "spec": {"spec": {"devices": {
                 "requests": [
                     {"name": "whole", "exactly": {"deviceClassName": "gpu.draflow.example"}},
                     {"name": "part", "exactly": {"deviceClassName": "gpu-partition.draflow.example"}}],
                 "constraints": [{"matchAttribute": f"{DRIVER}/model"}]}}}}
    return [paired, admin, versioned, mixed,
            _pod(PAIRED, {"resourceClaimTemplateName": "two-partitions-one-gpu"}),
            _pod(ADMIN, {"resourceClaimName": "monitor-gpu"}),
            _pod("versioned", {"resourceClaimTemplateName": "driver-at-least-1"}),
            _pod("mixed", {"resourceClaimTemplateName": "gpu-and-partition"})]


def expected_running(objects: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objects
                  if o["kind"] == "Pod" and o["metadata"]["name"] != UNFIT)


def cdi_spec(cdi_root: Path, claim_uid: str) -> dict[str, Any] | None:
    """The reference driver's CDI spec of a claim (``<vendor>-<class>_<uid>.json``), None when absent."""
    found = sorted(cdi_root.glob(f"*_{claim_uid}.json"))
    return json.loads(found[0].read_text()) if found else None


def prepared_problems(pod: Mapping[str, Any], claims: Mapping[str, Mapping[str, Any]], cdi_root: Path,
                      ) -> list[str]:
    """What is wrong with what the node side did for a Running ``pod`` (empty: nothing): each of its
    claims (``claims`` by name) allocated on the pod's node and reserved for it, a CDI spec per claim
    naming exactly the allocated devices, and the pod's CDI annotation listing exactly those IDs."""
    problems: list[str] = []
    name, node = pod["metadata"]["name"], pod["spec"].get("nodeName")
    wanted_ids: set[str] = set()
    for claim_name in claim_names(pod, extended=True):
        claim = claims.get(claim_name)
        if claim is None:
            problems.append(f"{name}: claim {claim_name} missing")
            continue
        results = claim_results(claim)
        uid = claim["metadata"]["uid"]
        reserved = {r.get("uid") for r in (claim.get("status") or {}).get("reservedFor") or ()}
        if pod["metadata"]["uid"] not in reserved:
            problems.append(f"{name}: not in reservedFor of {claim_name}")
        if not results or any(r["pool"] != node or r["driver"] != DRIVER for r in results):
            problems.append(f"{name}: {claim_name} allocated {results} on node {node}")
        spec = cdi_spec(cdi_root, uid)
        if spec is None:
            problems.append(f"{name}: no CDI spec for {claim_name} ({uid})")
            continue
        names = {d["name"] for d in spec["devices"]}
        if names != {f"{uid}-{r['device']}" for r in results}:
            problems.append(f"{name}: CDI spec of {claim_name} has {sorted(names)}, allocated {results}")
        wanted_ids |= {f"{spec['kind']}={n}" for n in names}
    seen = json.loads((pod["metadata"].get("annotations") or {}).get(CDI_ANNOTATION) or "{}")
    if set(seen.get("main") or ()) != wanted_ids:
        problems.append(f"{name}: container sees {seen}, the claims' CDI IDs are {sorted(wanted_ids)}")
    return problems


def other_node_lookup(line: str, published: set[tuple[str, str, str]]) -> bool:
    """kube-scheduler v1.37.1 with DRANodeAllocatableResources logs ``Failed to get device from manager``
    (nodeallocatabledynamicresources.go) whenever it filters a node for a pod whose claim is already
    allocated on another node: it looks the allocated device up among the filtered node's slices only.
    Such a line says nothing against the slices when the (driver, pool, device) it names is ``published``."""
    rec = klog.parse(line)
    return rec is not None and rec.message == "Failed to get device from manager" and (
        rec.values.get("driver", ""), rec.values.get("pool", ""), rec.values.get("device", "")) in published


def _gpu_of(device: str) -> str:
    """``gpu-3-part-1`` -> ``gpu-3``: the GPU a partition belongs to (a whole GPU is its own)."""
    return device.partition("-part-")[0]


def allocation_shape(pods: Mapping[str, Mapping[str, Any]], claims: Mapping[str, Mapping[str, Any]],
                     ) -> dict[str, list[tuple[Any, ...]]]:
    """Per pod, what its claims got, free of the choices two allocators may make differently (which node,
    which GPU): per claim its pod claim name (the extended-resource claim by container and resource, through
    ``requestMappings``), devices per request, whole GPUs or partitions, admin access, and whether the
    devices share one GPU. A pod without a node maps to ``[("unscheduled",)]``."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    for name, pod in pods.items():
        if not pod["spec"].get("nodeName"):
            out[name] = [("unscheduled",)]
            continue
        status = pod.get("status") or {}
        mappings = (status.get("extendedResourceClaimStatus") or {}).get("requestMappings") or ()
        by_request = {m["requestName"]: f"{m['containerName']}/{_demo_resource(m['resourceName'])}"
                      for m in mappings}
        ext = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        shape = []
        for claim_name in claim_names(pod, extended=True):
            results = claim_results(claims[claim_name])
            label = "extended" if claim_name == ext else _pod_claim_name(pod, claim_name)
            counts: dict[str, int] = {}
            for r in results:
                request = by_request.get(r["request"], r["request"]) if claim_name == ext else r["request"]
                counts[request] = counts.get(request, 0) + 1
            shape.append((label, sorted(counts.items()),
                          sorted({"partition" if "-part-" in r["device"] else "whole" for r in results}),
                          sorted({bool(r.get("adminAccess")) for r in results}),
                          len({_gpu_of(r["device"]) for r in results}) == 1))
        out[name] = sorted(shape)
    return out


def _demo_resource(name: str) -> str:
    """``<prefix>.gpu.draflow.example/gpu`` (:func:`namespaced_demo`) -> the demo's own name."""
    return DEMO_EXTENDED_RESOURCE if name.endswith("." + DEMO_EXTENDED_RESOURCE) else name


def _pod_claim_name(pod: Mapping[str, Any], claim_name: str) -> str:
    for entry in pod["spec"].get("resourceClaims") or ():
        if entry.get("resourceClaimName") == claim_name:
            return str(entry["name"])
    for entry in (pod.get("status") or {}).get("resourceClaimStatuses") or ():
        if entry.get("resourceClaimName") == claim_name:
            return str(entry["name"])
    return claim_name


def same_node_problems(pods: Mapping[str, Mapping[str, Any]], claims: Mapping[str, Mapping[str, Any]],
                       ) -> list[str]:
    """Node-selection semantics both allocators must keep: a pod runs on the node of every device it got,
    and the pods sharing a claim share that node."""
    problems = []
    by_claim: dict[str, set[str]] = {}
    for name, pod in pods.items():
        node = pod["spec"].get("nodeName")
        for claim_name in claim_names(pod, extended=True) if node else ():
            by_claim.setdefault(claim_name, set()).add(node)
            pools = {r["pool"] for r in claim_results(claims[claim_name])}
            if pools != {node}:
                problems.append(f"{name} on {node} got devices of {sorted(pools)} ({claim_name})")
    problems += [f"claim {c} used on nodes {sorted(n)}" for c, n in by_claim.items() if len(n) > 1]
    return problems


def items(listing: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(listing.get("items") or [])


async def claims_of(kube: KubeClient, ns: str) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in items(await kube.list(RESOURCE_CLAIMS, namespace=ns))}


async def demo_running(flow: ServiceFlow, objects: Sequence[Mapping[str, Any]],
                       within: float) -> dict[str, dict[str, Any]]:
    """Apply ``objects`` (:func:`namespaced_demo`) and wait until every pod but :data:`UNFIT` is Running;
    the flow namespace's pods by name."""
    await apply_demo(flow.kube, list(objects))  # type: ignore[arg-type]
    expected = expected_running(objects)

    async def all_running() -> dict[str, dict[str, Any]] | None:
        pods = {p["metadata"]["name"]: p for p in items(await flow.kube.list(PODS, namespace=flow.ns))}
        running = {n for n, p in pods.items() if (p.get("status") or {}).get("phase") == "Running"}
        return pods if set(expected) <= running else None

    pods: dict[str, dict[str, Any]] = await flow.until(all_running, f"every demo pod but {UNFIT} Running",
                                                       within=within)
    return pods
