"""Invariants of the newer claim kinds: PodGroup claims (DRAWorkloadResourceClaims), extended-resource
claims (DRAExtendedResource), the trace root of every claim, and claims left behind by their owner.

Pure functions over a :class:`~draflow_testenv.chaos.invariants.Snapshot` (one message per violation),
plus :class:`History`, the invariants that compare a claim with what earlier snapshots showed of it (one
object is read atomically, so a change seen is a change made: no second snapshot needed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from draflow_runtime.dra import (
    SCHEDULING_GROUP,
    claim_results,
    extended_claim_name,
    is_controlled_by,
    pod_group_name,
)

from .invariants import Snapshot, _key, _live

Obj = Mapping[str, Any]

TRACEPARENT = "draflow.dev/traceparent"
EXTENDED_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"


def _controller(obj: Obj) -> Mapping[str, Any] | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref  # type: ignore[no-any-return]
    return None


def _group_owner(claim: Obj) -> Mapping[str, Any] | None:
    ref = _controller(claim)
    version = str((ref or {}).get("apiVersion", ""))
    if ref and ref.get("kind") == "PodGroup" and version.startswith(SCHEDULING_GROUP + "/"):
        return ref
    return None


def _annotations(obj: Obj) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _group_entry(ref: Mapping[str, Any]) -> bool:
    return ref.get("apiGroup") == SCHEDULING_GROUP and ref.get("resource") == "podgroups"


def pod_group_claims(snap: Snapshot) -> list[str]:
    """A PodGroup's claim is made once per group claim, reserved only for its group (one entry, never its
    pods), and every bound member uses the group's claim, not one of its own."""
    out = []
    made: Counter[tuple[str, str, str]] = Counter()
    for claim in snap.claims:
        owner = _group_owner(claim)
        if owner is None:
            continue
        made[(claim["metadata"]["namespace"], str(owner.get("uid")),
              _annotations(claim).get(POD_CLAIM_ANNOTATION, ""))] += 1
        reserved = (claim.get("status") or {}).get("reservedFor") or ()
        strangers = [r.get("name") for r in reserved
                     if not (_group_entry(r) and r.get("name") == owner.get("name")
                             and r.get("uid") == owner.get("uid"))]
        if strangers:
            out.append(f"claim {_key(claim)} of PodGroup {owner.get('name')} reserved for "
                       f"{sorted(strangers)}")
    for (ns, uid, name), count in sorted(made.items()):
        if count > 1:
            out.append(f"PodGroup {ns} uid {uid}: {count} claims for its claim {name!r}")
    groups = {_key(g): g for g in snap.pod_groups}
    claims = {_key(c): c for c in snap.claims}
    for pod in snap.pods:
        node, group_name = pod["spec"].get("nodeName"), pod_group_name(pod)
        group = groups.get(f"{pod['metadata']['namespace']}/{group_name}") if group_name else None
        if not node or group is None or not _live(pod):
            continue
        shared = {e["name"] for e in (group.get("spec") or {}).get("resourceClaims") or ()}
        recorded = {e["name"]: e.get("resourceClaimName")
                    for e in (pod.get("status") or {}).get("resourceClaimStatuses") or ()}
        for entry in pod["spec"].get("resourceClaims") or ():
            name = entry["name"]
            if name not in shared or not entry.get("resourceClaimTemplateName"):
                continue
            used = claims.get(f"{pod['metadata']['namespace']}/{recorded.get(name)}")
            if used is not None and (_group_owner(used) or {}).get("uid") != group["metadata"]["uid"]:
                out.append(f"pod {_key(pod)} of PodGroup {group_name} on {node}: its claim {name} is "
                           f"{_key(used)}, not its group's")
    return out


def extended_claims(snap: Snapshot) -> list[str]:
    """A bound pod asking for a DRA-backed extended resource has its claim recorded in
    ``status.extendedResourceClaimStatus``; that claim is the pod's (controlled by it, annotated), and a
    bound pod has no other extended-resource claim."""
    out = []
    claims = {_key(c): c for c in snap.claims}
    spares: dict[str, list[str]] = {}
    for claim in snap.claims:
        ref = _controller(claim)
        if _annotations(claim).get(EXTENDED_ANNOTATION) == "true" and ref and ref.get("kind") == "Pod":
            spares.setdefault(str(ref.get("uid")), []).append(_key(claim))
    for pod in snap.pods:
        node = pod["spec"].get("nodeName")
        if not node or not _live(pod):
            continue
        wants = _wants_extended(pod, snap.extended_names)
        name = extended_claim_name(pod)
        if wants and not name:
            out.append(f"pod {_key(pod)} on {node}: asks for {sorted(wants)} without an extended claim")
        if not name:
            continue
        key = f"{pod['metadata']['namespace']}/{name}"
        used = claims.get(key)
        if used is not None and (not is_controlled_by(used, pod)
                                 or _annotations(used).get(EXTENDED_ANNOTATION) != "true"):
            out.append(f"pod {_key(pod)}: extended claim {name} is not its own")
        extra = sorted(set(spares.get(pod["metadata"]["uid"], ())) - {key})
        if extra:
            out.append(f"pod {_key(pod)}: extended claims {extra} besides {name}")
    return out


def _wants_extended(pod: Obj, names: frozenset[str]) -> set[str]:
    wanted = set()
    for container in pod["spec"].get("containers") or ():
        for res in ((container.get("resources") or {}).get("limits") or {}):
            if res in names or res.startswith(IMPLICIT_PREFIX):
                wanted.add(res)
    return wanted


def orphan_claims(snap: Snapshot) -> list[str]:
    """(settled) No claim is left controlled by a pod or PodGroup that is gone (or a newer one of the same
    name), nor by a pod that finished: generated, PodGroup and extended claims go with their owner."""
    pods = {p["metadata"]["uid"]: p for p in snap.pods}
    groups = {g["metadata"]["uid"] for g in snap.pod_groups}
    out = []
    for claim in snap.claims:
        ref = _controller(claim)
        if ref is None:
            continue
        uid = ref.get("uid")
        if ref.get("kind") == "Pod" and (uid not in pods or not _live(pods[str(uid)])):
            out.append(f"claim {_key(claim)} left behind by pod {ref.get('name')}")
        elif _group_owner(claim) is not None and uid not in groups:
            out.append(f"claim {_key(claim)} left behind by PodGroup {ref.get('name')}")
    return out


def stuck_deleting(snap: Snapshot) -> list[str]:
    """(settled) Nothing deleted stays: no pod, claim or PodGroup still has a ``deletionTimestamp`` (a
    finalizer nobody lifts: delete-protection, podgroup-protection, a pod the node never let go)."""
    out = []
    for what, objs in (("pod", snap.pods), ("claim", snap.claims), ("PodGroup", snap.pod_groups)):
        for obj in objs:
            meta = obj["metadata"]
            if meta.get("deletionTimestamp"):
                out.append(f"{what} {_key(obj)} deleted at {meta['deletionTimestamp']} is still there "
                           f"(finalizers {meta.get('finalizers') or []})")
    return out


def trace_roots(snap: Snapshot) -> list[str]:
    """(settled) Every claim carries its trace root's ``draflow.dev/traceparent`` (user claims too: the
    claim-controller or the allocator writes it, whichever sees the claim first)."""
    return [f"claim {_key(c)} has no {TRACEPARENT}" for c in snap.claims
            if not _annotations(c).get(TRACEPARENT)]


@dataclass
class History:
    """What earlier snapshots showed, per claim UID: its trace root (written once, never changed or
    removed) and, for a PodGroup's claim, its first allocation (a group's claim is allocated once: it keeps
    its devices while the group exists, and is only deallocated, never moved)."""

    roots: dict[str, str] = field(default_factory=dict)
    group_devices: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)

    def observe(self, snap: Snapshot) -> list[str]:
        out = []
        for claim in snap.claims:
            uid, key = claim["metadata"]["uid"], _key(claim)
            root = _annotations(claim).get(TRACEPARENT)
            if uid in self.roots and root != self.roots[uid]:
                out.append(f"claim {key}: trace root {self.roots[uid]} became {root}")
            if root:
                self.roots.setdefault(uid, root)
            if _group_owner(claim) is None:
                continue
            devices = sorted((r["driver"], r["pool"], r["device"]) for r in claim_results(claim))
            first = self.group_devices.get(uid)
            if devices and first and devices != first:
                out.append(f"claim {key} of a PodGroup: allocated {first}, then {devices}")
            if devices and not first:
                self.group_devices[uid] = devices
        return out

