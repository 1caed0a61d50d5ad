"""EventBus against the real nats-server of the test environment (JetStream, outages, request/reply)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from nats.aio.msg import Msg
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import REGISTRY

from draflow_runtime.bus import EventBus, PullConsumer, RemoteError
from draflow_runtime.tracing import context_from_headers, setup_tracing
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
def tracer_provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = setup_tracing("bus-integration", exporter=exporter, set_global=False)
    yield provider, exporter
    provider.shutdown()


@pytest.fixture
def names() -> dict[str, str]:
    """Stream, subject prefix and bus name unique to one test (the environment is shared)."""
    token = uuid.uuid4().hex[:8]
    return {"stream": f"IT_{token}", "subjects": f"it.{token}", "bus": f"it-{token}"}


@pytest.fixture
async def bus(testenv: Any, names: dict[str, str]) -> AsyncIterator[EventBus]:
    bus = EventBus(testenv.nats_url, name=names["bus"])
    await bus.start()
    assert await bus.wait_connected(30)
    await bus.ensure_stream(names["stream"], [f"{names['subjects']}.>"], 600, 10_000, 10_000_000)
    yield bus
    await bus.stop()


async def fetch_one(consumer: PullConsumer) -> Msg:
    """The next message (fetch returns [] while NATS is down or nothing is there yet)."""
    async with asyncio.timeout(60):
        while True:
            msgs = await consumer.fetch(1, timeout=1.0)
            if msgs:
                return msgs[0]


def metric(metric_name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(metric_name, labels) or 0.0


async def test_event_round_trips_through_jetstream_with_its_traceparent(
    bus: EventBus, names: dict[str, str], tracer_provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = tracer_provider
    tracer = provider.get_tracer("test")
    consumer = await bus.pull_consumer(names["stream"], "history", f"{names['subjects']}.>")

    with tracer.start_as_current_span("claim allocated") as publisher:
        assert await bus.publish(f"{names['subjects']}.allocated", b"claim-1") is True
    assert await bus.flush(30)

    msg = await fetch_one(consumer)
    await msg.ack()
    assert msg.data == b"claim-1"
    assert "traceparent" in (msg.headers or {})
    ctx = context_from_headers(msg.headers)
    assert ctx is not None
    with tracer.start_as_current_span("prepare", context=ctx):
        pass
    provider.force_flush()
    (consumer_span,) = [s for s in exporter.get_finished_spans() if s.name == "prepare"]
    assert consumer_span.context.trace_id == publisher.get_span_context().trace_id
    assert consumer_span.parent is not None
    assert consumer_span.parent.span_id == publisher.get_span_context().span_id


async def test_event_published_during_outage_is_delivered_once_after_restart(
    testenv: Any, bus: EventBus, names: dict[str, str]
) -> None:
    consumer = await bus.pull_consumer(names["stream"], "outage", f"{names['subjects']}.>")
    subject = f"{names['subjects']}.prepared"
    delivered_before = metric("draflow_bus_delivered_from_outbox_total", name=names["bus"])
    late = EventBus(testenv.nats_url, name=names["bus"] + "-late", connect_timeout=0.5)

    await testenv.stop_nats()
    try:
        assert await bus.publish(subject, b"during-outage") is True
        assert bus.outbox_size == 1
        await late.start()  # returns although NATS is down; connects in the background
        assert not late.connected
        assert await late.publish(subject, b"from-late-starter") is True
        assert late.outbox_size == 1
    finally:
        await testenv.start_nats()

    received = {(await fetch_one(consumer)).data, (await fetch_one(consumer)).data}
    assert received == {b"during-outage", b"from-late-starter"}
    assert await consumer.fetch(10, timeout=1.0) == [], "each outboxed event is stored exactly once"
    assert bus.outbox_size == 0 and late.outbox_size == 0
    assert metric("draflow_bus_delivered_from_outbox_total", name=names["bus"]) == delivered_before + 1
    await late.stop()


async def test_publish_never_waits_for_a_stalled_nats_and_delivers_in_order_once_it_answers(
    testenv: Any, bus: EventBus, names: dict[str, str]
) -> None:
    """nats-server SIGSTOPped: the connection stays open but no ack comes back. Publishing must still only
    queue (it runs inside node locks and allocator write slots); the ack timeout is long on purpose, so a
    publish that waited for NATS would still be waiting when the test gives up."""
    stalled = EventBus(testenv.nats_url, name=names["bus"] + "-stall", publish_timeout=600)
    await stalled.start()
    assert await stalled.wait_connected(30)
    consumer = await bus.pull_consumer(names["stream"], "stall", f"{names['subjects']}.>")
    subject = f"{names['subjects']}.stall"

    async def publish_all() -> bool:
        return all([await stalled.publish(subject, str(i).encode()) for i in range(5)])

    await testenv.pause_nats()
    try:
        publishing = asyncio.create_task(publish_all())
        await eventually(publishing.done, 30, "publish returned, NATS stalled")
        assert publishing.result() is True
        assert stalled.outbox_size == 5, "nothing can be acked while nats-server is stopped"
    finally:
        testenv.resume_nats()

    assert await stalled.flush(60)
    got = [(await fetch_one(consumer)).data for _ in range(5)]
    assert got == [b"0", b"1", b"2", b"3", b"4"]
    assert await consumer.fetch(10, timeout=1.0) == []
    await stalled.stop()


async def test_request_reply_carries_trace_context_and_remote_errors(
    bus: EventBus, names: dict[str, str], tracer_provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, _ = tracer_provider
    seen: list[int] = []

    async def allocate(data: bytes, headers: dict[str, str]) -> bytes:
        if data == b"fail":
            raise ValueError("no node fits")
        seen.append(trace.get_current_span().get_span_context().trace_id)
        return b"allocated:" + data

    subject = f"rpc.{names['bus']}.allocate"  # outside the stream: JetStream would ack a stream subject
    await bus.serve(subject, allocate, queue="allocators")
    with provider.get_tracer("test").start_as_current_span("ask") as span:
        assert await bus.request(subject, b"pod-1", timeout=10) == b"allocated:pod-1"
    assert seen == [span.get_span_context().trace_id]
    with pytest.raises(RemoteError) as exc:
        await bus.request(subject, b"fail", timeout=10)
    assert "no node fits" in exc.value.remote
