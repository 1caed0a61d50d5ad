"""Pods created with spec.nodeName, and the claim lifecycle events on NATS (real nats-server)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import pytest_asyncio
from cc_kit import Kit, allocation, consumer, eventually, pod, template

from draflow_runtime import lifecycle
from draflow_runtime.bus import EventBus
from draflow_runtime.dra import DELETE_PROTECTION_FINALIZER
from draflow_runtime.kube import PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS

pytestmark = pytest.mark.integration

NODE = "node-7"


@pytest_asyncio.fixture(loop_scope="session")
async def bus(nats_url: str) -> AsyncIterator[EventBus]:
    bus = EventBus(nats_url, name="claim-controller-test")
    await lifecycle.ensure_events_stream(bus)
    await bus.start()
    assert await bus.wait_connected(10)
    try:
        yield bus
    finally:
        await bus.stop()


async def start(kit: Kit, bus: EventBus) -> None:
    await kit.start_controller(bus=bus, requester=bus,
                               allocator_subject=f"test.{kit.namespace}.allocate")


def fake_allocator(kit: Kit, requests: list[dict[str, Any]]) -> Any:
    """A responder that does what the allocator does for a bound pod: allocate each of its claims on
    the pod's node (finalizer + allocation). It leaves reservedFor to the claim-controller."""

    async def handle(data: bytes, _headers: dict[str, str]) -> bytes:
        request = orjson.loads(data)
        requests.append(request)
        current = await kit.kube.get(PODS, request["pod"], request["namespace"])
        assert current["metadata"]["uid"] == request["podUID"]
        for entry in current["status"].get("resourceClaimStatuses") or ():
            name = entry["resourceClaimName"]
            claim = await kit.kube.get(RESOURCE_CLAIMS, name, request["namespace"])
            if claim.get("status", {}).get("allocation"):
                continue
            namespace, rv = request["namespace"], claim["metadata"]["resourceVersion"]
            finalizer = {"metadata": {"finalizers": [DELETE_PROTECTION_FINALIZER], "resourceVersion": rv}}
            await kit.kube.patch(RESOURCE_CLAIMS, name, finalizer, namespace)
            status = {"status": {"allocation": allocation(request["node"])}}
            await kit.kube.patch(RESOURCE_CLAIMS, name, status, namespace, subresource="status")
        return orjson.dumps({"ok": True, "message": f"allocated on {request['node']}"})

    return handle


async def test_bound_pod_claims_are_allocated_by_the_allocator_and_reserved(kit: Kit, bus: EventBus) -> None:
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    requests: list[dict[str, Any]] = []
    await bus.serve(f"test.{kit.namespace}.allocate", fake_allocator(kit, requests))
    await start(kit, bus)

    p = await kit.create(PODS, pod("pinned", {"gpu": {"resourceClaimTemplateName": "t"}}, node=NODE))

    async def reserved() -> dict[str, Any] | None:
        claims = await kit.claims()
        ok = claims and all(c["status"].get("reservedFor") == [consumer(p)] for c in claims)
        return claims[0] if ok else None

    claim = await eventually(reserved, what="claim allocated and reserved for the bound pod")
    assert claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] \
        == [NODE]
    assert requests[0] == {"namespace": kit.namespace, "pod": "pinned", "podUID": p["metadata"]["uid"],
                           "node": NODE}

    import nats

    nc = await nats.connect(bus.url)
    try:
        async def reserved_event() -> lifecycle.ClaimEvent | None:
            name = claim["metadata"]["name"]
            timeline = await lifecycle.claim_timeline(nc.jetstream(), kit.namespace, name)
            return next((e for e in timeline if lifecycle.kind_name(e.kind) == "reserved"), None)

        event = await eventually(reserved_event, what="a reserved event in JetStream")
    finally:
        await nc.close()
    assert (event.pod.name, event.pod.uid, event.node) == ("pinned", p["metadata"]["uid"], NODE)


async def test_bound_pod_without_an_allocator_gets_a_warning_and_is_retried(kit: Kit, bus: EventBus) -> None:
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    await start(kit, bus)
    p = await kit.create(PODS, pod("stranded", {"gpu": {"resourceClaimTemplateName": "t"}}, node=NODE))

    event = await kit.wait_event("stranded", "AllocatorUnavailable")
    assert event["type"] == "Warning"
    assert NODE in event["message"] and "no allocator answers" in event["message"]
    claims = await kit.claims()
    assert len(claims) == 1 and not claims[0].get("status", {}).get("allocation")

    # The allocator comes up later: the retry (with backoff) gets the claim allocated and reserved.
    await bus.serve(f"test.{kit.namespace}.allocate", fake_allocator(kit, []))

    async def reserved() -> bool:
        claim = await kit.get(RESOURCE_CLAIMS, claims[0]["metadata"]["name"])
        return bool(claim and claim["status"].get("reservedFor") == [consumer(p)])

    await eventually(reserved, timeout=60, what="allocated after the allocator appeared")


async def test_claim_allocated_for_another_node_is_not_reserved(kit: Kit, bus: EventBus) -> None:
    await kit.create(RESOURCE_CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "elsewhere"},
        "spec": template("x")["spec"]["spec"],
    })
    await kit.allocate("elsewhere", "other-node")
    await start(kit, bus)
    await kit.create(PODS, pod("misplaced", {"c": {"resourceClaimName": "elsewhere"}}, node=NODE))
    event = await kit.wait_event("misplaced", "ResourceClaimNotUsable")
    assert "allocated for other nodes" in event["message"]
    claim = await kit.get(RESOURCE_CLAIMS, "elsewhere")
    assert claim is not None and not claim["status"].get("reservedFor")


async def test_claim_lifecycle_events_are_published(kit: Kit, bus: EventBus, nats_url: str) -> None:
    import nats

    received: list[tuple[str, lifecycle.ClaimEvent]] = []
    nc = await nats.connect(nats_url)
    try:
        async def collect(msg: Any) -> None:
            event = lifecycle.decode(msg)
            assert isinstance(event, lifecycle.ClaimEvent)
            received.append((msg.subject, event))
        await nc.subscribe(f"draflow.events.claim.{kit.namespace}.>", cb=collect)
        await nc.flush()

        await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
        await start(kit, bus)
        p = await kit.create(PODS, pod("evented", {"gpu": {"resourceClaimTemplateName": "t"}}))

        async def claim_name() -> str | None:
            claims = await kit.claims()
            return claims[0]["metadata"]["name"] if claims else None

        name = await eventually(claim_name, what="claim created")
        await kit.allocate(name, NODE, p)
        await kit.set_phase("evented", "Succeeded")

        def kinds() -> list[str]:
            return [subject.rsplit(".", 1)[1] for subject, _ in received]

        await eventually(lambda: kinds() == ["created", "deallocated", "deleted"],
                         what=f"three events, got {received}")
    finally:
        await nc.close()
    prefix = f"draflow.events.claim.{kit.namespace}.{name}."
    assert [s for s, _ in received] == [prefix + k for k in ("created", "deallocated", "deleted")]
    created, deallocated, deleted = (body for _, body in received)
    assert (created.pod.namespace, created.pod.name) == (kit.namespace, "evented")
    assert created.name == name and created.service == "claim-controller-test"
    assert deallocated.node == NODE
    assert deleted.claim_uid == created.claim_uid != ""
    assert [lifecycle.kind_name(e.kind) for _, e in received] == ["created", "deallocated", "deleted"]
