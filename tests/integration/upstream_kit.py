"""The demo workload (``deploy/demo``) made fit for a test namespace and a flow's nodes, plus what the demo
lacks of DRA (a ``matchAttribute`` constraint, an admin-access claim, a DeviceTaintRule), and the checks of
what the node side did for a pod: used by the tests that run draflow's node side under upstream's
kube-scheduler and kube-controller-manager.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from draflow_runtime.dra import claim_names, claim_results
from draflow_testenv import klog
from draflow_testenv.fleetflow import DRIVER
from draflow_testenv.flow import demo_objects

CDI_ANNOTATION = "draflow.dev/cdi-devices"
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
DEMO_EXTENDED_RESOURCE = "gpu.draflow.example/gpu"
UNFIT = "too-big"  # the demo's pod that fits nowhere
# Pods added to the demo: two partitions of one GPU (matchAttribute), a monitoring pod with admin access.
PAIRED, ADMIN = "paired", "monitor"


def _rename_class(name: str, prefix: str) -> str:
    return f"{prefix}-{name}"


def namespaced_demo(ns: str, prefix: str, nodes: Sequence[str], *, scheduler: str | None = None,
                    ) -> list[dict[str, Any]]:
    """``deploy/demo`` in namespace ``ns``: DeviceClasses renamed ``<prefix>-<name>`` (their extended
    resource ``<prefix>.<name>``, so nothing clashes with another test's demo), pods kept to ``nodes`` by
    node affinity and scheduled by ``scheduler`` (None: the default scheduler), plus :func:`extra_objects`.
    The demo's Namespace and ServiceAccount are left out (the test has its own)."""
    classes = {o["metadata"]["name"] for o in demo_objects() if o["kind"] == "DeviceClass"}
    extended = f"{prefix}.{DEMO_EXTENDED_RESOURCE}"
    out = []
    for obj in [*demo_objects(), *extra_objects()]:
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
    the same ``parentUUID``: a matchAttribute constraint) and ``monitor`` (admin access to a whole GPU;
    its namespace needs the :data:`ADMIN_ACCESS_LABEL`)."""
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
    return [paired, admin, _pod(PAIRED, {"resourceClaimTemplateName": "two-partitions-one-gpu"}),
            _pod(ADMIN, {"resourceClaimName": "monitor-gpu"})]


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
