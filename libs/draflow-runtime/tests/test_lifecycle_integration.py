"""Lifecycle events against the real nats-server: the one stream, timelines in order, outages lose nothing."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from nats.js.api import DiscardPolicy
from nats.js.client import JetStreamContext

from draflow_protos.events.v1.events_pb2 import ClaimEventKind
from draflow_runtime.bus import EventBus
from draflow_runtime.lifecycle import (
    EVENT_TYPE_HEADER,
    EVENTS_LIMITS,
    EVENTS_STREAM,
    ClaimEvent,
    PoolChanged,
    claim_subject,
    claim_timeline,
    ensure_events_stream,
    kind_name,
    publish_claim_event,
    publish_pool_changed,
    recent_events,
)
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration

HISTORY = ["created", "allocated", "reserved", "prepared", "unprepared", "deallocated", "deleted"]


def claim(namespace: str, name: str, rv: int) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": name, "uid": f"uid-{name}", "resourceVersion": str(rv)},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "gpu.draflow.example",
                            "pool": "node-1",
                            "device": "gpu-0",
                        }
                    ]
                }
            }
        },
    }


@pytest.fixture
async def bus(testenv: Any) -> AsyncIterator[EventBus]:
    bus = EventBus(testenv.nats_url, name=f"lifecycle-it-{uuid.uuid4().hex[:6]}")
    await bus.start()
    assert await bus.wait_connected(30)
    await ensure_events_stream(bus)
    yield bus
    await bus.stop()


@pytest.fixture
async def js(testenv: Any) -> AsyncIterator[JetStreamContext]:
    nc = await nats.connect(testenv.nats_url)
    yield nc.jetstream()
    await nc.close()


async def test_the_events_stream_has_the_documented_subjects_and_limits(
    bus: EventBus, js: JetStreamContext
) -> None:
    info = await js.stream_info(EVENTS_STREAM)
    assert info.config.subjects == ["draflow.events.>"]
    assert info.config.max_age == EVENTS_LIMITS.max_age_seconds
    assert info.config.max_msgs == EVENTS_LIMITS.max_msgs
    assert info.config.max_bytes == EVENTS_LIMITS.max_bytes
    assert info.config.duplicate_window == EVENTS_LIMITS.duplicate_window_seconds
    assert info.config.discard in ("old", DiscardPolicy.OLD)  # history ages out; publishing never blocks


async def test_a_claims_timeline_reads_back_in_publish_order(bus: EventBus, js: JetStreamContext) -> None:
    ns, name = f"tl-{uuid.uuid4().hex[:6]}", "trainer-gpu.x7k2p"  # a dot in the name is escaped
    for rv, kind in enumerate(HISTORY, start=1):
        assert await publish_claim_event(bus, kind, claim(ns, name, rv), node="node-1", pod=f"{ns}/trainer")
    # a neighbour's events do not leak into the timeline
    await publish_claim_event(bus, "created", claim(ns, "other", 1))
    assert await bus.flush(30)

    timeline = await claim_timeline(js, ns, name)
    assert [kind_name(e.kind) for e in timeline] == HISTORY
    assert {(e.namespace, e.name, e.node, e.pod.name, e.service) for e in timeline} == {
        (ns, name, "node-1", "trainer", bus.name)
    }
    assert timeline[1].devices[0].device == "gpu-0"


async def test_the_same_announcement_twice_is_stored_once(bus: EventBus, js: JetStreamContext) -> None:
    ns = f"dup-{uuid.uuid4().hex[:6]}"
    for _ in range(3):
        await publish_claim_event(bus, "allocated", claim(ns, "c", 7))
    await publish_claim_event(bus, "allocated", claim(ns, "c", 8))  # a new state is a new event
    assert await bus.flush(30)
    assert len(await claim_timeline(js, ns, "c")) == 2


async def test_pool_events_share_the_stream(bus: EventBus, js: JetStreamContext) -> None:
    pool = f"node-{uuid.uuid4().hex[:6]}"
    await publish_pool_changed(
        bus, driver="gpu.draflow.example", pool=pool, node=pool, generation=1, devices=8
    )
    assert await bus.flush(30)
    records = await recent_events(js, f"draflow.events.pool.gpu_draflow_example.{pool}.changed")
    assert len(records) == 1
    event = records[0].event
    assert isinstance(event, PoolChanged) and (event.driver, event.devices) == ("gpu.draflow.example", 8)
    assert records[0].headers["Nats-Msg-Id"]
    last = await recent_events(js, last=1)
    assert len(last) == 1 and last[0].seq >= records[0].seq


async def test_events_published_while_nats_is_down_are_in_jetstream_after_it_returns(
    testenv: Any, bus: EventBus
) -> None:
    ns, name = f"outage-{uuid.uuid4().hex[:6]}", "c"
    assert await publish_claim_event(bus, "created", claim(ns, name, 1))
    assert await bus.flush(30)  # publish only queues: "created" must be stored before the outage
    await testenv.stop_nats()
    try:
        for rv, kind in enumerate(["allocated", "reserved", "prepared"], start=2):
            assert await publish_claim_event(bus, kind, claim(ns, name, rv)) is True  # queued
        assert bus.outbox_size == 3
    finally:
        await testenv.start_nats()
    assert await bus.wait_connected(60)
    await eventually(lambda: bus.outbox_size == 0, 60, "the outbox drained after the outage", interval=0.1)
    assert bus.outbox_size == 0
    assert await publish_claim_event(bus, "unprepared", claim(ns, name, 5))
    assert await bus.flush(30)

    nc = await nats.connect(testenv.nats_url)
    try:
        timeline = await claim_timeline(nc.jetstream(), ns, name)
    finally:
        await nc.close()
    kinds = [kind_name(e.kind) for e in timeline]
    assert kinds == ["created", "allocated", "reserved", "prepared", "unprepared"]
    assert all(isinstance(e, ClaimEvent) and e.claim_uid == "uid-c" for e in timeline)


async def test_a_stored_json_body_reads_back_as_an_unknown_event_between_the_real_ones(
    bus: EventBus, js: JetStreamContext
) -> None:
    """No publisher sends JSON; one found in the stream is logged and kept as an empty event of unknown
    kind (the history around it stays readable), not converted."""
    ns = f"json-{uuid.uuid4().hex[:6]}"  # also the claim's name: its uid (and so msg ids) unique to this test
    body = b'{"claimUID": "u", "pod": "%s/p", "node": "n", "devices": []}' % ns.encode()
    assert await publish_claim_event(bus, "created", claim(ns, ns, 1), when=1.0)
    assert await bus.publish(f"draflow.events.claim.{ns}.{ns}.allocated", body)
    assert await bus.flush(30)
    assert await publish_claim_event(bus, "allocated", claim(ns, ns, 2), when=2.0)
    assert await bus.flush(30)
    timeline = await claim_timeline(js, ns, ns)
    assert [(e.kind, e.pod.name, e.HasField("time")) for e in timeline] == [
        (ClaimEventKind.CLAIM_EVENT_KIND_UNSPECIFIED, "", False),
        (ClaimEventKind.CLAIM_EVENT_KIND_CREATED, "", True),
        (ClaimEventKind.CLAIM_EVENT_KIND_ALLOCATED, "", True),
    ]


async def test_claim_timeline_orders_by_publish_time_not_arrival(nats_url: str) -> None:
    """Outboxes flushed after an outage store events out of order; the timeline must not show them so."""
    bus = EventBus(nats_url, name="timeline-order")
    await bus.start()
    try:
        await ensure_events_stream(bus)
    finally:
        await bus.stop()
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        ns, name = "order-ns", f"claim-{uuid.uuid4().hex[:8]}"
        # arrival order prepared, allocated, created; the publish times say the opposite
        for seconds, kind in ((30, "prepared"), (20, "allocated"), (10, "created")):
            event = ClaimEvent(
                namespace=ns, name=name, claim_uid="uid-1", time=Timestamp(seconds=1_700_000_000 + seconds)
            )
            event.kind = ClaimEventKind.Value(f"CLAIM_EVENT_KIND_{kind.upper()}")
            await js.publish(
                claim_subject(ns, name, kind),
                event.SerializeToString(),
                headers={EVENT_TYPE_HEADER: "draflow.events.v1.ClaimEvent"},
            )
        timeline = await claim_timeline(js, ns, name)
        assert [kind_name(e.kind) for e in timeline] == ["created", "allocated", "prepared"]
    finally:
        await nc.close()
