"""PodGroupPostFilter (pure): what a PodGroup that cannot be placed as a whole gives back.

Upstream (kube-scheduler v1.37.1, DynamicResources ``PodGroupPostFilter`` + ``deallocatePodGroupClaims``)
runs it once per failed pod-group cycle, instead of the per-pod PostFilter of each member:

1. for every member evaluated in the cycle, the per-pod PostFilter (here :mod:`.postfilter`: one claim of
   the pod reserved for nobody or only that pod); a member for which nothing was found means the group
   as a whole could not be placed, so
2. with DRAWorkloadResourceClaims, and only while no member of the group is assumed or bound (a running
   member still uses the group's claims), one write for the group:

   a. an allocated claim that some evaluated member found *unavailable* (its allocation's node
      selector rules out a node that passed the node filters, or its binding conditions failed or timed
      out) and that is reserved for nobody or only this PodGroup is **deallocated**; else
   b. the first claim the PodGroup lists (a template's claim only if the PodGroup controls it) that is
      allocated and reserved for the first unscheduled member or its PodGroup is **unreserved** (the
      PodGroup's ``reservedFor`` entry removed; the allocation stays, as upstream: a later cycle that
      finds it unavailable deallocates it by step a).

It refuses (does nothing) for a PodGroup in a CompositePodGroup hierarchy (``parentCompositePodGroupName``)
and, with TopologyAwareWorkloadScheduling on, for a PodGroup with ``schedulingConstraints``. Upstream
picks a claim at random; here the order is the cycle's member order, then the claims' order, so the
choice is reproducible.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from draflow_runtime.dra import is_reserved_for_pod_or_group
from draflow_runtime.podgroups import is_for_pod_group, pod_group_claims

__all__ = [
    "GroupClaimAction", "PostFilterPlan", "group_claim_to_give_back", "pod_group_post_filter", "refusal",
]

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class GroupClaimAction:
    """One write: ``deallocate`` the claim (only if still reserved for nobody or only ``group_uid``),
    or ``unreserve`` it (drop the PodGroup's ``reservedFor`` entry, by ``group_uid``)."""

    kind: Literal["deallocate", "unreserve"]
    claim: Obj
    group_uid: str

    @property
    def claim_key(self) -> str:
        meta = self.claim["metadata"]
        return f"{meta['namespace']}/{meta['name']}"


def refusal(pod_group: Obj, *, topology_aware: bool = False) -> str | None:
    """Why PodGroupPostFilter leaves this PodGroup alone, or None."""
    spec = pod_group.get("spec") or {}
    if spec.get("parentCompositePodGroupName"):
        return "PodGroupPostFilter does not support CompositePodGroups"
    if topology_aware and spec.get("schedulingConstraints") is not None:
        return "PodGroupPostFilter does not support topology-aware workloads"
    return None


def _reserved_for_nobody_or_group(claim: Obj, group_uid: str) -> bool:
    reserved = (claim.get("status") or {}).get("reservedFor") or []
    return not reserved or (len(reserved) == 1 and reserved[0].get("uid") == group_uid)


def group_claim_to_give_back(
    pod_group: Obj,
    first_unscheduled: Obj,
    *,
    scheduled_members: int,
    unavailable: Sequence[Obj],
    claim_of: Callable[[str], Obj | None],
) -> GroupClaimAction | None:
    """Step 2 above: the one claim write for the group, or None.

    ``scheduled_members``: members assumed (their writes in flight) or bound, outside this cycle.
    ``unavailable``: allocated claims evaluated members found unavailable, in cycle order.
    ``claim_of(name)``: the cached claim of the PodGroup's namespace (None: not known)."""
    if not ((first_unscheduled.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName"):
        return None
    if scheduled_members > 0:
        return None  # a member is placed: it may use every claim of the group
    group_uid = str(pod_group["metadata"]["uid"])
    seen: set[str] = set()
    for claim in unavailable:
        uid = claim["metadata"]["uid"]
        if uid in seen:
            continue
        seen.add(uid)
        if (claim.get("status") or {}).get("allocation") and _reserved_for_nobody_or_group(claim, group_uid):
            return GroupClaimAction("deallocate", claim, group_uid)
    for entry in pod_group_claims(pod_group):
        if entry.claim_name is None:
            continue
        found = claim_of(entry.claim_name)
        if found is None:
            return None  # upstream: an error ends this PostFilter; the next failed cycle looks again
        if entry.generated and not is_for_pod_group(found, pod_group):
            continue
        if (found.get("status") or {}).get("allocation") and \
                is_reserved_for_pod_or_group(found, first_unscheduled, True):
            return GroupClaimAction("unreserve", found, group_uid)
    return None


@dataclass
class PostFilterPlan:
    """What one failed pod-group cycle writes: per member its own claim (step 1), then the group's."""

    per_pod: list[tuple[Obj, Obj]] = field(default_factory=list)  # (member, claim to deallocate)
    group: GroupClaimAction | None = None
    refused: str = ""


def pod_group_post_filter(
    pod_group: Obj,
    evaluated: Sequence[tuple[Obj, Obj | None, bool]],
    first_unscheduled: Obj,
    *,
    workload_claims: bool,
    topology_aware: bool = False,
    scheduled_members: int,
    unavailable: Sequence[Obj],
    claim_of: Callable[[str], Obj | None],
) -> PostFilterPlan:
    """The whole PodGroupPostFilter (see the module docstring). ``evaluated``: per member tried in the
    cycle, (pod, the claim its own PostFilter gives back or None, whether it found something else to give
    back — a stale special claim of extended resources)."""
    refused = refusal(pod_group, topology_aware=topology_aware)
    if refused:
        return PostFilterPlan(refused=refused)
    plan = PostFilterPlan()
    unreserve_group = False
    for pod, claim, other in evaluated:
        if claim is not None:
            plan.per_pod.append((pod, claim))
        elif not other:
            unreserve_group = True  # this member found nothing: the group as a whole cannot be placed
    if unreserve_group and workload_claims:
        plan.group = group_claim_to_give_back(pod_group, first_unscheduled,
                                              scheduled_members=scheduled_members,
                                              unavailable=unavailable, claim_of=claim_of)
    return plan
