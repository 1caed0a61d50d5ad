"""The facts of one pod-group scheduling cycle (GenericWorkload; pure).

Upstream kube-scheduler v1.37.1 schedules the pending pods of a PodGroup (``scheduling.k8s.io/v1beta1``)
together: one cycle tries each member in turn, holding what the earlier members were given in memory,
and the group either goes to binding as a whole or not at all. This module holds what a cycle needs
besides the per-pod decisions (:mod:`.gang` runs it):

* :func:`min_count` — a gang PodGroup's ``schedulingPolicy.gang.minCount`` (basic policy: 1);
* :func:`feasibility` — upstream's GangScheduling ``PlacementFeasible``: after each member, ``scheduled``
  (members placed in this cycle plus those already assumed or bound) against ``remaining`` (members not
  tried yet): the cycle stops early when ``minCount`` cannot be reached any more;
* :class:`GroupCycle` — upstream's ``podGroupStateData``: the claims an earlier member of this cycle
  allocated (pending, not written yet) with the pods sharing them, so a later member uses that
  allocation instead of waiting for its write or allocating the claim a second time; and the allocated
  claims the members found unavailable (for :mod:`.podgroup_postfilter`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["GroupCycle", "feasibility", "min_count", "pending_members_wait"]

Obj = Mapping[str, Any]


def min_count(pod_group: Obj) -> int:
    """``spec.schedulingPolicy.gang.minCount``, or 1 (basic policy), as upstream's ``getMinCount``."""
    gang = ((pod_group.get("spec") or {}).get("schedulingPolicy") or {}).get("gang")
    if gang is None:
        return 1
    return int(gang.get("minCount") or 0)


def is_gang(pod_group: Obj) -> bool:
    return ((pod_group.get("spec") or {}).get("schedulingPolicy") or {}).get("gang") is not None


def pending_members_wait(pod_group: Obj, all_members: int) -> str | None:
    """Upstream GangScheduling ``PreEnqueue``: a gang's pods wait until ``minCount`` pods of the group
    exist (scheduled or not); a message, or None when the cycle may run."""
    if is_gang(pod_group) and all_members < min_count(pod_group):
        return "waiting for minCount pods from a gang to appear in scheduling queue"
    return None


def feasibility(needed: int, scheduled: int, remaining: int) -> tuple[Literal["ok", "wait", "no"], str]:
    """Upstream GangScheduling ``PlacementFeasible`` for ``needed`` = :func:`min_count`."""
    counts = f"{scheduled} scheduled, {remaining} remaining"
    if remaining + scheduled < needed:
        return "no", f"minCount ({needed}) cannot be satisfied: {counts}"
    if scheduled < needed:
        return "wait", f"minCount ({needed}) is not yet satisfied: {counts}"
    return "ok", ""


@dataclass
class GroupCycle:
    """What one pod-group cycle shares between its members (upstream ``podGroupStateData``)."""

    # claim uid -> uids of the pods of this cycle that use its pending allocation
    pending: dict[str, set[str]] = field(default_factory=dict)
    # allocated claims some member found unavailable, in the order found (PodGroupPostFilter)
    unavailable: list[Obj] = field(default_factory=list)

    def allocated(self, claim_uid: str, pod_uid: str) -> None:
        """A member of this cycle allocated the claim, or uses that pending allocation."""
        self.pending.setdefault(claim_uid, set()).add(pod_uid)

    def shares(self, claim_uid: str) -> bool:
        """The claim's assumed allocation was decided in this cycle."""
        return claim_uid in self.pending

    def found_unavailable(self, claims: list[Obj]) -> None:
        self.unavailable.extend(claims)
