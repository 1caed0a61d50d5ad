"""The allocator against a real kube-apiserver: placement, sharing, crash safety, bad input, explain."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import aiohttp
import pytest
from sa_kit import Kit, devices_of, eventually

from draflow_runtime.dra import DELETE_PROTECTION_FINALIZER as FINALIZER
from draflow_runtime.kube import PODS, RESOURCE_CLAIMS
from structured_allocator.binder import Hooks, PodPlan
from structured_allocator.explain_http import ExplanationStore

pytestmark = pytest.mark.integration


async def test_template_claims_are_allocated_and_pods_bound(kit: Kit) -> None:
    nodes = [await kit.node(f"n{i}") for i in range(2)]
    for n in nodes:
        await kit.slice(n, 2)
    await kit.device_class_()
    await kit.template("one-gpu")
    await kit.start()
    for i in range(3):
        await kit.template_pod(f"p{i}", "one-gpu")
    seen: set[str] = set()
    for i in range(3):
        node = await kit.wait_bound(f"p{i}")
        claim = await kit.claim_of(f"p{i}")
        pod = await kit.kube.get(PODS, f"p{i}", kit.namespace)
        assert FINALIZER in claim["metadata"]["finalizers"]
        assert claim["status"]["reservedFor"] == [
            {"resource": "pods", "name": f"p{i}", "uid": pod["metadata"]["uid"]}]
        assert claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0][
            "values"] == [node]
        # both binding gates are on: stamped like kube-scheduler does, without binding conditions too
        stamp = claim["status"]["allocation"]["allocationTimestamp"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp)
        (device,) = devices_of(claim)
        assert device.split("/")[1] == node  # pool = node
        assert device not in seen
        seen.add(device)
    # pack: the first node chosen is filled before the other one is used
    bound = [await kit.wait_bound(f"p{i}") for i in range(3)]
    assert sorted(bound.count(n) for n in nodes) == [1, 2]


async def test_shared_claim_lists_every_pod_in_reserved_for(kit: Kit) -> None:
    node = await kit.node("n")
    await kit.slice(node, 1)
    await kit.device_class_()
    await kit.claim("shared")
    await kit.start()
    pods = [await kit.pod(f"p{i}", {"gpu": {"resourceClaimName": "shared"}}) for i in range(3)]
    for i in range(3):
        assert await kit.wait_bound(f"p{i}") == node
    claim = await kit.kube.get(RESOURCE_CLAIMS, "shared", kit.namespace)
    assert sorted(r["uid"] for r in claim["status"]["reservedFor"]) == sorted(
        p["metadata"]["uid"] for p in pods)
    assert len(devices_of(claim)) == 1


async def test_crash_between_status_write_and_bind_loses_and_duplicates_nothing(kit: Kit) -> None:
    node = await kit.node("n")
    await kit.slice(node, 2)
    await kit.device_class_()
    await kit.template("one-gpu")
    crashed = asyncio.Event()

    async def crash(plan: PodPlan) -> None:
        crashed.set()
        kit.task_of(first).cancel()  # the whole allocator dies right after the status write
        await asyncio.Event().wait()  # blocks until the cancellation above reaches this task

    first = await kit.start(hooks=Hooks(after_status_write=crash))
    await kit.template_pod("p0", "one-gpu")
    await asyncio.wait_for(crashed.wait(), 30)
    await kit.stop(first)
    claim0 = await kit.claim_of("p0")
    (device0,) = devices_of(claim0)  # written before the crash
    assert not (await kit.kube.get(PODS, "p0", kit.namespace))["spec"].get("nodeName")

    await kit.start()
    await kit.template_pod("p1", "one-gpu")
    assert await kit.wait_bound("p0") == node
    assert await kit.wait_bound("p1") == node
    claim0 = await kit.claim_of("p0")
    claim1 = await kit.claim_of("p1")
    assert devices_of(claim0) == [device0]  # bound with the allocation written before the crash
    assert devices_of(claim1) and devices_of(claim1) != [device0]
    # a third pod finds no device left: nothing was leaked or given twice
    await kit.template_pod("p2", "one-gpu")
    message = await kit.wait_condition("p2", "0 usable, 1 needed")
    # Other suites share this API server and may leave Nodes behind: only this test's node may be usable.
    assert re.search(r"\b0/\d+ nodes are available", message), message


async def test_invalid_cel_in_device_class_is_reported_while_others_schedule(kit: Kit) -> None:
    node = await kit.node("n")
    await kit.slice(node, 3)
    await kit.device_class_()
    # Syntax errors are rejected by the API server; a missing attribute fails at runtime (no such key).
    expression = f'device.attributes["{kit.driver}"].nosuch == 1'
    bad = await kit.device_class_(f"bad-{kit.suffix}", expression)
    await kit.template("good")
    await kit.template("broken", device_class=bad)
    await kit.template("missing", device_class=f"nonexistent-{kit.suffix}")
    await kit.start()
    await kit.template_pod("bad", "broken")
    await kit.template_pod("nocls", "missing")
    await kit.template_pod("good", "good")
    assert await kit.wait_bound("good") == node
    message = await kit.wait_condition("bad", bad)
    assert expression in message
    message = await kit.wait_condition("nocls", f"nonexistent-{kit.suffix}")
    assert "does not exist" in message
    events = await eventually(lambda: _events_with(kit, "bad", "FailedScheduling"), what="event")
    assert bad in events[0]["message"]
    bad_claim = await kit.claim_of("bad")
    assert not (bad_claim.get("status") or {}).get("allocation")
    assert FINALIZER not in (bad_claim["metadata"].get("finalizers") or [])
    # the allocator keeps scheduling
    await kit.template_pod("good2", "good")
    assert await kit.wait_bound("good2") == node
    # the missing class made now: the allocator sees it (its classes by name follow the informer)
    await kit.device_class_(f"nonexistent-{kit.suffix}")
    assert await kit.wait_bound("nocls") == node


async def test_explanation_of_an_impossible_claim_names_request_and_reason(kit: Kit) -> None:
    await kit.node("tainted", taints=[{"key": "maintenance", "effect": "NoSchedule"}])
    await kit.node("notready", ready=False)
    node = await kit.node("n")
    await kit.slice(node, 2)
    await kit.device_class_()
    store = ExplanationStore()
    from draflow_runtime.observability import ObservabilityServer

    server = ObservabilityServer(0)
    store.add_routes(server)
    await server.start()
    try:
        await kit.start(explanations=store)
        await kit.template("huge", selectors=("device.attributes[device.driver].index >= 5",))
        await kit.template_pod("p", "huge")
        message = await kit.wait_condition("p", "match selector")
        claim = await kit.claim_of("p")
        name = claim["metadata"]["name"]
        assert f'claim "{name}" request "gpu"' in message
        assert "1 node(s) were not ready" in message
        assert "1 node(s) had untolerated taint {maintenance: NoSchedule}" in message
        assert "0 match selector" in message
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{server.url}/explain/{kit.namespace}/{name}") as resp:
                assert resp.status == 200
                body: dict[str, Any] = await resp.json()
            async with http.get(f"{server.url}/explain") as resp:
                listing = await resp.json()
        # Nodes left by other suites in the shared API server may add their own filter reasons.
        filtered = body["nodes"]["filtered"]
        assert filtered["were not ready"] >= 1
        assert filtered["had untolerated taint {maintenance: NoSchedule}"] == 1
        assert body["bestNode"]["node"] == node
        (request,) = body["bestNode"]["requests"]
        assert request["request"] == "gpu"
        assert request["class_devices"] == 2 and request["matching"] == 0 and request["usable"] == 0
        assert any(item["claim"] == f"{kit.namespace}/{name}" for item in listing["items"])
    finally:
        await server.stop()


async def test_explanations_are_forgotten_when_the_pod_or_the_claim_goes(kit: Kit) -> None:
    node = await kit.node("n")
    await kit.slice(node, 1)
    await kit.device_class_()
    store = ExplanationStore()
    await kit.start(explanations=store)
    impossible = ("device.attributes[device.driver].index >= 5",)
    for name in ("pod-goes", "claim-goes", "stays"):
        await kit.claim(f"{name}-c", selectors=impossible)
        await kit.pod(name, {"gpu": {"resourceClaimName": f"{name}-c"}})
    keys = {name: f"{kit.namespace}/{name}-c" for name in ("pod-goes", "claim-goes", "stays")}
    await eventually(lambda: all(store.get(k) for k in keys.values()), what="three explanations")

    await kit.kube.delete(PODS, "pod-goes", kit.namespace)  # unbound: gone at once
    await kit.kube.delete(RESOURCE_CLAIMS, "claim-goes-c", kit.namespace)  # the pod stays, waiting
    await eventually(lambda: store.get(keys["pod-goes"]) is None, what="deleted pod's claim forgotten")
    await eventually(lambda: store.get(keys["claim-goes"]) is None, what="deleted claim forgotten")
    assert store.get(keys["stays"]) is not None
    assert [item["claim"] for item in store.latest()] == [keys["stays"]]


async def _events_with(kit: Kit, pod: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in await kit.events(pod) if e["reason"] == reason]
