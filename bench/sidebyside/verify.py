"""Correctness of a run, from the objects the API server holds at the end (a pure function).

Checked: every pod that should be is bound; every claim of a bound pod exists, is allocated for the pod's
node (its ``nodeSelector`` names that node and every device comes from a pool of that node) and lists the
pod in ``reservedFor``; no device is allocated to two claims.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Verdict:
    pods: int = 0
    bound: int = 0
    claims_checked: int = 0
    devices_allocated: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self, limit: int = 3) -> str:
        if self.ok:
            return "ok"
        shown = "; ".join(self.problems[:limit])
        more = f" (+{len(self.problems) - limit} more)" if len(self.problems) > limit else ""
        return f"{len(self.problems)} problems: {shown}{more}"


def pod_claim_names(pod: Mapping[str, Any]) -> list[str]:
    """The ResourceClaim names a pod uses: named claims, and generated ones from its status."""
    generated = {s["name"]: s.get("resourceClaimName")
                 for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()}
    names = []
    for pc in pod["spec"].get("resourceClaims") or ():
        name = pc.get("resourceClaimName") or generated.get(pc["name"])
        names.append(name or f"<no claim for {pc['name']}>")
    return names


def selector_node(allocation: Mapping[str, Any]) -> str | None:
    """The node a node-local allocation is for (``matchFields metadata.name In [node]``), else None."""
    for term in (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or ():
        for f in term.get("matchFields") or ():
            if f.get("key") == "metadata.name" and f.get("operator") == "In" and len(f.get("values")) == 1:
                return str(f["values"][0])
    return None


def verify(pods: Iterable[Mapping[str, Any]], claims: Iterable[Mapping[str, Any]],
           pool_nodes: Mapping[str, str], *, all_bound: bool) -> Verdict:
    """``pods``: the pods to check (one namespace); ``claims``: every claim of the cluster;
    ``pool_nodes``: pool name -> node of its devices; ``all_bound``: an unbound pod is a problem."""
    v = Verdict()
    by_key = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in claims}
    owners: dict[tuple[str, str, str], str] = {}
    for (ns, name), c in sorted(by_key.items()):
        for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or ():
            device = (r["driver"], r["pool"], r["device"])
            v.devices_allocated += 1
            if device in owners:
                v.problems.append(f"device {'/'.join(device)} allocated to {owners[device]} and {ns}/{name}")
            owners[device] = f"{ns}/{name}"
    for pod in pods:
        v.pods += 1
        meta, node = pod["metadata"], pod["spec"].get("nodeName")
        where = f"pod {meta['namespace']}/{meta['name']}"
        if not node:
            if all_bound:
                v.problems.append(f"{where} not bound")
            continue
        v.bound += 1
        for name in pod_claim_names(pod):
            v.claims_checked += 1
            found = by_key.get((meta["namespace"], name))
            if found is None:
                v.problems.append(f"{where} on {node}: claim {name} missing")
                continue
            status = found.get("status") or {}
            alloc = status.get("allocation")
            if not alloc:
                v.problems.append(f"{where} on {node}: claim {name} not allocated")
                continue
            if selector_node(alloc) != node:
                v.problems.append(f"{where} on {node}: claim {name} allocated for {selector_node(alloc)}")
            for r in (alloc.get("devices") or {}).get("results") or ():
                if pool_nodes.get(r["pool"]) != node:
                    v.problems.append(f"{where} on {node}: claim {name} has device {r['device']} of pool "
                                      f"{r['pool']} (node {pool_nodes.get(r['pool'])})")
            if not any(ref.get("uid") == meta["uid"] for ref in status.get("reservedFor") or ()):
                v.problems.append(f"{where} on {node}: claim {name} not reserved for it")
    return v
