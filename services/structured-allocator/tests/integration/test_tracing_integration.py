"""The allocator's part of "one trace per claim", against the real kube-apiserver: a claim nobody gave a
trace gets its root from the allocator when the allocator sees it first, and the allocation's write, in
the claim's trace, is linked to the slice-publisher sync that published the pool it used."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sa_kit import Kit, eventually

from draflow_runtime.claimtrace import ROOT_SPAN
from draflow_runtime.kube import RESOURCE_CLAIMS
from draflow_runtime.tracing import TRACEPARENT_ANNOTATION

pytestmark = pytest.mark.integration

SYNC_TRACE, SYNC_SPAN = "5e" * 16, "5a" * 8  # the span of the slice-publisher sync that wrote the slice


def provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    p = TracerProvider()
    p.add_span_processor(SimpleSpanProcessor(exporter))
    return p, exporter


def named(spans: Any, name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


async def test_the_allocator_roots_a_user_claim_it_sees_first_and_links_the_pool_sync(kit: Kit) -> None:
    node = await kit.node("n")
    await kit.slice(node, 2, annotations={TRACEPARENT_ANNOTATION: f"00-{SYNC_TRACE}-{SYNC_SPAN}-01"})
    await kit.device_class_()
    await kit.claim("shared")  # a user's claim, no claim-controller here: the allocator sees it first
    tp, exporter = provider()
    await kit.start(tracer_provider=tp)
    for pod in ("p0", "p1"):
        await kit.pod(pod, {"gpu": {"resourceClaimName": "shared"}})
        assert await kit.wait_bound(pod) == node

    claim = await kit.kube.get(RESOURCE_CLAIMS, "shared", kit.namespace)
    _, trace_id, span_id, _ = claim["metadata"]["annotations"][TRACEPARENT_ANNOTATION].split("-")
    spans = await eventually(lambda: (lambda s: s if len(named(s, "write claim")) >= 2 else None)(
        exporter.get_finished_spans()), what="both pods' claim writes exported")

    (root,) = named(spans, ROOT_SPAN)  # one root, written once for both pods
    assert format(root.context.trace_id, "032x") == trace_id
    assert format(root.context.span_id, "016x") == span_id
    assert root.parent is None and root.attributes is not None
    assert root.attributes["draflow.first_seen_by"] == "structured-allocator"
    writes = named(spans, "write claim")
    assert {s.attributes["draflow.pod"] for s in writes if s.attributes} == {f"{kit.namespace}/p0",
                                                                             f"{kit.namespace}/p1"}
    assert all(format(s.context.trace_id, "032x") == trace_id for s in writes)
    # The first pod's allocate-claim span was made before the root existed (in the attempt's trace):
    # the write that rooted the claim links it instead of losing it.
    first = next(s for s in writes if s.attributes and s.attributes["draflow.pod"].endswith("/p0"))
    decided = {(s.context.trace_id, s.context.span_id) for s in named(spans, "allocate claim")}
    assert any((link.context.trace_id, link.context.span_id) in decided for link in first.links)
    # The claim's own trace links the slice-publisher sync of the pool its devices came from: the write
    # of the allocation does (the decision span that chose them is in the attempt's trace here).
    assert pool_links(first) == [(SYNC_TRACE, SYNC_SPAN, f"{kit.driver}/{node}")]
    (chose,) = [s for s in named(spans, "allocate claim")
                if s.attributes and "draflow.devices" in s.attributes]
    assert format(chose.context.trace_id, "032x") != trace_id
    second = next(s for s in writes if s is not first)
    assert pool_links(second) == []  # only reserved for p1: it allocated nothing


def pool_links(span: ReadableSpan) -> list[tuple[str, str, Any]]:
    """(trace ID, span ID, ``draflow.pool``) of the span's links that name a pool."""
    return [(format(link.context.trace_id, "032x"), format(link.context.span_id, "016x"),
             link.attributes["draflow.pool"]) for link in span.links
            if link.attributes and "draflow.pool" in link.attributes]


async def test_the_allocator_roots_a_user_claim_that_fits_nowhere_and_links_its_failed_attempt(
        kit: Kit) -> None:
    node = await kit.node("n")
    await kit.slice(node, 2)
    await kit.device_class_()
    await kit.claim("too-big", count=3)  # two devices in all; no claim-controller here to root it
    tp, exporter = provider()
    await kit.start(tracer_provider=tp)
    await kit.pod("p", {"gpu": {"resourceClaimName": "too-big"}})
    await kit.wait_condition("p")

    async def traceparent() -> str | None:
        claim = await kit.kube.get(RESOURCE_CLAIMS, "too-big", kit.namespace)
        return (claim["metadata"].get("annotations") or {}).get(TRACEPARENT_ANNOTATION)

    _, trace_id, span_id, _ = (await eventually(traceparent, what="the claim's trace root")).split("-")

    def in_trace() -> list[ReadableSpan] | None:
        spans = exporter.get_finished_spans()
        attempts = [s for s in named(spans, "allocate claim")
                    if format(s.context.trace_id, "032x") == trace_id]
        return list(spans) if named(spans, ROOT_SPAN) and attempts else None

    spans = await eventually(in_trace, what="the root and an attempt in the claim's trace")
    (root,) = named(spans, ROOT_SPAN)
    assert format(root.context.trace_id, "032x") == trace_id
    assert format(root.context.span_id, "016x") == span_id
    assert root.attributes is not None and root.attributes["draflow.first_seen_by"] == "structured-allocator"
    # The attempt that found no room was made before the root (in the pod's attempt trace): the root
    # links it. Every attempt failed, with the reason.
    attempts = {(s.context.trace_id, s.context.span_id): s for s in named(spans, "allocate claim")}
    (first,) = [attempts[(link.context.trace_id, link.context.span_id)] for link in root.links]
    assert format(first.context.trace_id, "032x") != trace_id
    assert all(not s.status.is_ok and s.status.description for s in attempts.values())
