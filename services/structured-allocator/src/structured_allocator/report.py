"""What users and neighbours see: pod conditions, Kubernetes Events and NATS claim events.

* Unschedulable pod: ``PodScheduled=False`` (reason ``Unschedulable``, the explanation's message) with a
  strategic-merge patch of ``pods/status`` (conditions merge by type), plus a Warning Event
  ``FailedScheduling``; written only when the message changed, so retries do not flood the API.
* NATS lifecycle events (:mod:`draflow_runtime.lifecycle`, protobuf ``ClaimEvent`` on the one
  ``DRAFLOW_EVENTS`` stream, the claim's trace context in the headers): ``allocated`` (pod, node, the
  allocation's devices), ``reserved`` (a pod added to an already-allocated claim's ``reservedFor``) and
  ``allocation_failed`` (reason ``Unschedulable``, message = the explanation).
* A user's claim that fits nowhere and has no trace yet (the claim-controller has not seen it: down, slow
  or watching other namespaces) gets its root ``claim.seen`` here, linked to the attempt's span for it:
  no write pipeline will root it (:func:`draflow_runtime.claimtrace.ensure_claim_trace`; the
  claim-controller may win, then its root is adopted). Its ``allocation_failed`` event continues it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context

from draflow_runtime import lifecycle
from draflow_runtime.bus import EventBus
from draflow_runtime.claimtrace import TraceRootRace, ensure_claim_trace, has_trace
from draflow_runtime.dra import allocation_results
from draflow_runtime.errors import ApiError, NotFound, TransportError
from draflow_runtime.events import EventRecorder
from draflow_runtime.kube import PODS, KubeClient
from draflow_runtime.log import get_logger
from draflow_runtime.tracing import attach, detach

__all__ = ["Reporter"]

log = get_logger(__name__)


COMPONENT = "structured-allocator"


class Reporter:
    def __init__(self, kube: KubeClient, recorder: EventRecorder, field_manager: str,
                 bus: EventBus | None, tracer: trace.Tracer | None = None) -> None:
        """``tracer``: the one of the claims' roots (None: an unplaceable claim is never rooted here)."""
        self.kube = kube
        self.tracer = tracer
        self.recorder = recorder
        self.field_manager = field_manager
        self.bus = bus if bus is not None and bus.enabled else None
        self._reported: dict[str, str] = {}  # pod key -> last unschedulable message written

    def forget(self, pod_key: str) -> None:
        self._reported.pop(pod_key, None)

    async def unschedulable(self, pod: Mapping[str, Any], message: str,
                            claims: list[Mapping[str, Any]],
                            contexts: Sequence[Context | None] = ()) -> None:
        """Condition + Warning Event + allocation_failed events, once per distinct message.
        ``contexts[i]``: the trace context of ``claims[i]``'s span in this attempt (its event's trace)."""
        meta = pod["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        if self._reported.get(key) == message:
            return
        self._reported[key] = message
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {"status": {"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": message, "lastTransitionTime": now,
        }]}}
        try:
            await self.kube.patch(PODS, meta["name"], body, meta["namespace"], patch_type="strategic",
                                  subresource="status", field_manager=self.field_manager)
        except NotFound:
            return
        except (ApiError, TransportError) as err:
            self._reported.pop(key, None)
            log.warning("pod condition not written", pod=key, error=str(err))
        await self.recorder.event(dict(pod), "Warning", "FailedScheduling", message,
                                  action="Scheduling")
        for i, claim in enumerate(claims):
            token = attach(await self._claim_trace(claim, contexts[i] if i < len(contexts) else None))
            try:
                await self._publish("allocation_failed", claim, pod=dict(pod), node="",
                                    reason="Unschedulable", message=message)
            finally:
                detach(token)

    async def _claim_trace(self, claim: Mapping[str, Any], decided: Context | None) -> Context | None:
        """The claim's trace context for its event: its own; for a claim without a trace, the root this
        writes (linked to ``decided``, the attempt's span for the claim: see the module docstring);
        ``decided`` itself when there is nothing to root (a claim being deleted, the extended resource
        claim not created yet) or the root write failed (logged)."""
        meta = claim.get("metadata") or {}
        if self.tracer is None or has_trace(claim) or not meta.get("uid") or meta.get("deletionTimestamp"):
            return decided
        span = trace.get_current_span(decided).get_span_context() if decided is not None else None
        try:
            joined = await ensure_claim_trace(
                self.kube, self.tracer, claim, field_manager=self.field_manager, service=COMPONENT,
                links=[trace.Link(span)] if span is not None and span.is_valid else [])
        except NotFound:
            return decided
        except (ApiError, TransportError, TraceRootRace) as err:
            log.warning("claim trace root not written", claim=f"{meta.get('namespace')}/{meta.get('name')}",
                        error=str(err))
            return decided
        return joined.context

    async def allocated(self, claim: Mapping[str, Any], allocation: Mapping[str, Any] | None,
                        pod: Mapping[str, Any], node: str) -> None:
        """``claim`` (the copy the decision saw) was allocated ``allocation`` for ``pod`` on ``node``."""
        results = allocation_results(allocation)
        await self._publish("allocated", claim, pod=dict(pod), node=node, devices=results)

    async def reserved(self, claim: Mapping[str, Any], pod: Mapping[str, Any], node: str) -> None:
        """``pod`` was added to the ``reservedFor`` of the already-allocated (shared) ``claim``."""
        await self._publish("reserved", claim, pod=dict(pod), node=node)

    async def _publish(self, kind: str, claim: Mapping[str, Any], **fields: Any) -> None:
        # An event is a courtesy: never fail a placement for it.
        await lifecycle.announce_claim_event(self.bus, kind, claim, **fields)
