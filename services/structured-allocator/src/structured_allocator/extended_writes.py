"""The writes of the special claim for extended resources backed by DRA (:mod:`.extres`), upstream's
PreBind for it: create the claim (generated name), which the pipeline then allocates and reserves like
any claim (:meth:`~.binder.Binder.write_claims`), record ``pod.status.extendedResourceClaimStatus``,
and on failure delete the claim again (upstream Unreserve). A claim left by a crash is found as stale
by the next decision and deleted with :func:`delete_claim` (upstream PostFilter)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.context import Context as OtelContext

from draflow_runtime.errors import ApiError, Conflict, NotFound, TransportError
from draflow_runtime.kube import PODS, RESOURCE_CLAIMS
from draflow_runtime.log import get_logger
from draflow_runtime.retry import conflict_attempts
from draflow_runtime.tracing import inject_into_annotations

from .assume import AssumeCache
from .binder import Binder, ClaimPlan, PodPlan, WriteFailed
from .extres import IN_MEMORY_NAME, status_patch

__all__ = [
    "assume_extended",
    "create_extended",
    "delete_claim",
    "delete_stale",
    "move_assumption",
    "record_extended",
    "release_extended",
    "undo_created",
]

log = get_logger(__name__)

_ATTEMPTS = 8


async def create_extended(binder: Binder, plan: PodPlan) -> ClaimPlan:
    """Create the pod's special claim and add it to ``plan.claims`` (allocation + reservation follow)
    and ``plan.created``. Not idempotent by itself (a generated name): see the module docstring."""
    ext = plan.extended
    if ext is None or ext.allocation is None:
        raise WriteFailed("no extended resource claim to create", pod=plan.key)
    meta = ext.claim["metadata"]
    body = {**ext.claim, "metadata": {k: v for k, v in meta.items() if k not in ("name", "uid")}}
    # The claim's trace starts here, as a generated claim's starts in the claim-controller.
    with binder.tracer.start_as_current_span("claim.create", context=OtelContext()) as span:
        span.set_attribute("k8s.namespace.name", meta["namespace"])
        span.set_attribute("k8s.pod.name", plan.pod["metadata"]["name"])
        body["metadata"]["annotations"] = inject_into_annotations(body["metadata"].get("annotations"))
        created = await binder.kube.create(RESOURCE_CLAIMS, body, meta["namespace"],
                                           field_manager=binder.field_manager)
        span.set_attribute("k8s.resourceclaim.name", created["metadata"]["name"])
        context = otel_context.get_current()
    cp = ClaimPlan(created, ext.allocation, True, context)
    plan.created.append(cp)
    plan.claims.append(cp)
    log.info("extended resource claim created", claim=cp.key, pod=plan.key)
    return cp


async def record_extended(binder: Binder, plan: PodPlan, claim_name: str) -> None:
    """``pod.status.extendedResourceClaimStatus``: the claim and which request serves which container's
    resource (merge patch on ``pods/status``, the pod's UID a precondition; idempotent)."""
    if plan.extended is None:
        return
    meta = plan.pod["metadata"]
    await binder.kube.patch(PODS, meta["name"], status_patch(plan.pod, claim_name, plan.extended.mappings),
                            meta["namespace"], subresource="status", field_manager=binder.field_manager)


async def delete_claim(binder: Binder, claim: Mapping[str, Any]) -> None:
    """Deallocate (allocation, reservedFor, devices, finalizer) and delete ``claim`` with a UID
    precondition. Idempotent: a claim already gone or replaced by another UID is left alone."""
    meta = claim["metadata"]
    async for _ in conflict_attempts(_ATTEMPTS):
        try:
            fresh = await binder.kube.get(RESOURCE_CLAIMS, meta["name"], meta["namespace"])
            if fresh["metadata"].get("uid") != meta.get("uid"):
                return
            await binder.clear_allocation(fresh)
            await binder.kube.delete(RESOURCE_CLAIMS, meta["name"], meta["namespace"],
                                     preconditions={"uid": str(meta.get("uid"))})
            log.info("extended resource claim deleted", claim=f"{meta['namespace']}/{meta['name']}")
            return
        except NotFound:
            return
        except Conflict:
            continue
    raise WriteFailed("too many conflicts deleting the claim", claim=f"{meta['namespace']}/{meta['name']}")


def assume_extended(assume: AssumeCache, plan: PodPlan) -> None:
    """Hold the devices of the special claim under its stand-in's uid until it is created."""
    ext = plan.extended
    if ext is not None and ext.allocation is not None:
        meta = ext.claim["metadata"]
        assume.assume(meta["uid"], f"{meta['namespace']}/{IN_MEMORY_NAME}", ext.allocation, plan.key)


def move_assumption(assume: AssumeCache, plan: PodPlan, cp: ClaimPlan) -> None:
    """The claim exists now: its devices are held under its real uid (no await in between)."""
    if plan.extended is not None and cp.allocation is not None:
        assume.release(plan.extended.claim["metadata"]["uid"])
        assume.assume(cp.uid, cp.key, cp.allocation, plan.key)
        assume.reserve(cp.uid, plan.uid)


def release_extended(assume: AssumeCache, plan: PodPlan) -> None:
    if plan.extended is not None:
        assume.release(plan.extended.claim["metadata"]["uid"])


async def undo_created(binder: Binder, plan: PodPlan) -> None:
    """Delete the claims the failed pipeline created (best effort; the claim-controller deletes a
    claim whose owning pod is gone, and the next decision deletes a stale one)."""
    for cp in plan.created:
        try:
            await delete_claim(binder, cp.claim)
        except (ApiError, TransportError, WriteFailed) as err:
            log.warning("deleting the extended resource claim failed", claim=cp.key, error=str(err))
    plan.created.clear()


async def delete_stale(binder: Binder, claim: Mapping[str, Any], then: Callable[[], None]) -> None:
    """Delete a special claim left by an earlier attempt, then ``then()`` (requeue the pod)."""
    try:
        await delete_claim(binder, claim)
    except (ApiError, TransportError, WriteFailed) as err:
        log.warning("deleting a stale extended resource claim failed",
                    claim=f"{claim['metadata']['namespace']}/{claim['metadata']['name']}", error=str(err))
    then()
