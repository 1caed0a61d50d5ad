"""NATS: the allocate responder for pods that already have spec.nodeName, and claim events."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from sa_kit import Kit, devices_of, eventually

from draflow_runtime.bus import EventBus
from structured_allocator.binder import FINALIZER
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
    await server.start()
    await client.start()
    received: list[tuple[str, bytes]] = []
    subject = f"draflow.allocator.allocate.{kit.suffix}"
    try:
        sched = await kit.start(publish=lambda s, d, **kw: _record(received, s, d))
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
        await eventually(_async(lambda: any(s.endswith(".allocated") for s, _ in received)),
                         what="allocated event")
        subject_allocated, payload = next((s, d) for s, d in received if s.endswith(".allocated"))
        name = claim["metadata"]["name"]
        assert subject_allocated == f"draflow.events.claim.{kit.namespace}.{name}.allocated"
        body = orjson.loads(payload)
        assert body["claimUID"] == claim["metadata"]["uid"] and body["node"] == node
    finally:
        await client.stop()
        await server.stop()


async def _record(received: list[tuple[str, bytes]], subject: str, data: bytes) -> bool:
    received.append((subject, data))
    return True


def _async(fn):  # type: ignore[no-untyped-def]
    async def wrapper():  # type: ignore[no-untyped-def]
        await asyncio.sleep(0)
        return fn()
    return wrapper
