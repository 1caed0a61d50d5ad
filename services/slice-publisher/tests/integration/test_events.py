"""Pool-change events on a real nats-server and sync spans at a real OTLP receiver."""

from __future__ import annotations

import asyncio
from typing import Any

import nats
import pytest
from nats.js.errors import NotFoundError
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from draflow_runtime import lifecycle
from draflow_runtime.bus import EventBus
from draflow_runtime.tracing import TRACEPARENT_ANNOTATION, setup_tracing
from draflow_testenv.wait import eventually

from .conftest import Harness, settled

pytestmark = pytest.mark.integration

SPAN = "slice-publisher.sync_pool"


async def test_every_pool_change_is_announced_in_the_shared_stream_with_its_sync_span(
    harness: Harness, nats_url: str, otlp_receiver: Any
) -> None:
    h = harness
    node = h.dirs.node
    provider = setup_tracing(
        "slice-publisher",
        exporter=OTLPSpanExporter(endpoint=otlp_receiver.endpoint, insecure=True),
        set_global=False,
    )
    nc = await nats.connect(nats_url)
    received: list[Any] = []

    async def on_message(msg: Any) -> None:
        received.append(msg)

    # The escaped subject: "gpu.draflow.example" is three tokens unescaped.
    subject = f"draflow.events.pool.gpu_draflow_example.{node}.changed"
    assert lifecycle.pool_subject("gpu.draflow.example", node) == subject
    sub = await nc.subscribe(subject, cb=on_message)
    bus = EventBus(nats_url, name="slice-publisher")
    await bus.start()
    try:
        await h.start_driver()
        pub = await h.start_publisher(bus=bus, tracer_provider=provider)
        await eventually(lambda: _pool(h, devices=8))
        await eventually(lambda: settled(pub))
        h.dirs.set_gpus(200)
        await eventually(lambda: _pool(h, devices=200))
        await eventually(lambda: settled(pub))
        h.dirs.set_unhealthy(["gpu-3"])
        await eventually(lambda: _pool(h, devices=200, unhealthy=1))
        await eventually(lambda: settled(pub))
        h.dirs.set_gpus(8)
        await eventually(lambda: _pool(h, devices=8, unhealthy=1))
        await eventually(lambda: settled(pub))
        assert await bus.flush(30)  # the bus delivers in the background
        await eventually(lambda: len(received) >= pub.stats.events, what="all events seen")

        # One event per sync that wrote, in order, counting exactly the writes.
        events = [lifecycle.decode(m) for m in received]
        assert pub.stats.writing_syncs >= 4
        assert len(events) == pub.stats.writing_syncs == pub.stats.events
        assert sum(e.slices_created for e in events) == pub.stats.created
        assert sum(e.slices_updated for e in events) == pub.stats.updated
        assert sum(e.slices_deleted for e in events) == pub.stats.deleted
        assert {(e.driver, e.pool, e.node, e.service) for e in events} == {
            ("gpu.draflow.example", node, node, "slice-publisher")
        }
        assert events[0].devices == 8
        assert 200 in [e.devices for e in events]
        slices = await h.slices()
        last = events[-1]
        assert last.devices == 8 and last.unhealthy_devices == 1
        assert last.generation == slices[0]["spec"]["pool"]["generation"]
        assert last.resource_slice_count == len(slices) == 1
        for m in received:
            assert m.headers[lifecycle.EVENT_TYPE_HEADER] == "draflow.events.v1.PoolChanged"
            assert m.headers.get("Nats-Msg-Id")

        # Stored in the one shared stream; no stream of the publisher's own.
        js = nc.jetstream()
        info = await js.stream_info(lifecycle.EVENTS_STREAM)
        assert info.config.subjects == ["draflow.events.>"]
        with pytest.raises(NotFoundError):
            await js.stream_info("DRAFLOW_POOL_EVENTS")
        # JetStream keeps one copy per Nats-Msg-Id (lifecycle: a hash of the pool's counts and writes).
        stored = await lifecycle.recent_events(js, subject, last=1000)
        ids = [m.headers["Nats-Msg-Id"] for m in received]
        assert [r.headers["Nats-Msg-Id"] for r in stored] == list(dict.fromkeys(ids))

        # One span per writing sync, and each event carries its sync's trace.
        await asyncio.to_thread(provider.force_flush)

        def writing_spans(spans: list[Any]) -> list[Any]:
            got = [s for s in spans if s.name == SPAN and s.attributes.get("node") == node]
            writing = [s for s in got if "created" in s.attributes]
            return writing if len(writing) >= len(events) else []

        spans = await otlp_receiver.wait_for(writing_spans, timeout=15)
        assert len(spans) == len(events)
        assert all(s.attributes["driver"] == "gpu.draflow.example" for s in spans)
        assert all(s.attributes["pool"] == node for s in spans)
        span_traces = {s.trace_id for s in spans}
        event_traces = {m.headers["traceparent"].split("-")[1] for m in received}
        assert event_traces == span_traces
        # The slice carries the span of the sync that last wrote it: the allocator links allocations
        # from this pool to it.
        (last_slice,) = slices
        stamped = last_slice["metadata"]["annotations"][TRACEPARENT_ANNOTATION].split("-")[1:3]
        assert stamped == received[-1].headers["traceparent"].split("-")[1:3]
    finally:
        await sub.unsubscribe()
        await nc.close()
        for _pub, task in h.publishers:
            task.cancel()
        await asyncio.gather(*(t for _, t in h.publishers), return_exceptions=True)
        h.publishers.clear()
        await bus.stop()
        await asyncio.to_thread(provider.shutdown)


async def _pool(h: Harness, *, devices: int, unhealthy: int = 0) -> bool:
    slices = await h.slices()
    found = [d for s in slices for d in s["spec"].get("devices") or ()]
    bad = [d for d in found if any(t["key"] == "draflow.dev/unhealthy" for t in d.get("taints") or ())]
    return len(found) == devices and len(bad) == unhealthy
