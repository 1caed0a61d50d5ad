"""PodGroup protection: a deleted PodGroup goes once none of its pods is active (upstream
kube-controller-manager v1.37.1 ``podgroup-protection`` controller, ``pkg/controller/scheduling/
podgroupprotection``).

kube-apiserver's PodGroupProtection admission gives every PodGroup the finalizer
``scheduling.k8s.io/podgroup-protection``; kube-controller-manager lifts it from a PodGroup being
deleted once no pod with ``spec.schedulingGroup.podGroupName`` = the group is active (every member
``Succeeded``/``Failed`` or gone). DRA relies on that: the claims reserved for the PodGroup keep their
reservation — and their devices — while the PodGroup exists, and a claim generated for the PodGroup is
deleted only once it is gone (:mod:`.claims`). Where no kube-controller-manager runs it (draflow's test
environment, ``make up``), a deleted PodGroup would hold its devices for ever; the claim-controller
therefore does the same (with DRAWorkloadResourceClaims on, as a part of its PodGroup reconcile). Both
running at once is safe: the finalizer is removed with a resourceVersion precondition, and a PodGroup
without it needs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from draflow_runtime.dra import pod_is_finished
from draflow_runtime.errors import NotFound
from draflow_runtime.kube import POD_GROUPS
from draflow_runtime.log import get_logger

from .context import BY_MEMBER, Context

__all__ = ["PROTECTION_FINALIZER", "release_when_unused", "unused"]

log = get_logger(__name__)

PROTECTION_FINALIZER = "scheduling.k8s.io/podgroup-protection"

Obj = Mapping[str, Any]


def unused(pod_group: Obj, members: Iterable[Obj]) -> bool:
    """The PodGroup is being deleted, still has the finalizer, and no member pod is active (upstream
    ``IsDeletionCandidate`` and no pod in its ``activePodSchedulingGroup`` index)."""
    meta = pod_group.get("metadata") or {}
    if not meta.get("deletionTimestamp") or PROTECTION_FINALIZER not in (meta.get("finalizers") or ()):
        return False
    return all(pod_is_finished(dict(pod)) for pod in members)


async def release_when_unused(ctx: Context, pod_group: Obj) -> bool:
    """Remove the protection finalizer of a deleted PodGroup none of whose pods is active (a merge patch
    with the cached resourceVersion: Conflict when it changed, retried from fresh state). True when
    removed. Idempotent."""
    meta = pod_group["metadata"]
    members = ctx.pods_indexed(BY_MEMBER, f"{meta['namespace']}/{meta['name']}")
    if not unused(pod_group, members):
        return False
    rest = [f for f in meta.get("finalizers") or () if f != PROTECTION_FINALIZER]
    body = {"metadata": {"resourceVersion": meta["resourceVersion"], "finalizers": rest or None}}
    try:
        await ctx.kube.patch(POD_GROUPS, meta["name"], body, meta["namespace"],
                             field_manager=ctx.settings.field_manager)
    except NotFound:
        return True
    log.info("podgroup protection released: no active pods")
    return True
