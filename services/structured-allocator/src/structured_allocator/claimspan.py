"""The span of one claim in one scheduling attempt, continuing the claim's own trace, and the links of a
claim's allocation write to the slice-publisher syncs that published the pools it uses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace

from draflow_runtime.dra import allocation_results
from draflow_runtime.tracing import context_from_annotations

__all__ = ["PoolTraces", "claim_context", "link_pools"]


def claim_context(tracer: trace.Tracer, claim: Mapping[str, Any], attempt: trace.Span, node: str | None,
                  allocation: Mapping[str, Any] | None, error: str = "") -> Any:
    """A span for the claim in this attempt, continuing the claim's own trace (annotation
    ``draflow.dev/traceparent``, linked to the attempt) or else a child of the attempt; returns the
    context to continue it in (the claim's write pipeline). A claim without a trace yet (a user's claim
    the allocator sees first) gets its root in the write pipeline; its ``write claim`` span links this
    one and the pools (:func:`link_pools`)."""
    parent = context_from_annotations((claim.get("metadata") or {}).get("annotations"))
    links = [trace.Link(attempt.get_span_context())] if parent is not None else []
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


def link_pools(span: trace.Span, links: Sequence[trace.Link]) -> None:
    """Add ``links`` (:meth:`PoolTraces.links`) to ``span``: the ``write claim`` span of an allocation,
    which is in the claim's own trace whoever rooted it. (The decision's ``allocate claim`` span is not:
    for a claim without a trace when the allocator decided, it is in the pod's attempt trace.)"""
    for link in links:
        span.add_link(link.context, link.attributes)


class PoolTraces:
    """Which slice-publisher sync last wrote each slice (the span in the slice's
    ``draflow.dev/traceparent``), by pool: an allocation's write links the syncs that published the
    pools it uses (:func:`link_pools`). Fed by the slice informer (:meth:`on_slice`); a slice without
    the annotation (another publisher) links nothing."""

    def __init__(self) -> None:
        self._by_pool: dict[tuple[str, str], dict[str, trace.SpanContext]] = {}

    def on_slice(self, event: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        obj = new if new is not None else old
        if obj is None:
            return
        spec = obj.get("spec") or {}
        key = (str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", "")))
        name = str(obj["metadata"]["name"])
        ctx = context_from_annotations(obj["metadata"].get("annotations")) if new is not None else None
        slices = self._by_pool.setdefault(key, {})
        if ctx is None:
            slices.pop(name, None)
        else:
            slices[name] = trace.get_current_span(ctx).get_span_context()
        if not slices:
            del self._by_pool[key]

    def links(self, allocation: Mapping[str, Any] | None) -> list[trace.Link]:
        """One link per distinct sync span of the pools ``allocation`` uses (attribute ``draflow.pool``)."""
        out: dict[tuple[int, int], trace.Link] = {}
        for driver, pool in sorted({(r["driver"], r["pool"]) for r in allocation_results(allocation)}):
            for sc in self._by_pool.get((driver, pool), {}).values():
                out.setdefault((sc.trace_id, sc.span_id),
                               trace.Link(sc, {"draflow.pool": f"{driver}/{pool}"}))
        return list(out.values())
