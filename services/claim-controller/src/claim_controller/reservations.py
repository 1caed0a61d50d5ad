"""What to do with a claim's ``status.reservedFor`` and allocation (pure decisions).

The shell (``claims.py``) looks every reserved pod up — informer cache first, then the deleted-UID
cache, then a live GET for a pod the cache does not know — and hands the results to
:func:`plan_claim`, which decides without I/O:

- a pod reservation is **dropped** when the pod is gone, replaced (same name, other UID) or done
  (``Succeeded``/``Failed``, or deleted before it was bound); with DRAWorkloadResourceClaims a PodGroup
  reservation is dropped when the PodGroup is gone or replaced (a PodGroup is never "done": its pods may
  still come); anything else is kept, and so is every reference to another kind (we cannot tell whether
  it is still in use);
- the claim is **deallocated** (allocation and device status cleared) when this drop empties
  ``reservedFor``, or when it is being deleted with nothing reserved. A claim that was never reserved is
  *not* deallocated: an allocator may write ``allocation`` before ``reservedFor``;
- the delete-protection finalizer is **released** in the same two situations;
- a generated claim with nothing reserved is **deleted** when its owning pod is gone, replaced or done,
  or its owning PodGroup gone or replaced.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from draflow_runtime.dra import DELETE_PROTECTION_FINALIZER, owning_pod
from draflow_runtime.podgroups import is_pod_group_reference, owning_pod_group

from .ownership import pod_is_done

__all__ = [
    "GONE",
    "UNKNOWN",
    "ClaimPlan",
    "PodState",
    "Verdict",
    "is_pod_reference",
    "plan_claim",
    "reservation_verdict",
]

Obj = Mapping[str, Any]


class _Marker(enum.Enum):
    GONE = "gone"
    UNKNOWN = "unknown"


#: The pod does not exist (live GET answered NotFound, or its UID is in the deleted-pods cache).
GONE = _Marker.GONE
#: Nobody knows yet (not in the cache and not checked live): never enough to drop a reservation.
UNKNOWN = _Marker.UNKNOWN

PodState: TypeAlias = Obj | _Marker


class Verdict(enum.StrEnum):
    """Fate of one ``reservedFor`` entry."""

    KEEP = "keep"
    UNKNOWN_KIND = "unknown-kind"
    UNVERIFIED = "unverified"
    DELETED = "deleted"
    REPLACED = "replaced"
    DONE = "done"

    @property
    def drops(self) -> bool:
        return self in (Verdict.DELETED, Verdict.REPLACED, Verdict.DONE)


def is_pod_reference(ref: Obj) -> bool:
    """A ``reservedFor`` entry that names a core/v1 Pod."""
    return not ref.get("apiGroup") and ref.get("resource") == "pods"


def reservation_verdict(ref: Obj, pod: PodState, *, pod_groups: bool = False) -> Verdict:
    """The fate of ``ref`` given what is known of the pod (or, with ``pod_groups``, the PodGroup) it
    names (see module docstring)."""
    if pod_groups and is_pod_group_reference(ref):
        if pod is GONE:
            return Verdict.DELETED
        if pod is UNKNOWN or not isinstance(pod, Mapping):
            return Verdict.UNVERIFIED
        uid = (pod.get("metadata") or {}).get("uid")
        return Verdict.REPLACED if uid != ref.get("uid") else Verdict.KEEP
    if not is_pod_reference(ref):
        return Verdict.UNKNOWN_KIND
    if pod is GONE:
        return Verdict.DELETED
    if pod is UNKNOWN or not isinstance(pod, Mapping):
        return Verdict.UNVERIFIED
    if (pod.get("metadata") or {}).get("uid") != ref.get("uid"):
        return Verdict.REPLACED
    if pod_is_done(pod):
        return Verdict.DONE
    return Verdict.KEEP


@dataclass(frozen=True, slots=True)
class ClaimPlan:
    """The writes one claim needs, in the order the shell makes them."""

    drop: tuple[dict[str, Any], ...] = ()
    remaining: int = 0
    deallocate: bool = False
    release_finalizer: bool = False
    delete: bool = False
    verdicts: dict[str, Verdict] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.drop or self.deallocate or self.release_finalizer or self.delete)


def plan_claim(claim: Obj, pods: Mapping[str, PodState], owner: PodState | None = None, *,
               groups: Mapping[str, PodState] | None = None) -> ClaimPlan:
    """Decide the clean-up of ``claim``.

    ``pods`` maps the name of every pod in ``reservedFor`` to what is known of it; a missing name counts
    as UNKNOWN. ``groups``: the same for PodGroups (None: DRAWorkloadResourceClaims off, PodGroup entries
    are kept as an unknown kind). ``owner`` is the state of the pod or PodGroup that controls a generated
    claim (None when the claim is not generated). Idempotent: the plan for a cleaned-up claim is empty.
    """
    meta = claim.get("metadata") or {}
    status = claim.get("status") or {}
    reserved = list(status.get("reservedFor") or ())
    verdicts: dict[str, Verdict] = {}
    drop: list[dict[str, Any]] = []
    for ref in reserved:
        if groups is not None and is_pod_group_reference(ref):
            verdict = reservation_verdict(ref, groups.get(ref.get("name", ""), UNKNOWN), pod_groups=True)
        else:
            verdict = reservation_verdict(ref, pods.get(ref.get("name", ""), UNKNOWN))
        verdicts[ref.get("uid", "")] = verdict
        if verdict.drops:
            drop.append(dict(ref))
    remaining = len(reserved) - len(drop)
    deleting = bool(meta.get("deletionTimestamp"))
    allocated = status.get("allocation") is not None
    emptied = bool(drop) and remaining == 0
    released = emptied or (deleting and remaining == 0)
    delete = False
    if remaining == 0 and not deleting and owner is not None:
        delete = _owner_finished(claim, owner)
    return ClaimPlan(
        drop=tuple(drop),
        remaining=remaining,
        deallocate=released and (allocated or bool(status.get("devices"))),
        release_finalizer=released and DELETE_PROTECTION_FINALIZER in (meta.get("finalizers") or ()),
        delete=delete,
        verdicts=verdicts,
    )


def _owner_finished(claim: Obj, owner: PodState) -> bool:
    """The owning pod of a generated claim will never use it: gone, replaced or done; or its owning
    PodGroup is gone or replaced."""
    ref = owning_pod(claim)
    group = owning_pod_group(claim) if ref is None else None
    if group is not None and owner is not UNKNOWN:
        if owner is GONE:
            return True
        assert isinstance(owner, Mapping)
        return (owner.get("metadata") or {}).get("uid") != group[1]
    if ref is None or owner is UNKNOWN:
        return False
    if owner is GONE:
        return True
    assert isinstance(owner, Mapping)
    return (owner.get("metadata") or {}).get("uid") != ref[1] or pod_is_done(owner)
