"""The span of one claim in one scheduling attempt, continuing the claim's own trace."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import trace

from draflow_runtime.dra import allocation_results
from draflow_runtime.tracing import context_from_annotations

__all__ = ["claim_context"]


def claim_context(tracer: trace.Tracer, claim: Mapping[str, Any], attempt: trace.Span, node: str | None,
                  allocation: Mapping[str, Any] | None, error: str = "") -> Any:
    """A span for the claim in this attempt, continuing the claim's own trace (annotation
    ``draflow.dev/traceparent``, linked to the attempt) or else a child of the attempt; returns the
    context to continue it in (the claim's write pipeline)."""
    parent = context_from_annotations((claim.get("metadata") or {}).get("annotations"))
    links = [trace.Link(attempt.get_span_context())] if parent is not None else None
    span = tracer.start_span("allocate claim", context=parent, links=links)
    meta = claim["metadata"]
    span.set_attribute("draflow.claim", f"{meta['namespace']}/{meta['name']}")
    if node:
        span.set_attribute("draflow.node", node)
    if allocation is not None:
        span.set_attribute("draflow.devices", [
            f"{r['driver']}/{r['pool']}/{r['device']}"
            for r in allocation_results(allocation)])
    if error:
        span.set_status(trace.Status(trace.StatusCode.ERROR, error[:200]))
    span.end()
    return trace.set_span_in_context(span, parent)
