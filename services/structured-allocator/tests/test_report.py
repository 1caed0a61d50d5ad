"""The allocator's NATS lifecycle events: protobuf ClaimEvents through ``draflow_runtime.lifecycle``."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from draflow_runtime import lifecycle
from structured_allocator.report import Reporter

POD = {"metadata": {"namespace": "ns", "name": "p", "uid": "pod-uid"}}
CLAIM = {"metadata": {"namespace": "ns", "name": "shared", "uid": "claim-uid", "resourceVersion": "5"}}
ALLOCATION = {"devices": {"results": [
    {"request": "gpu", "driver": "gpu.draflow.example", "pool": "n1", "device": "gpu-3"}]}}


class FakeBus:
    name = "structured-allocator"
    enabled = True

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, dict[str, str]]] = []

    async def publish(self, subject: str, data: bytes, headers: Any = None, **_: Any) -> bool:
        self.sent.append((subject, data, dict(headers or {})))
        return True


def events(bus: FakeBus) -> list[lifecycle.ClaimEvent]:
    out = []
    for subject, data, headers in bus.sent:
        event = lifecycle.decode_payload(subject, data, headers)
        assert isinstance(event, lifecycle.ClaimEvent)
        assert subject == lifecycle.claim_subject("ns", "shared", event.kind)
        out.append(event)
    return out


async def test_allocated_carries_pod_node_and_the_new_allocations_devices() -> None:
    bus = FakeBus()
    await Reporter(None, None, "fm", bus).allocated(CLAIM, ALLOCATION, POD, "n1")  # type: ignore[arg-type]
    (event,) = events(bus)
    assert lifecycle.kind_name(event.kind) == "allocated"
    assert (event.pod.name, event.pod.uid, event.node) == ("p", "pod-uid", "n1")
    assert [(d.request, d.pool, d.device) for d in event.devices] == [("gpu", "n1", "gpu-3")]
    assert event.service == "structured-allocator" and event.resource_version == "5"


async def test_reserved_names_the_pod_added_to_a_shared_claim() -> None:
    bus = FakeBus()
    await Reporter(None, None, "fm", bus).reserved(CLAIM, POD, "n1")  # type: ignore[arg-type]
    (event,) = events(bus)
    assert lifecycle.kind_name(event.kind) == "reserved"
    assert (event.pod.name, event.node) == ("p", "n1")


async def test_allocation_failed_is_published_in_the_claims_span() -> None:
    class Recorder:
        async def event(self, *args: Any, **kwargs: Any) -> None:
            pass

    class Kube:
        async def patch(self, *args: Any, **kwargs: Any) -> None:
            pass

    span = TracerProvider().get_tracer("t").start_span("allocate claim")
    span.end()
    ctx = trace.set_span_in_context(span)
    bus = FakeBus()
    reporter = Reporter(Kube(), Recorder(), "fm", bus)  # type: ignore[arg-type]
    await reporter.unschedulable(POD, "no node has 2 free GPUs", [CLAIM], [ctx])
    (event,) = events(bus)
    assert lifecycle.kind_name(event.kind) == "allocation_failed"
    assert (event.reason, event.message) == ("Unschedulable", "no node has 2 free GPUs")
    assert event.trace_id == format(span.get_span_context().trace_id, "032x")
    # the same message again is not reported twice
    await reporter.unschedulable(POD, "no node has 2 free GPUs", [CLAIM], [ctx])
    assert len(bus.sent) == 1


async def test_without_a_bus_nothing_is_published() -> None:
    await Reporter(None, None, "fm", None).allocated(CLAIM, ALLOCATION, POD, "n1")  # type: ignore[arg-type]
