"""The span of one claim in one scheduling attempt, continuing the claim's own trace, with links to the
slice-publisher syncs that published the pools its allocation uses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace

from draflow_runtime.dra import allocation_results
from draflow_runtime.tracing import context_from_annotations

__all__ = ["PoolTraces", "claim_context"]


def claim_context(tracer: trace.Tracer, claim: Mapping[str, Any], attempt: trace.Span, node: str | None,
                  allocation: Mapping[str, Any] | None, error: str = "",
                  pool_links: Sequence[trace.Link] = ()) -> Any:
    """A span for the claim in this attempt, continuing the claim's own trace (annotation
    ``draflow.dev/traceparent``, linked to the attempt) or else a child of the attempt; returns the
    context to continue it in (the claim's write pipeline). ``pool_links``: the slice-publisher syncs
    of the pools the allocation uses (:meth:`PoolTraces.links`)."""
    parent = context_from_annotations((claim.get("metadata") or {}).get("annotations"))
    links = [trace.Link(attempt.get_span_context())] if parent is not None else []
    span = tracer.start_span("allocate claim", context=parent, links=[*links, *pool_links])
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


class PoolTraces:
    """Which slice-publisher sync last wrote each slice (the span in the slice's
    ``draflow.dev/traceparent``), by pool: an allocation's span links the syncs that published the pools
    it uses. Fed by the slice informer (:meth:`on_slice`); a slice without the annotation (another
    publisher) links nothing."""

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
