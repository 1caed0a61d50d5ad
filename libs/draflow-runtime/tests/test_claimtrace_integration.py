"""draflow_runtime.claimtrace against a real kube-apiserver: a claim draflow did not create gets exactly one
trace root, even when two services write it at the same moment."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from draflow_runtime.claimtrace import ROOT_SPAN, ensure_claim_trace, has_trace
from draflow_runtime.kube import RESOURCE_CLAIMS, KubeClient
from draflow_runtime.tracing import TRACEPARENT_ANNOTATION

pytestmark = pytest.mark.integration

MANAGER = "draflow-test"
MakeNamespace = Callable[..., Awaitable[str]]


def tracer(name: str) -> tuple[Any, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer(name), exporter


async def user_claim(kube: KubeClient, ns: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return await kube.create(RESOURCE_CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "mine", "annotations": annotations or {}},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
    }, ns, field_manager=MANAGER)


def traceparent(claim: dict[str, Any]) -> str:
    return str(claim["metadata"]["annotations"][TRACEPARENT_ANNOTATION])


async def test_two_services_racing_for_the_root_leave_one_root_and_agree_on_it(
    kube: KubeClient, make_namespace: MakeNamespace,
) -> None:
    ns = await make_namespace("claimtrace")
    seen = await user_claim(kube, ns)  # both services decide from this copy: no annotation yet
    assert not has_trace(seen)
    (t1, e1), (t2, e2) = tracer("claim-controller"), tracer("structured-allocator")

    a, b = await asyncio.gather(
        ensure_claim_trace(kube, t1, seen, field_manager=MANAGER, service="claim-controller"),
        ensure_claim_trace(kube, t2, seen, field_manager=MANAGER, service="structured-allocator"),
    )

    assert sorted([a.rooted, b.rooted]) == [False, True]  # one wrote the root, the other adopted it
    stored = traceparent(await kube.get(RESOURCE_CLAIMS, "mine", ns))
    assert traceparent(a.claim) == traceparent(b.claim) == stored
    roots = [s for s in (*e1.get_finished_spans(), *e2.get_finished_spans()) if s.name == ROOT_SPAN]
    assert len(roots) == 1  # the loser's span never ended: never exported
    (root,) = roots
    assert root.parent is None
    ids = [format(root.context.trace_id, "032x"), format(root.context.span_id, "016x")]
    assert stored.split("-")[1:3] == ids
    winner = a if a.rooted else b
    assert root.attributes is not None and root.attributes["draflow.first_seen_by"] == (
        "claim-controller" if winner is a else "structured-allocator")
    for result in (a, b):
        assert trace.get_current_span(result.context).get_span_context().trace_id == root.context.trace_id


async def test_a_claim_with_a_trace_is_never_written(kube: KubeClient, make_namespace: MakeNamespace) -> None:
    ns = await make_namespace("claimtrace")
    given = f"00-{'ab' * 16}-{'cd' * 8}-01"
    claim = await user_claim(kube, ns, {TRACEPARENT_ANNOTATION: given})
    t, exporter = tracer("claim-controller")

    result = await ensure_claim_trace(kube, t, claim, field_manager=MANAGER, service="claim-controller")

    assert not result.rooted and traceparent(result.claim) == given
    after = await kube.get(RESOURCE_CLAIMS, "mine", ns)
    assert after["metadata"]["resourceVersion"] == claim["metadata"]["resourceVersion"]
    assert exporter.get_finished_spans() == ()


async def test_a_stale_copy_without_a_trace_is_rooted_from_a_fresh_read(
    kube: KubeClient, make_namespace: MakeNamespace,
) -> None:
    """The claim changed after the caller's copy (a label, not a trace): the compare-and-swap fails, the
    fresh copy still has no root, the second attempt writes it."""
    ns = await make_namespace("claimtrace")
    stale = await user_claim(kube, ns)
    await kube.patch(RESOURCE_CLAIMS, "mine", {"metadata": {"labels": {"team": "a"}}}, ns,
                     field_manager=MANAGER)
    t, exporter = tracer("claim-controller")

    result = await ensure_claim_trace(kube, t, stale, field_manager=MANAGER, service="claim-controller")

    assert result.rooted
    after = await kube.get(RESOURCE_CLAIMS, "mine", ns)
    assert after["metadata"]["labels"] == {"team": "a"} and traceparent(after) == traceparent(result.claim)
    assert [s.name for s in exporter.get_finished_spans()] == [ROOT_SPAN]


async def test_with_tracing_off_nothing_is_written(kube: KubeClient, make_namespace: MakeNamespace) -> None:
    """OTEL_SDK_DISABLED or no provider: spans have no valid context, so there is no root to record; the
    claim is not patched and the caller is not told it rooted one (it would try on every reconcile)."""
    ns = await make_namespace("claimtrace")
    claim = await user_claim(kube, ns)

    result = await ensure_claim_trace(kube, trace.NoOpTracer(), claim, field_manager=MANAGER,
                                      service="claim-controller")

    assert not result.rooted and not has_trace(result.claim)
    after = await kube.get(RESOURCE_CLAIMS, "mine", ns)
    assert after["metadata"]["resourceVersion"] == claim["metadata"]["resourceVersion"]
