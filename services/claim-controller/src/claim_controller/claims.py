"""syncClaim: drop stale ``reservedFor`` entries, deallocate, release and delete claims nobody needs.

The decisions are the pure :func:`~claim_controller.reservations.plan_claim`; this module gathers what
it needs (pod states: cache, deleted-UID cache, live GET) and makes the writes, each one safe against
concurrent writers:

- removing some entries while others stay: a strategic-merge ``$patch: delete`` per UID (reservedFor is
  a list map keyed by UID), so a consumer added meanwhile is untouched — the same patch upstream's
  scheduler uses;
- emptying ``reservedFor`` and deallocating: :func:`draflow_runtime.claimwrites.clear_allocation`, one
  status merge patch carrying ``metadata.resourceVersion`` (compare-and-swap: a reservation added
  meanwhile makes it fail with Conflict and the retry decides again from fresh state);
- releasing the finalizer: :func:`draflow_runtime.claimwrites.release_finalizer`, a merge patch with
  ``resourceVersion`` after the allocation is gone (the allocator deallocates with the same two writes);
- deleting a generated claim: DELETE with a UID precondition.

Idempotent: a cleaned-up claim plans no writes. A claim that has left the cache is announced as
``deleted`` on NATS once (from the informer's tombstone).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from draflow_runtime.claimtrace import TraceRootRace, ensure_claim_trace, has_trace
from draflow_runtime.claimwrites import clear_allocation, release_finalizer
from draflow_runtime.dra import owning_pod
from draflow_runtime.errors import ApiError, Conflict, NotFound, TransportError
from draflow_runtime.kube import RESOURCE_CLAIMS
from draflow_runtime.log import bind, get_logger
from draflow_runtime.podgroups import is_pod_group_reference, owning_pod_group
from draflow_runtime.reconcile import Done
from draflow_runtime.tracing import context_from_annotations

from . import metrics
from .context import Context
from .reservations import UNKNOWN, ClaimPlan, PodState, is_pod_reference, plan_claim

__all__ = ["sync_claim"]

log = get_logger(__name__)

Obj = dict[str, Any]
_W = TypeVar("_W", Obj, Obj | None)


async def sync_claim(ctx: Context, namespace: str, name: str) -> Done:
    """Reconcile claim ``namespace/name`` (see module docstring). Idempotent."""
    key = f"{namespace}/{name}"
    claim = ctx.claim(namespace, name)
    if claim is None:
        tombstone = ctx.tombstones.pop(key)
        if tombstone is not None:
            await ctx.events.deleted(tombstone)
        return Done()
    with bind(claim=key):
        trace_error: Exception | None = None
        if not has_trace(claim) and not claim["metadata"].get("deletionTimestamp"):
            try:
                claim = await _root_trace(ctx, claim)
            except NotFound:
                return Done()  # gone: its deletion enqueues it again
            except (ApiError, TransportError, TraceRootRace) as exc:
                log.warning("claim trace root not written, retrying", error=str(exc))
                trace_error = exc  # the clean-up below must not wait for tracing
        plan = await _plan(ctx, claim)
        if not plan.empty:
            annotations = (claim.get("metadata") or {}).get("annotations")
            # Continue the claim's own trace (claim.create or claim.seen) when it has one.
            parent = context_from_annotations(annotations)
            with ctx.tracer.start_as_current_span("claim.cleanup", context=parent) as span:
                span.set_attribute("k8s.namespace.name", namespace)
                span.set_attribute("k8s.resourceclaim.name", name)
                await _apply(ctx, claim, plan)
        if trace_error is not None:
            raise trace_error
    return Done()


async def _root_trace(ctx: Context, claim: Obj) -> Obj:
    """A claim nobody gave a trace yet (made by a user, not from a template): write its root
    (``claim.seen``), or adopt the allocator's if it was faster (:mod:`draflow_runtime.claimtrace`)."""
    result = await ensure_claim_trace(ctx.kube, ctx.tracer, claim, field_manager=ctx.settings.field_manager,
                                      service="claim-controller")
    if result.rooted:
        ctx.mutations.mutated(result.claim)
        log.debug("claim trace started", traceID=result.trace_id)  # per claim: debug, as the others
    return result.claim


async def _plan(ctx: Context, claim: Obj) -> ClaimPlan:
    namespace = claim["metadata"]["namespace"]
    pods: dict[str, PodState] = {}
    # PodGroup entries (DRAWorkloadResourceClaims): checked like pods; with the gate off, kept.
    groups: dict[str, PodState] | None = {} if ctx.settings.pod_groups else None
    for ref in (claim.get("status") or {}).get("reservedFor") or ():
        name, uid = ref.get("name", ""), ref.get("uid", "")
        if is_pod_reference(ref):
            pods[name] = await ctx.pod_state(namespace, name, uid)
        elif groups is not None and is_pod_group_reference(ref):
            groups[name] = await ctx.pod_group_state(namespace, name, uid)
    plan = plan_claim(claim, pods, groups=groups)
    owner = owning_pod(claim)
    group_owner = owning_pod_group(claim) if groups is not None else None
    deleting = claim["metadata"].get("deletionTimestamp")
    if (owner is None and group_owner is None) or plan.remaining or deleting:
        return plan
    # Only a generated claim with nothing left reserved needs its owner looked up.
    if owner is not None:
        state = pods.get(owner[0], UNKNOWN)
        if state is UNKNOWN:
            state = await ctx.pod_state(namespace, owner[0], owner[1])
    else:
        assert group_owner is not None and groups is not None
        state = groups.get(group_owner[0], UNKNOWN)
        if state is UNKNOWN:
            state = await ctx.pod_group_state(namespace, group_owner[0], group_owner[1])
    return plan_claim(claim, pods, state, groups=groups)


async def _apply(ctx: Context, claim: Obj, plan: ClaimPlan) -> None:
    meta = claim["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    current = claim
    try:
        if plan.drop and plan.remaining:
            current = await _remove_reservations(ctx, current, plan)
        elif plan.drop or plan.deallocate:
            current = await _empty_and_deallocate(ctx, current, plan)
        if plan.release_finalizer:
            current = await _release_finalizer(ctx, current)
        if plan.delete:
            await _delete(ctx, current)
    except NotFound:
        log.info("claim vanished during clean-up", claim=f"{namespace}/{name}")


async def _remove_reservations(ctx: Context, claim: Obj, plan: ClaimPlan) -> Obj:
    meta = claim["metadata"]
    patch = {
        "metadata": {"uid": meta["uid"]},
        "status": {"reservedFor": [{"$patch": "delete", "uid": ref["uid"]} for ref in plan.drop]},
    }
    updated = await _patch_status(ctx, claim, patch, "strategic", "unreserve")
    metrics.RESERVATIONS_REMOVED.inc(len(plan.drop))
    log.debug("reservations removed", pods=[r.get("name") for r in plan.drop], remaining=plan.remaining)
    return updated


async def _empty_and_deallocate(ctx: Context, claim: Obj, plan: ClaimPlan) -> Obj:
    updated = await _write(ctx, "deallocate",
                           clear_allocation(ctx.kube, claim, field_manager=ctx.settings.field_manager))
    if plan.drop:
        metrics.RESERVATIONS_REMOVED.inc(len(plan.drop))
    if plan.deallocate:
        metrics.CLAIMS_DEALLOCATED.inc()
        log.debug("claim deallocated", pods=[r.get("name") for r in plan.drop])
        await ctx.events.deallocated(claim)
    return updated


async def _release_finalizer(ctx: Context, claim: Obj) -> Obj:
    updated = await _write(ctx, "finalizer",
                           release_finalizer(ctx.kube, claim, field_manager=ctx.settings.field_manager))
    if updated is None:
        return claim
    log.debug("delete-protection finalizer removed")
    meta = updated.get("metadata") or {}
    if meta.get("deletionTimestamp") and not meta.get("finalizers"):
        # The last finalizer of a deleted claim: the API server removed the claim with this write. Hidden
        # until the informer drops it, as after a DELETE; recorded as a live claim, it stayed "there" when
        # the informer's delete event came first (a live pod's claim was then not made again).
        ctx.mutations.deleted(updated)
    return updated


async def _delete(ctx: Context, claim: Obj) -> None:
    meta = claim["metadata"]
    try:
        answer = await ctx.kube.delete(RESOURCE_CLAIMS, meta["name"], meta["namespace"],
                                       preconditions={"uid": meta["uid"]})
    except NotFound:
        ctx.mutations.deleted(claim)
        return
    except ApiError:
        metrics.ERRORS.labels(operation="delete").inc()
        raise
    if (answer.get("metadata") or {}).get("finalizers"):
        ctx.mutations.mutated(answer)  # a finalizer holds it: being deleted, still to be released
    else:
        # Gone: hidden from lookups until the informer drops it. The claim's own update events (the
        # finalizer release) enqueue it again meanwhile, and a stale copy was deleted a second time.
        ctx.mutations.deleted(claim)
    metrics.CLAIMS_DELETED.inc()
    log.debug("generated claim deleted, its pod is done")


async def _patch_status(ctx: Context, claim: Obj, patch: Obj, patch_type: str, operation: str) -> Obj:
    meta = claim["metadata"]
    return await _write(ctx, operation, ctx.kube.patch(
        RESOURCE_CLAIMS, meta["name"], patch, meta["namespace"], patch_type=patch_type,  # type: ignore[arg-type]
        subresource="status", field_manager=ctx.settings.field_manager))


async def _write(ctx: Context, operation: str, write: Awaitable[_W]) -> _W:
    """Await one claim write: count failures by ``operation`` and feed the answer to the mutation
    cache. A Conflict is not a failure: the view was stale and the retry decides again."""
    try:
        updated = await write
    except Conflict:
        raise
    except ApiError:
        metrics.ERRORS.labels(operation=operation).inc()
        raise
    if updated is not None:
        ctx.mutations.mutated(updated)
    return updated
