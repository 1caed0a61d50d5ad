"""How often the allocator tries a pod, against the real kube-apiserver (issue #15 item 2: attempts per
placed pod). A pod whose claim does not exist yet is not tried at all (upstream's DynamicResources
PreEnqueue): no scheduling attempt, no ``schedule pod`` span, until the claim shows up; then it is
placed with one attempt."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sa_kit import Kit

pytestmark = pytest.mark.integration


def attempts_of(spans: Any, kit: Kit, pod: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == "schedule pod" and s.attributes
            and s.attributes.get("draflow.pod") == f"{kit.namespace}/{pod}"]


async def test_a_pod_waiting_for_its_claim_is_not_tried_until_the_claim_exists(kit: Kit) -> None:
    node = await kit.node("n")
    await kit.slice(node, 2)
    await kit.device_class_()
    await kit.claim("now")
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    await kit.start(tracer_provider=tp)

    await kit.pod("early", {"gpu": {"resourceClaimName": "later"}})  # its claim does not exist yet
    # One worker takes keys in the order the pod watch delivered them: once "second" is bound, the
    # allocator has been through "early" as well.
    await kit.pod("second", {"gpu": {"resourceClaimName": "now"}})
    assert await kit.wait_bound("second") == node
    assert attempts_of(exporter.get_finished_spans(), kit, "second")
    assert attempts_of(exporter.get_finished_spans(), kit, "early") == []

    await kit.claim("later")
    assert await kit.wait_bound("early") == node
    (attempt,) = attempts_of(exporter.get_finished_spans(), kit, "early")
    assert attempt.attributes is not None and attempt.attributes["draflow.outcome"] == "placement"
