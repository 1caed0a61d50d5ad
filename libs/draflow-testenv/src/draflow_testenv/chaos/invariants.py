"""The chaos run's invariants: pure functions over listed objects and the nodes' files.

Each check takes a :class:`Snapshot` and returns one message per violation (empty: holds). Those that
:mod:`.checks` lists as ``CONTINUOUS`` hold at every moment; the ``SETTLED`` ones once the churn stopped
and the stack had time to catch up (a pod being scheduled, a claim being deallocated are normal in flight).
The invariants of the newer claim kinds (PodGroup, extended resource, trace roots) are in :mod:`.claimkinds`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from draflow_runtime.dra import (
    allocation_node,
    claim_names,
    claim_results,
    is_reserved_for_pod_or_group,
    pod_is_finished,
)

Obj = Mapping[str, Any]

_SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
           "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
           "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


def quantity(text: object) -> Decimal:
    """A Kubernetes quantity (``"20Gi"``, ``"500m"``, ``"1e3"``, ``4``) as a number."""
    s = str(text).strip()
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if s.endswith(suffix) and s[: -len(suffix)]:
            return Decimal(s[: -len(suffix)]) * Decimal(str(_SUFFIX[suffix]))
    return Decimal(s)


@dataclass
class NodeFiles:
    """Claim UIDs a node's driver has files for: a CDI spec file, an entry in its checkpoint."""

    cdi: set[str] = field(default_factory=set)
    checkpoint: set[str] = field(default_factory=set)


@dataclass
class Snapshot:
    """What the API server and the nodes' directories said at one moment (pods listed first)."""

    pods: list[Obj]
    claims: list[Obj]
    slices: list[Obj]
    nodes: dict[str, NodeFiles] = field(default_factory=dict)
    pod_groups: list[Obj] = field(default_factory=list)
    #: extended resource names the DeviceClasses back (``spec.extendedResourceName``)
    extended_names: frozenset[str] = frozenset()


def _key(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def _live(pod: Obj) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and not pod_is_finished(pod)


def _devices(slices: list[Obj]) -> dict[tuple[str, str, str], Obj]:
    out: dict[tuple[str, str, str], Obj] = {}
    for s in slices:
        spec = s["spec"]
        for dev in spec.get("devices") or ():
            out[(spec["driver"], spec["pool"]["name"], dev["name"])] = dev
    return out


def double_allocation(snap: Snapshot) -> list[str]:
    """No device in two claims unless the device allows multiple allocations."""
    devices = _devices(snap.slices)
    holders: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for claim in snap.claims:
        for res in claim_results(claim):
            holders[(res["driver"], res["pool"], res["device"])].append(_key(claim))
    out = []
    for dev, claims in sorted(holders.items()):
        if len(set(claims)) > 1 and not (devices.get(dev) or {}).get("allowMultipleAllocations"):
            out.append(f"device {'/'.join(dev)} allocated to {sorted(set(claims))}")
    return out


def counters_over_capacity(snap: Snapshot) -> list[str]:
    """The counters the allocated devices consume stay within their pool's shared counter sets."""
    capacity: dict[tuple[str, str, str, str], Decimal] = {}
    for s in snap.slices:
        spec = s["spec"]
        for cs in spec.get("sharedCounters") or ():
            for name, counter in (cs.get("counters") or {}).items():
                key = (spec["driver"], spec["pool"]["name"], cs["name"], name)
                capacity[key] = quantity(counter["value"])
    devices = _devices(snap.slices)
    used: dict[tuple[str, str, str, str], Decimal] = defaultdict(Decimal)
    seen: set[tuple[str, str, str]] = set()
    for claim in snap.claims:
        for res in claim_results(claim):
            dev = (res["driver"], res["pool"], res["device"])
            if dev in seen or dev not in devices:
                continue
            seen.add(dev)
            for consumed in devices[dev].get("consumesCounters") or ():
                for name, counter in (consumed.get("counters") or {}).items():
                    used[(*dev[:2], consumed["counterSet"], name)] += quantity(counter["value"])
    return [f"counter {'/'.join(k)} uses {v} of {capacity.get(k, Decimal(0))}"
            for k, v in sorted(used.items()) if v > capacity.get(k, Decimal(0))]


def bound_pods_claims(snap: Snapshot) -> list[str]:
    """A pod bound to a node has each claim (its extended-resource claim too) allocated for that node and
    reserved for it (or for its PodGroup)."""
    claims = {_key(c): c for c in snap.claims}
    out = []
    for pod in snap.pods:
        node = pod["spec"].get("nodeName")
        if not node or not _live(pod):
            continue
        ns = pod["metadata"]["namespace"]
        wanted = len(pod["spec"].get("resourceClaims") or ())
        if len(claim_names(pod)) < wanted:
            out.append(f"pod {_key(pod)} on {node}: {wanted - len(claim_names(pod))} claim(s) without a name")
        for name in claim_names(pod, extended=True):
            claim = claims.get(f"{ns}/{name}")
            status = (claim or {}).get("status") or {}
            if claim is None or not status.get("allocation"):
                out.append(f"pod {_key(pod)} on {node}: claim {name} not allocated")
            elif allocation_node(claim) not in ("", node):
                out.append(f"pod {_key(pod)} on {node}: claim {name} allocated for {allocation_node(claim)}")
            elif not is_reserved_for_pod_or_group(claim, pod, True):
                out.append(f"pod {_key(pod)} on {node}: claim {name} not reserved for it")
    return out


def allocated_without_consumer(snap: Snapshot) -> list[str]:
    """(settled) Every allocated claim is reserved for a pod that exists and has not finished, or for a
    PodGroup that exists."""
    live = {p["metadata"]["uid"] for p in snap.pods if not pod_is_finished(p)}
    live |= {g["metadata"]["uid"] for g in snap.pod_groups}
    out = []
    for claim in snap.claims:
        status = claim.get("status") or {}
        if not status.get("allocation"):
            continue
        if not any(r.get("uid") in live for r in status.get("reservedFor") or ()):
            out.append(f"claim {_key(claim)} allocated without a live consumer")
    return out


def pods_not_running(snap: Snapshot) -> list[str]:
    """(settled) Every pod that is not being deleted runs (the churn only asks for what fits)."""
    return [f"pod {_key(p)} is {(p.get('status') or {}).get('phase', 'Pending')} "
            f"on {p['spec'].get('nodeName') or '-'}"
            for p in snap.pods
            if not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") != "Running"]


def node_files(snap: Snapshot) -> list[str]:
    """(settled) Per node, the CDI spec files and the checkpoint name exactly the claims of its live pods."""
    claims = {_key(c): c for c in snap.claims}
    expected: dict[str, set[str]] = defaultdict(set)
    for pod in snap.pods:
        node = pod["spec"].get("nodeName")
        if node and _live(pod):
            for name in claim_names(pod, extended=True):
                claim = claims.get(f"{pod['metadata']['namespace']}/{name}")
                if claim is not None:
                    expected[node].add(claim["metadata"]["uid"])
    out = []
    for node, files in sorted(snap.nodes.items()):
        for what, have in (("CDI files", files.cdi), ("checkpoint", files.checkpoint)):
            if missing := expected[node] - have:
                out.append(f"node {node}: {what} miss claims {sorted(missing)}")
            if extra := have - expected[node]:
                out.append(f"node {node}: {what} hold claims of no live pod {sorted(extra)}")
    return out

