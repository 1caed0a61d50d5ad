"""syncPod: the claims a pod needs exist, are recorded in its status, and (for a pod that already has
``spec.nodeName``) are allocated and reserved for it.

Level-triggered and idempotent: everything is decided from the pod and the claims as the caches show
them now, so running it twice, or after a crash at any point, converges to the same state:

- a generated claim is looked up by its recorded name, then by owner UID + pod-claim annotation (a claim
  created before a failed status write or a crash), and only then created — never twice;
- ``status.resourceClaimStatuses`` is written by server-side apply (own field manager, force) with every
  generated claim known, so a repeated apply changes nothing; it is not repeated while the cache has not
  caught up with this process's own apply (:class:`~.context.AppliedStatuses`);
- a pod bound to a node without the allocator's help gets its claims allocated through the allocator
  (NATS request/reply) and reserved with a patch that merges into ``reservedFor`` by UID;
- with DRAWorkloadResourceClaims, a template claim of a PodGroup member that the group lists with the same
  name and template is the group's (:mod:`.podgroups` makes it): its name is recorded in the pod status
  once the group's claim exists (nothing is generated for the pod), and it is reserved for the PodGroup.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from draflow_runtime.dra import (
    RESERVED_FOR_MAX,
    PodClaim,
    is_controlled_by,
    is_for_pod_or_group,
    is_reserved_for_pod_or_group,
    pod_claims,
    pod_group_name,
)
from draflow_runtime.errors import ApiError, Conflict, NotFound
from draflow_runtime.kube import PODS, RESOURCE_CLAIMS
from draflow_runtime.log import bind, get_logger
from draflow_runtime.podgroups import bind_to, is_pod_group_reference
from draflow_runtime.reconcile import Done, RequeueAfter, TerminalError

from . import metrics
from .allocator import AllocationRefused, AllocatorUnavailable
from .context import Context
from .creation import create_from_template
from .nodeselector import node_selector_admits, selector_needs_labels
from .ownership import is_generated_for, pod_is_done
from .podgroups import group_claim
from .sharding import shard_labels

__all__ = ["PodClaimError", "pod_needs_work", "sync_pod"]

log = get_logger(__name__)

Obj = dict[str, Any]


class PodClaimError(TerminalError):
    """A pod's claim cannot be made or used and retrying will not help; becomes a Warning Event with
    ``reason`` on the pod (the runner calls the controller's ``on_terminal``)."""

    def __init__(self, message: str, *, pod: Obj, reason: str, claim: str = "") -> None:
        super().__init__(message, obj=pod)
        self.reason = reason
        self.claim = claim


def pod_needs_work(ctx: Context, pod: Obj) -> bool:
    """Whether :func:`sync_pod` may have something to write or report for ``pod`` as the caches show it
    (upstream's ``podNeedsWork``, which its event handlers ask before queueing a pod; a little wider).

    False for a pod being deleted, for a pod whose status this process applied and whose update event is
    still to come (that event asks again), and for a pod whose every needed claim is recorded, in the
    cache, the pod's own if generated, and (once bound) reserved for it. True otherwise, and always for a
    PodGroup member. Skipping the others saves the reconciles the pod's own later events used to
    cause (our status apply, the binding, its claim's allocation), each finding nothing to do."""
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return False
    if pod_group_name(pod):
        return True
    if ctx.applied.pending(pod):
        return False
    bound = bool((pod.get("spec") or {}).get("nodeName"))
    namespace = meta.get("namespace", "")
    for pc in pod_claims(pod):
        if not pc.needed:
            continue
        if pc.claim_name is None:
            return True  # to make, or to record
        claim = ctx.claim(namespace, pc.claim_name)
        if claim is None or (pc.generated and not is_controlled_by(claim, pod)):
            return True  # to make again, to report, or to read live (another shard's claim)
        if bound and not is_reserved_for_pod_or_group(claim, pod, ctx.settings.pod_groups):
            return True  # to reserve, or to ask the allocator for
    return False


async def sync_pod(ctx: Context, namespace: str, name: str) -> Done | RequeueAfter:
    """Reconcile pod ``namespace/name`` (see module docstring). Idempotent."""
    pod = ctx.pods.get(f"{namespace}/{name}")
    if pod is None:
        return Done()  # gone: its claims are cleaned up by their own reconciles
    if (pod.get("metadata") or {}).get("deletionTimestamp") or pod_is_done(pod):
        return Done()  # never create claims for a pod that will not run
    with bind(pod=f"{namespace}/{name}"):
        if pod_group_name(pod):
            if ctx.pod_groups is None:  # upstream: a non-retryable error
                raise PodClaimError(f"pod is a member of PodGroup {pod_group_name(pod)} but the "
                                    "GenericWorkload feature is disabled", pod=pod,
                                    reason="FailedResourceClaimCreation")
            if ctx.pod_group_of(pod) is None:
                return Done()  # upstream: no PodGroup, nothing to do yet; its arrival enqueues the pod
        names = await _ensure_claims(ctx, pod)
        if names:
            try:
                await _record_statuses(ctx, pod, names)
            except NotFound:
                return Done()  # deleted meanwhile: the claims are owned by it and get cleaned up
        if (pod.get("spec") or {}).get("nodeName"):
            return await _reserve_for_bound_pod(ctx, pod)
    return Done()


# -- generated claims ----------------------------------------------------------------------------------


async def _ensure_claims(ctx: Context, pod: Obj) -> dict[str, str]:
    """Make sure every template claim of ``pod`` exists; return ``{podClaim: claimName}`` of all of them
    (existing and new). Direct references to missing claims become Events."""
    names: dict[str, str] = {}
    pod_group = ctx.pod_group_of(pod)
    for pc in pod_claims(pod):
        if not pc.needed:
            continue
        if pc.generated and pod_group is not None and is_pod_group_reference(bind_to(pod, pod_group, pc)):
            if ctx.settings.pod_groups:
                shared = await group_claim(ctx, pod_group, pc)  # the PodGroup's reconcile makes it
            else:  # upstream: a claim recorded earlier still counts, none is made
                shared = await _recorded_claim(ctx, pod, pc)
                if shared is None:
                    raise PodClaimError(f"pod claim {pc.name} is a PodGroup claim but the "
                                        "DRAWorkloadResourceClaims feature is disabled", pod=pod,
                                        reason="FailedResourceClaimCreation")
            if shared is not None:
                names[pc.name] = shared["metadata"]["name"]
            continue
        if not pc.generated:
            if pc.claim_name and await ctx.claim_anywhere(_ns(pod), pc.claim_name) is None:
                await ctx.recorder.event(
                    pod, "Warning", "ResourceClaimNotFound",
                    f"pod claim {pc.name}: ResourceClaim {pc.claim_name} does not exist (yet)",
                    action="ResolvingResourceClaims",
                )
            continue
        claim = await _existing_claim(ctx, pod, pc)
        if claim is None:
            claim = await _create_claim(ctx, pod, pc)
            if claim is not None and pc.claim_name:
                await ctx.recorder.event(
                    pod, "Warning", "ResourceClaimRecreated",
                    f"pod claim {pc.name}: ResourceClaim {pc.claim_name} is gone or not the pod's; "
                    f"created {claim['metadata']['name']} instead",
                    action="CreatingResourceClaims", related=claim,
                )
        if claim is not None:
            names[pc.name] = claim["metadata"]["name"]
    return names


async def _recorded_claim(ctx: Context, pod: Obj, pc: PodClaim) -> Obj | None:
    """The claim recorded for ``pc`` in the pod status, if it exists and the pod controls it."""
    if not pc.claim_name:
        return None
    namespace = _ns(pod)
    claim = ctx.claim(namespace, pc.claim_name) or await ctx.live_claim(namespace, pc.claim_name)
    return claim if claim is not None and is_controlled_by(claim, pod) else None


async def _existing_claim(ctx: Context, pod: Obj, pc: PodClaim) -> Obj | None:
    """The claim already generated for ``pc``: by recorded name, else by owner UID and annotation."""
    namespace, pod_uid = _ns(pod), pod["metadata"].get("uid", "")
    if pc.claim_name:
        claim = await _recorded_claim(ctx, pod, pc)
        if claim is not None:
            return claim
        log.info("recorded claim is gone or not owned by the pod, generating a new one",
                 claim=f"{namespace}/{pc.claim_name}", pod_claim=pc.name)
    for claim in ctx.claims_owned_by(pod_uid):
        deleting = (claim.get("metadata") or {}).get("deletionTimestamp")
        if is_generated_for(claim, pod, pc.name) and not deleting:
            return claim
    return None


def _owner_ref(pod: Obj) -> Obj:
    """The controller owner reference of a claim generated for ``pod``."""
    meta = pod["metadata"]
    return {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


async def _create_claim(ctx: Context, pod: Obj, pc: PodClaim) -> Obj | None:
    """Create the claim for ``pc`` (:func:`~.creation.create_from_template`). Returns None (after a
    Warning Event) when the template is missing: the template's arrival enqueues the pod again."""
    name = pod["metadata"]["name"]
    claim = await create_from_template(
        ctx, pod, _owner_ref(pod), pc, what="pod claim", span_attributes={"k8s.pod.name": name},
        pod=f"{_ns(pod)}/{name}", node=(pod.get("spec") or {}).get("nodeName"),
        extra_labels=shard_labels(_ns(pod), name, ctx.settings.shards))
    if claim is not None and ctx.hooks.after_claim_create is not None:
        await ctx.hooks.after_claim_create(pod, claim)
    return claim


async def _record_statuses(ctx: Context, pod: Obj, names: Mapping[str, str]) -> None:
    """Server-side apply ``status.resourceClaimStatuses`` with every generated claim (no-op if recorded)."""
    recorded = {
        s.get("name"): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()
    }
    if all(recorded.get(k) == v for k, v in names.items()):
        return
    if ctx.applied.landed(pod, dict(names)):
        return  # applied by this process, not in the cache yet: the pod's update enqueues it again
    meta = pod["metadata"]
    apply = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
        "status": {
            "resourceClaimStatuses": [{"name": k, "resourceClaimName": v} for k, v in sorted(names.items())]
        },
    }
    try:
        applied = await ctx.kube.patch(PODS, meta["name"], apply, meta["namespace"], patch_type="apply",
                                       subresource="status", field_manager=ctx.settings.field_manager,
                                       force=True)
    except (NotFound, Conflict):
        raise  # NotFound: the pod is gone; Conflict: a new pod with the same name (UID differs): retry
    except ApiError:
        metrics.ERRORS.labels(operation="pod-status").inc()
        raise
    ctx.applied.record(applied, dict(names))


# -- pods that already have spec.nodeName --------------------------------------------------------------


async def _reserve_for_bound_pod(ctx: Context, pod: Obj) -> Done | RequeueAfter:
    """Claims of a pod bound to a node: reserve the allocated ones for it; ask the allocator for the rest."""
    node = pod["spec"]["nodeName"]
    namespace = _ns(pod)
    unallocated: list[str] = []
    groups = ctx.settings.pod_groups
    pod_group = ctx.pod_group_of(pod)
    for pc in pod_claims(pod):
        if not pc.needed:
            continue
        if pc.claim_name is None:
            return Done()  # not created yet; the status write enqueues the pod again
        claim = ctx.claim(namespace, pc.claim_name) if pc.generated else \
            await ctx.claim_anywhere(namespace, pc.claim_name)
        if claim is None:
            return Done()  # the claim's arrival enqueues the pod again
        if pc.generated and not is_for_pod_or_group(claim, pod, groups):
            raise PodClaimError(f"ResourceClaim {pc.claim_name} was not created for this pod", pod=pod,
                                reason="ResourceClaimNotUsable", claim=pc.claim_name or "")
        status = claim.get("status") or {}
        if status.get("allocation") is None:
            unallocated.append(pc.claim_name)
        elif not is_reserved_for_pod_or_group(claim, pod, groups):
            consumer = bind_to(pod, pod_group, pc)
            if is_pod_group_reference(consumer) and not groups:
                log.info("not reserving a PodGroup's claim: DRAWorkloadResourceClaims is disabled",
                         claim=f"{namespace}/{pc.claim_name}")  # as upstream (which logs at V(3))
                continue
            await _reserve(ctx, pod, claim, node, consumer)
    if unallocated:
        return await _request_allocation(ctx, pod, unallocated)
    return Done()


async def _reserve(ctx: Context, pod: Obj, claim: Obj, node: str, consumer: dict[str, str]) -> None:
    """Add ``consumer`` (the pod, or its PodGroup: upstream ``BindTo``) to the claim's ``reservedFor`` if
    the allocation admits ``node``.

    A strategic-merge patch keyed by UID adds the entry without rewriting the list (concurrent
    additions survive); ``metadata.uid`` in the patch guards against a replaced claim.
    """
    cmeta = claim["metadata"]
    allocation = claim["status"]["allocation"]
    selector = allocation.get("nodeSelector")
    labels = await ctx.node_labels(node) if selector_needs_labels(selector) else None
    if not node_selector_admits(selector, node, labels):
        raise PodClaimError(
            f"ResourceClaim {cmeta['name']} is allocated for other nodes than {node}; it cannot be used "
            "by this pod", pod=pod, reason="ResourceClaimNotUsable", claim=cmeta["name"])
    if cmeta.get("deletionTimestamp"):
        raise PodClaimError(f"ResourceClaim {cmeta['name']} is being deleted", pod=pod,
                            reason="ResourceClaimNotUsable", claim=cmeta["name"])
    if len(claim["status"].get("reservedFor") or ()) >= RESERVED_FOR_MAX:
        raise PodClaimError(f"ResourceClaim {cmeta['name']} is reserved for {RESERVED_FOR_MAX} consumers "
                            "already", pod=pod, reason="ResourceClaimNotUsable", claim=cmeta["name"])
    patch = {"metadata": {"uid": cmeta["uid"]}, "status": {"reservedFor": [consumer]}}
    try:
        updated = await ctx.kube.patch(RESOURCE_CLAIMS, cmeta["name"], patch, cmeta["namespace"],
                                       patch_type="strategic", subresource="status",
                                       field_manager=ctx.settings.field_manager)
    except ApiError:
        metrics.ERRORS.labels(operation="reserve").inc()
        raise
    ctx.mutations.mutated(updated)
    metrics.RESERVATIONS_ADDED.inc()
    log.info("claim reserved for bound pod", claim=f"{cmeta['namespace']}/{cmeta['name']}", node=node)
    await ctx.events.reserved(updated, pod, node)


async def _request_allocation(ctx: Context, pod: Obj, unallocated: list[str]) -> RequeueAfter:
    """Ask the allocator to allocate the pod's claims on its node.

    The cache may lag behind an allocation that already happened, so the claims are read live first.
    Accepted: look again after ``allocation_recheck`` (the claim updates usually enqueue the pod
    sooner). Refused or unanswered: a Warning Event and a retry with backoff (the error propagates).
    """
    namespace, node = _ns(pod), pod["spec"]["nodeName"]
    still = []
    for name in unallocated:
        live = await ctx.live_claim(namespace, name)
        if live is not None and (live.get("status") or {}).get("allocation") is None:
            still.append(name)
    if not still:
        return RequeueAfter(0.0)  # allocated meanwhile: reserve from the fresh copies
    try:
        message = await ctx.allocator.allocate(pod)
    except AllocatorUnavailable as exc:
        metrics.ALLOCATION_REQUESTS.labels(result="unavailable").inc()
        await ctx.recorder.event(
            pod, "Warning", "AllocatorUnavailable",
            f"claims {', '.join(still)} need an allocation on node {node}: {exc}; retrying",
            action="Allocating",
        )
        raise
    except AllocationRefused as exc:
        metrics.ALLOCATION_REQUESTS.labels(result="refused").inc()
        await ctx.recorder.event(
            pod, "Warning", "FailedAllocation",
            f"claims {', '.join(still)} cannot be allocated on node {node}: {exc}; retrying",
            action="Allocating",
        )
        raise
    metrics.ALLOCATION_REQUESTS.labels(result="ok").inc()
    log.info("allocation requested", node=node, claims=still, allocator_message=message)
    return RequeueAfter(ctx.settings.allocation_recheck)


def _ns(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("namespace", ""))
