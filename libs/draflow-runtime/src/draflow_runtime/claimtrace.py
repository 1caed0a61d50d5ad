"""The root of a claim's trace when draflow did not create the claim (a user's claim, an extended
resource claim of an older allocator...): written once, by whichever service sees the claim first.

One trace per claim means one root. A claim the claim-controller generates from a template gets its root
at creation (``claim.create``, annotation in the create body). Any other claim has no
``draflow.dev/traceparent`` annotation until draflow gives it one: the claim-controller (on the claim's
first informer event) or the allocator (in the write pipeline of its first allocation), whichever comes
first, runs :func:`ensure_claim_trace`. Both may run it at the same moment; only one root may survive:

1. The claim as the caller has it already carries a traceparent: adopt it, write nothing.
2. Otherwise start a root span ``claim.seen`` but do **not** end it (an OpenTelemetry span is exported only
   when it ends) and write its traceparent with a JSON merge patch on the claim that carries
   ``metadata.uid`` and ``metadata.resourceVersion``: a compare-and-swap. The API server accepts it only
   against the version the caller read, so of two writers that both saw "no annotation", one loses with
   ``Conflict``.
3. The winner ends its span: the trace's one root is exported, the annotation names it.
4. The loser never ends its span (it is dropped, never exported: no second root), re-reads the claim and
   adopts the winner's traceparent from it. A ``Conflict`` from any other change of the claim (status
   written meanwhile) re-reads as well and tries again.

The caller's spans made before the root existed (the allocator decides before it writes) are not lost:
the caller links them from its first span in the claim's trace, or from the root (``links``).

Idempotent: a claim with an annotation is never written; with tracing off (no valid span context)
nothing is written either. An ambiguous failure (time-out: the write may
have landed) ends the span with an error status, so its trace is not lost either; the next run adopts
whatever the claim carries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context

from .errors import Conflict, NotFound
from .kube import RESOURCE_CLAIMS, KubeClient
from .retry import conflict_attempts
from .tracing import context_from_annotations, inject_into_annotations

__all__ = ["ROOT_SPAN", "ClaimTrace", "TraceRootRace", "ensure_claim_trace", "has_trace"]

#: Name of the root span of a claim draflow did not create.
ROOT_SPAN = "claim.seen"

_ATTEMPTS = 8

Obj = Mapping[str, Any]


class TraceRootRace(Exception):
    """Every compare-and-swap attempt lost and the claim still has no traceparent (the claim changes all
    the time); the caller retries later."""


@dataclass(frozen=True)
class ClaimTrace:
    """The claim's trace: ``context`` to start spans in, ``claim`` the newest copy seen (after a write:
    the claim as written), ``rooted`` True when this call wrote the root, False when it adopted one."""

    context: Context
    claim: dict[str, Any]
    rooted: bool

    @property
    def trace_id(self) -> str:
        """The trace ID, 32 hex digits."""
        return format(trace.get_current_span(self.context).get_span_context().trace_id, "032x")


def has_trace(claim: Obj) -> bool:
    """The claim carries a valid ``draflow.dev/traceparent`` annotation."""
    return context_from_annotations((claim.get("metadata") or {}).get("annotations")) is not None


async def ensure_claim_trace(kube: KubeClient, tracer: trace.Tracer, claim: Obj, *, field_manager: str,
                             service: str, links: Sequence[trace.Link] = ()) -> ClaimTrace:
    """The claim's trace context, writing its root first if it has none (see the module docstring).

    ``claim``: the caller's copy (a cache's: never modified). ``service``: who saw it first (span
    attribute ``draflow.first_seen_by``). ``links``: spans of the caller's made before the root (on the
    root, if this call writes it). Raises ``NotFound`` (claim gone or replaced), :class:`TraceRootRace`,
    or any other ``ApiError``/``TransportError`` of the write.
    """
    current: dict[str, Any] = dict(claim)
    meta = current["metadata"]
    namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
    async for attempt in conflict_attempts(_ATTEMPTS):
        if attempt:
            current = await kube.get(RESOURCE_CLAIMS, name, namespace)
            if current["metadata"].get("uid") != uid:
                raise NotFound(404, "NotFound", f"claim {namespace}/{name} was replaced (UID changed)")
        ctx = context_from_annotations(current["metadata"].get("annotations"))
        if ctx is not None:
            return ClaimTrace(ctx, current, rooted=False)
        span = tracer.start_span(ROOT_SPAN, context=Context(), links=links, attributes={
            "k8s.namespace.name": namespace, "k8s.resourceclaim.name": name,
            "k8s.resourceclaim.uid": uid, "draflow.first_seen_by": service,
        })
        if not span.get_span_context().is_valid:  # tracing off (OTEL_SDK_DISABLED, no provider):
            return ClaimTrace(Context(), current, rooted=False)  # nothing to write, never a no-op PATCH
        ctx = trace.set_span_in_context(span, Context())
        annotations = inject_into_annotations({}, ctx)
        patch = {"metadata": {"uid": uid, "resourceVersion": current["metadata"]["resourceVersion"],
                              "annotations": annotations}}
        try:
            written = await kube.patch(RESOURCE_CLAIMS, name, patch, namespace, field_manager=field_manager)
        except Conflict:
            continue  # lost (or the claim changed): never end this span, re-read and adopt / retry
        except Exception as exc:
            # The write may have landed: keep the span (its trace may be the claim's).
            span.set_status(trace.Status(trace.StatusCode.ERROR, f"annotation write failed: {exc}"[:200]))
            span.end()
            raise
        span.end()
        return ClaimTrace(ctx, written, rooted=True)
    raise TraceRootRace(f"claim {namespace}/{name}: no trace root after {_ATTEMPTS} attempts")
