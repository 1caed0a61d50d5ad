"""API writes of one placement decision: finalizer, ``status.allocation`` + ``reservedFor``, binding.

The pipeline for one pod (upstream: PreBind + Bind), run off the decision loop::

    for each claim:  no trace yet      -> its root span + traceparent annotation (compare-and-swap,
                                         draflow_runtime.claimtrace; the claim-controller may win)
                     newly allocated  -> finalizer (merge patch, resourceVersion precondition), then
                                         status PUT (allocation + reservedFor), compare-and-swap,
                                         retried on Conflict from a fresh GET
                     already allocated -> strategic-merge patch adding the pod to status.reservedFor
                                         (listMap keyed by uid: idempotent, no fresh copy needed)
    hooks.after_status_write(plan)     fault-injection seam for tests
    (the scheduler waits for binding conditions here, holding no write slot: binding_wait.py)
    bind                               POST pods/<name>/binding (uid precondition)

The ``reservedFor`` entry is the pod, or (DRAWorkloadResourceClaims) the pod's PodGroup for a claim the
group lists (``ClaimPlan.consumer``, upstream ``BindTo``); undoing a placement never removes a PodGroup's
entry (upstream Unreserve: other members may use the claim), so such a claim stays allocated for the group.

Every step is **idempotent**: a retry after an ambiguous failure (timeout, crash) finds its own earlier
write and goes on (the same devices already allocated, the pod already reserved or bound to the same
node). A claim allocated meanwhile by someone else with different devices fails the pipeline
(:class:`AllocatedElsewhere`). When a step fails, :meth:`Binder.undo` takes back what this pipeline
did: the pod leaves ``reservedFor``; a claim that it allocated and that nobody else reserved is
deallocated again (allocation and finalizer removed), so no device stays held by a pod that was
never bound. :meth:`Binder.deallocate_unused` is PostFilter's write (no node fits: give back a claim
nobody else uses). The special claim of extended resources backed by DRA: :mod:`.extended_writes`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context

from draflow_runtime.claimtrace import TraceRootRace, ensure_claim_trace, has_trace
from draflow_runtime.claimwrites import deallocate
from draflow_runtime.dra import (
    DELETE_PROTECTION_FINALIZER,
    RESERVED_FOR_MAX,
    allocation_results,
    pod_consumer_ref,
)
from draflow_runtime.errors import ApiError, Conflict, DraflowError, NotFound, TransportError
from draflow_runtime.keyedlocks import KeyedLocks
from draflow_runtime.kube import PODS, RESOURCE_CLAIMS, KubeClient
from draflow_runtime.log import get_logger
from draflow_runtime.retry import conflict_attempts

from .extres import ExtendedClaim

__all__ = [
    "AllocatedElsewhere",
    "Binder",
    "ClaimPlan",
    "Hooks",
    "PodPlan",
    "WriteFailed",
    "same_devices",
]

log = get_logger(__name__)

COMPONENT = "structured-allocator"
_CAS_ATTEMPTS = 8


class WriteFailed(DraflowError):
    """A write pipeline step failed; carries the claim (or pod) it failed on."""

    def __init__(self, message: str, *, claim: str = "", pod: str = "") -> None:
        super().__init__(message)
        self.claim = claim
        self.pod = pod


class AllocatedElsewhere(WriteFailed):
    """The claim got a different allocation meanwhile (another writer); retry from a fresh decision."""


@dataclass
class ClaimPlan:
    claim: Mapping[str, Any]  # the informer's copy at decision time (never mutated; replaced by the
    # copy the trace root write returned, for a claim that had no trace)
    allocation: dict[str, Any] | None  # new allocation to write; None: already allocated
    reserve: bool  # the pod must be added to reservedFor
    context: Context | None = None  # trace context of the claim's span
    written_version: str = ""  # the claim's resourceVersion after this plan's write
    consumer: dict[str, str] | None = None  # reservedFor entry: the pod's PodGroup; None: the pod itself
    # ``allocation`` was decided by an earlier member of the same pod-group cycle and is written by
    # that member's pipeline too: whichever write lands first allocates, the other finds it (idempotent).
    shares_pending: bool = False

    def consumer_ref(self, pod: Mapping[str, Any]) -> dict[str, str]:
        """The ``reservedFor`` entry this plan writes (upstream ``BindTo``)."""
        return self.consumer if self.consumer is not None else pod_consumer_ref(pod)

    def consumer_uid(self, pod_uid: str) -> str:
        return self.consumer["uid"] if self.consumer is not None else pod_uid

    @property
    def key(self) -> str:
        meta = self.claim["metadata"]
        return f"{meta['namespace']}/{meta['name']}"

    @property
    def uid(self) -> str:
        return str(self.claim["metadata"]["uid"])


@dataclass
class PodPlan:
    pod: Mapping[str, Any]
    node: str
    claims: list[ClaimPlan]
    bind: bool = True  # False for pods already bound (NATS allocate requests)
    done: list[tuple[ClaimPlan, str]] = field(default_factory=list)  # (claim, "allocated"|"reserved")
    extended: ExtendedClaim | None = None  # the special claim to create (extended resources)
    created: list[ClaimPlan] = field(default_factory=list)  # claims this pipeline created
    node_allocatable: Sequence[dict[str, Any]] = ()  # pod.status.nodeAllocatableResourceClaimStatuses

    @property
    def key(self) -> str:
        meta = self.pod["metadata"]
        return f"{meta['namespace']}/{meta['name']}"

    @property
    def uid(self) -> str:
        return str(self.pod["metadata"]["uid"])


@dataclass
class Hooks:
    """Test seams. ``after_status_write(plan)`` runs after every claim write of a pod and before the
    binding (e.g. to cancel the allocator there and simulate a crash)."""

    after_status_write: Callable[[PodPlan], Awaitable[None]] | None = None


def _device_keys(allocation: Mapping[str, Any] | None) -> list[tuple[str, str, str, str]]:
    return sorted((r.get("request", ""), r["driver"], r["pool"], r["device"])
                  for r in allocation_results(allocation))


def same_devices(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    return _device_keys(a) == _device_keys(b)


class Binder:
    def __init__(self, kube: KubeClient, field_manager: str, tracer: trace.Tracer,
                 hooks: Hooks | None = None) -> None:
        self.kube = kube
        self.field_manager = field_manager
        self.tracer = tracer
        self.hooks = hooks or Hooks()
        self._claim_turns = KeyedLocks()  # by claim uid

    @contextlib.asynccontextmanager
    async def shared_claim_turn(self, plan: PodPlan) -> AsyncIterator[None]:
        """Hold the turn of every already-allocated claim ``plan`` adds its pod to (uid order, no
        deadlock). Pods sharing a claim patch its ``reservedFor`` one at a time: concurrent patches of
        one object make the API server retry each against the others' writes until requests time out
        (seen with 300 pods on one claim). Taken before a write slot, so waiting holds none."""
        uids = sorted({cp.uid for cp in plan.claims
                       if (cp.allocation is None and cp.reserve) or cp.shares_pending})
        async with contextlib.AsyncExitStack() as stack:
            for uid in uids:
                await stack.enter_async_context(self._claim_turns.hold(uid))
            yield

    # -- the pipeline --------------------------------------------------------------------------------

    async def write_claims(self, plan: PodPlan,
                           on_claim_written: Callable[[ClaimPlan], Awaitable[None]]) -> None:
        """Write every claim of ``plan`` (then the ``after_status_write`` hook). Raises
        :class:`WriteFailed`, ``ApiError`` or ``TransportError``; ``plan.done`` lists what was written
        (for :meth:`undo`)."""
        for cp in plan.claims:
            pod_ref = cp.consumer_ref(plan.pod)
            links = await self._join_claim_trace(cp)
            with self.tracer.start_as_current_span("write claim", context=cp.context, links=links) as span:
                span.set_attribute("draflow.claim", cp.key)
                span.set_attribute("draflow.pod", plan.key)
                written: Mapping[str, Any] | None = None
                if cp.allocation is not None:
                    plan.done.append((cp, "allocated"))  # before: a half-done write is undone too
                    written = await self._allocate(cp, pod_ref)
                elif cp.reserve:
                    written = await self._reserve(cp, pod_ref)
                    plan.done.append((cp, "reserved"))
                if written is not None:
                    cp.written_version = str((written.get("metadata") or {}).get("resourceVersion") or "")
                await on_claim_written(cp)
        if self.hooks.after_status_write is not None:
            await self.hooks.after_status_write(plan)

    async def _join_claim_trace(self, cp: ClaimPlan) -> list[trace.Link]:
        """A claim without a trace (made by a user) gets its root here unless the claim-controller was
        faster (:func:`draflow_runtime.claimtrace.ensure_claim_trace`: one root, the loser adopts). The
        plan then continues the claim's trace; the span made at decision time (in the attempt's trace)
        is linked. A failure to write the root is logged and does not stop the placement."""
        if has_trace(cp.claim) or not (cp.allocation is not None or cp.reserve):
            return []
        before = trace.get_current_span(cp.context).get_span_context() if cp.context is not None else None
        try:
            joined = await ensure_claim_trace(self.kube, self.tracer, cp.claim,
                                              field_manager=self.field_manager, service=COMPONENT)
        except (ApiError, TransportError, TraceRootRace) as err:
            log.warning("claim trace root not written", claim=cp.key, error=str(err))
            return []
        cp.claim, cp.context = joined.claim, joined.context  # the fresher copy: its resourceVersion
        return [trace.Link(before)] if before is not None and before.is_valid else []

    async def _allocate(self, cp: ClaimPlan, pod_ref: dict[str, str]) -> Mapping[str, Any]:
        """Finalizer, then allocation + reservedFor (``pod_ref``: the pod, or its PodGroup) in one status
        compare-and-swap; returns the claim as written. Idempotent."""
        claim: Mapping[str, Any] = cp.claim
        meta = claim["metadata"]
        async for attempt in conflict_attempts(_CAS_ATTEMPTS):
            try:
                if attempt:  # after a Conflict and the backoff: decide again from fresh state
                    claim = await self.kube.get(RESOURCE_CLAIMS, meta["name"], meta["namespace"])
                if DELETE_PROTECTION_FINALIZER not in (claim["metadata"].get("finalizers") or []):
                    claim = await self._add_finalizer(claim)
                return await self._write_allocation(cp, claim, pod_ref)
            except Conflict:
                continue
        raise WriteFailed("too many conflicts writing the allocation", claim=cp.key)

    async def _add_finalizer(self, claim: Mapping[str, Any]) -> dict[str, Any]:
        meta = claim["metadata"]
        if meta.get("deletionTimestamp"):
            raise WriteFailed("claim is being deleted", claim=f"{meta['namespace']}/{meta['name']}")
        body = {"metadata": {"resourceVersion": meta["resourceVersion"],
                             "finalizers": [*(meta.get("finalizers") or []), DELETE_PROTECTION_FINALIZER]}}
        return await self.kube.patch(RESOURCE_CLAIMS, meta["name"], body, meta["namespace"],
                                     field_manager=self.field_manager)

    async def _write_allocation(self, cp: ClaimPlan, claim: Mapping[str, Any],
                                pod_ref: dict[str, str]) -> dict[str, Any]:
        meta = claim["metadata"]
        if meta.get("uid") != cp.uid:
            raise WriteFailed("claim was replaced (UID changed)", claim=cp.key)
        if meta.get("deletionTimestamp"):
            raise WriteFailed("claim is being deleted", claim=cp.key)
        status = dict(claim.get("status") or {})
        reserved = list(status.get("reservedFor") or [])
        existing = status.get("allocation")
        if existing and not same_devices(existing, cp.allocation):
            raise AllocatedElsewhere("claim was allocated elsewhere meanwhile", claim=cp.key)
        if existing and any(r.get("uid") == pod_ref["uid"] for r in reserved):
            return dict(claim)  # our own earlier write (a retry)
        if len(reserved) >= RESERVED_FOR_MAX:
            raise WriteFailed(f"claim is already reserved for {RESERVED_FOR_MAX} consumers", claim=cp.key)
        status["allocation"] = existing or cp.allocation
        status["reservedFor"] = [*reserved, pod_ref]
        body = {**claim, "status": status}
        return await self.kube.replace(RESOURCE_CLAIMS, body, subresource="status",
                                       field_manager=self.field_manager)

    async def _reserve(self, cp: ClaimPlan, pod_ref: dict[str, str]) -> dict[str, Any]:
        """Add the pod to an allocated claim's reservedFor: a strategic-merge patch keyed by uid (seed
        001: concurrent pods need no fresh copy). The uid in the patch is a precondition; the API server
        rejects it (Invalid) when the claim is not allocated, is being deleted, or has 256 entries."""
        meta = cp.claim["metadata"]
        body = {"metadata": {"uid": cp.uid}, "status": {"reservedFor": [pod_ref]}}
        return await self.kube.patch(RESOURCE_CLAIMS, meta["name"], body, meta["namespace"],
                                     patch_type="strategic", subresource="status",
                                     field_manager=self.field_manager)

    async def bind(self, pod: Mapping[str, Any], node: str) -> None:
        """POST the Binding; a pod already bound to ``node`` counts as success (idempotent)."""
        meta = pod["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        with self.tracer.start_as_current_span("bind pod") as span:
            span.set_attribute("draflow.pod", f"{meta['namespace']}/{meta['name']}")
            span.set_attribute("draflow.node", node)
            try:
                await self.kube.request("POST", PODS.path(meta["namespace"], meta["name"], "binding"), body)
            except Conflict:
                fresh = await self.kube.get(PODS, meta["name"], meta["namespace"])
                if (fresh.get("spec") or {}).get("nodeName") != node:
                    raise
                log.info("pod was already bound", pod=f"{meta['namespace']}/{meta['name']}", node=node)

    # -- undo ------------------------------------------------------------------------------------------

    async def undo(self, plan: PodPlan) -> dict[str, Mapping[str, Any] | None]:
        """Take back what ``plan`` wrote (best effort, each claim on its own; failures are logged and the
        claim-controller's reservedFor clean-up is the backstop).

        Returns, per claim UID whose allocation this pipeline tried to write, what the API server has
        now when that is not "unallocated": the claim as read (left allocated: someone else's
        allocation, or an earlier write of ours whose answer was lost), or ``None`` when the undo
        failed and nobody knows (the write may have landed). The caller must not hand out the devices
        of those claims on the strength of its informer alone."""
        pod_uid = plan.pod["metadata"]["uid"]
        known: dict[str, Mapping[str, Any] | None] = {}
        for cp, what in reversed(plan.done):
            try:
                if what == "allocated":
                    left = await self.deallocate(cp, pod_uid)
                    if left is not None:
                        known[cp.uid] = left
                elif cp.consumer is None:
                    # A PodGroup's reservation stays (upstream Unreserve): other members may use the claim.
                    await self.unreserve(cp, pod_uid)
            except (ApiError, TransportError, WriteFailed) as err:
                log.warning("undo failed", claim=cp.key, pod=plan.key, error=str(err))
                if what == "allocated":
                    known[cp.uid] = None
        plan.done.clear()
        return known

    async def unreserve(self, cp: ClaimPlan, pod_uid: str) -> None:
        await self.remove_reservation(cp.claim, pod_uid)

    async def remove_reservation(self, claim: Mapping[str, Any], consumer_uid: str) -> None:
        """Drop one ``reservedFor`` entry by UID: a strategic-merge ``$patch: delete`` (no fresh copy
        needed; the claim's UID is a precondition). A claim that is gone counts as done."""
        meta = claim["metadata"]
        body = {"metadata": {"uid": meta["uid"]},
                "status": {"reservedFor": [{"$patch": "delete", "uid": consumer_uid}]}}
        with contextlib.suppress(NotFound):
            await self.kube.patch(RESOURCE_CLAIMS, meta["name"], body, meta["namespace"],
                                  patch_type="strategic", subresource="status",
                                  field_manager=self.field_manager)

    async def deallocate(self, cp: ClaimPlan, pod_uid: str) -> Mapping[str, Any] | None:
        """Remove the pod from reservedFor; if nobody else is left and the allocation is the one this
        pipeline wrote, clear allocation and finalizer too (compare-and-swap, retried on Conflict).
        Returns the claim as read when it stays allocated (used by others, or other devices), else None."""
        meta = cp.claim["metadata"]
        async for _ in conflict_attempts(_CAS_ATTEMPTS):
            try:
                claim = await self.kube.get(RESOURCE_CLAIMS, meta["name"], meta["namespace"])
            except NotFound:
                return None
            if claim["metadata"].get("uid") != cp.uid:
                return None
            status = claim.get("status") or {}
            reserved = [r for r in status.get("reservedFor") or [] if r.get("uid") != pod_uid]
            allocation = status.get("allocation")
            try:
                if allocation and (reserved or not same_devices(allocation, cp.allocation)):
                    if len(reserved) != len(status.get("reservedFor") or []):
                        await self.unreserve(cp, pod_uid)
                    return claim
                await self.clear_allocation(claim)
                log.info("claim deallocated after a failed placement", claim=cp.key)
                return None
            except Conflict:
                continue
        raise WriteFailed("too many conflicts deallocating", claim=cp.key)

    async def deallocate_unused(self, seen: Mapping[str, Any], pod_uid: str) -> bool:
        """PostFilter: deallocate ``seen`` (a cached claim) if it still has the same allocation and is
        reserved for nobody or only ``pod_uid`` (PodGroupPostFilter: the PodGroup's UID); clears
        allocation, reservedFor and devices, then drops
        the finalizer, as the claim-controller does. Idempotent: True when the claim is (now)
        unallocated, False when it changed meanwhile (in use again, other devices, replaced)."""
        meta = seen["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        async for _ in conflict_attempts(_CAS_ATTEMPTS):
            try:
                claim = await self.kube.get(RESOURCE_CLAIMS, meta["name"], meta["namespace"])
            except NotFound:
                return True
            status = claim.get("status") or {}
            if claim["metadata"].get("uid") != meta.get("uid"):
                return False
            if not status.get("allocation"):
                return True
            if not same_devices(status["allocation"], (seen.get("status") or {}).get("allocation")) or \
                    any(r.get("uid") != pod_uid for r in status.get("reservedFor") or []):
                return False
            try:
                await self.clear_allocation(claim)
            except Conflict:
                continue
            log.info("claim deallocated: no node fits the pod", claim=key)
            return True
        raise WriteFailed("too many conflicts deallocating", claim=key)

    async def clear_allocation(self, claim: Mapping[str, Any]) -> None:
        """Deallocate ``claim`` the one shared way (:func:`draflow_runtime.claimwrites.deallocate`): a
        status merge patch clearing allocation, reservedFor and devices (compare-and-swap on the
        resourceVersion of ``claim``; raises Conflict), then the finalizer while it stays unallocated."""
        await deallocate(self.kube, claim, field_manager=self.field_manager)
