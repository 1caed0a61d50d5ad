"""NATS: the allocate responder for pods that already have spec.nodeName, and claim events."""

from __future__ import annotations

import nats
import orjson
import pytest
from sa_kit import Kit, devices_of

from draflow_runtime import lifecycle
from draflow_runtime.bus import EventBus
from draflow_runtime.dra import DELETE_PROTECTION_FINALIZER as FINALIZER
from structured_allocator.responder import AllocateResponder

pytestmark = pytest.mark.integration


async def test_allocate_request_for_a_bound_pod_writes_allocation_without_binding(
        kit: Kit, nats_url: str) -> None:
    node = await kit.node("n")
    await kit.slice(node, 1)
    await kit.device_class_()
    await kit.template("one-gpu")
    server = EventBus(nats_url, name="sa-test-server")
    client = EventBus(nats_url, name="sa-test-client")
    events = EventBus(nats_url, name="sa-test-events")
    await lifecycle.ensure_events_stream(events)
    await server.start()
    await client.start()
    await events.start()
    assert await events.wait_connected(10)
    assert await server.wait_connected(10)  # else serve() subscribes later, on connect
    nc = await nats.connect(nats_url)
    subject = f"draflow.allocator.allocate.{kit.suffix}"
    try:
        sched = await kit.start(bus=events)
        await server.serve(subject, AllocateResponder(sched).handle)
        pod = await kit.template_pod("p", "one-gpu", node=node)
        request = orjson.dumps({"namespace": kit.namespace, "pod": "p", "podUID": pod["metadata"]["uid"],
                                "node": node})
        reply = orjson.loads(await client.request(subject, request, timeout=10))
        assert reply["ok"], reply
        claim = await kit.claim_of("p")
        assert devices_of(claim) == [f"{kit.driver}/{node}/gpu-0"]
        assert claim["status"]["reservedFor"][0]["uid"] == pod["metadata"]["uid"]
        assert FINALIZER in claim["metadata"]["finalizers"]
        # idempotent: asking again changes nothing
        again = orjson.loads(await client.request(subject, request, timeout=10))
        assert again["ok"], again
        assert devices_of(await kit.claim_of("p")) == devices_of(claim)
        # a second bound pod on the same (full) node is refused with the explanation
        pod2 = await kit.template_pod("q", "one-gpu", node=node)
        refused = orjson.loads(await client.request(subject, orjson.dumps(
            {"namespace": kit.namespace, "pod": "q", "podUID": pod2["metadata"]["uid"], "node": node}),
            timeout=10))
        assert not refused["ok"] and "0 usable, 1 needed" in refused["message"]
        name = claim["metadata"]["name"]
        sub = await nc.jetstream().subscribe(lifecycle.claim_subject(kit.namespace, name, "allocated"),
                                             stream=lifecycle.EVENTS_STREAM, ordered_consumer=True)
        msg = await sub.next_msg(timeout=10)
        assert msg.subject == f"draflow.events.claim.{kit.namespace}.{name}.allocated"
        assert msg.headers and msg.headers[lifecycle.EVENT_TYPE_HEADER] == "draflow.events.v1.ClaimEvent"
        event = lifecycle.decode(msg)
        assert isinstance(event, lifecycle.ClaimEvent)
        assert lifecycle.kind_name(event.kind) == "allocated" and event.service == "sa-test-events"
        assert event.claim_uid == claim["metadata"]["uid"] and event.node == node
        assert (event.pod.name, event.pod.uid) == ("p", pod["metadata"]["uid"])
        assert [f"{d.driver}/{d.pool}/{d.device}" for d in event.devices] == devices_of(claim)
        await sub.unsubscribe()
    finally:
        await nc.close()
        await events.stop()
        await client.stop()
        await server.stop()
