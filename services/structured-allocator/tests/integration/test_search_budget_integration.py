"""A claim whose device search explodes (issue 12, defect 6) on the real API server: the pod is told
"search budget exhausted after N steps" (condition + Event) and retried with backoff, while the allocator
keeps scheduling other pods."""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
import orjson
import pytest
from sa_kit import Kit, eventually

from draflow_runtime.kube import RESOURCE_CLAIM_TEMPLATES, RESOURCE_SLICES
from draflow_runtime.observability import ObservabilityServer
from structured_allocator.responder import AllocateResponder

pytestmark = pytest.mark.integration

COLORS = 6
DEVICES = 48  # 8 per color: 8**6 ways to pick six distinct colors, each failing on the seventh


async def _hard_node(kit: Kit, name: str, devices: int = DEVICES, colors: int = COLORS) -> str:
    node = await kit.node(name)
    slice_name = f"{node}-{kit.driver}"
    await kit.kube.create(RESOURCE_SLICES, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": slice_name},
        "spec": {"driver": kit.driver, "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{i}", "attributes": {"color": {"string": f"c{i % colors}"}}}
                             for i in range(devices)]}})
    kit.cluster_objects.append((RESOURCE_SLICES, slice_name))
    return node


async def _hard_template(kit: Kit, colors: int = COLORS) -> None:
    spec = kit.claim_spec(count=colors + 1)  # more distinct colors than exist: never fits
    spec["devices"]["constraints"] = [{"requests": ["gpu"], "distinctAttribute": f"{kit.driver}/color"}]
    await kit.kube.create(RESOURCE_CLAIM_TEMPLATES, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "hard"},
        "spec": {"spec": spec}}, kit.namespace)


async def test_pathological_claim_gets_budget_explanation_while_other_pods_schedule(kit: Kit) -> None:
    node = await _hard_node(kit, "n")
    await kit.device_class_()
    await _hard_template(kit)
    await kit.template("one-gpu")
    sched = await kit.start(search_steps=20_000)
    await kit.template_pod("hard", "hard")
    message = await kit.wait_condition("hard", "search budget exhausted after 20000 steps", timeout=60)
    assert message.startswith("0/"), message
    key = f"{kit.namespace}/hard"

    async def backed_off_twice() -> bool | None:  # retried through the queue's growing backoff
        return True if sched.queue.num_requeues(key) >= 2 else None

    await eventually(backed_off_twice, 60, what="the hard pod retried with backoff")

    async def failed_scheduling() -> list[str] | None:
        found = [e["message"] for e in await kit.events("hard") if e["reason"] == "FailedScheduling"]
        return found or None

    assert "search budget exhausted after 20000 steps" in (await eventually(failed_scheduling))[0]
    for i in range(3):  # the allocator keeps serving other pods, the hard one being retried meanwhile
        await kit.template_pod(f"easy{i}", "one-gpu")
        assert await kit.wait_bound(f"easy{i}") == node
    hard_claim = await kit.claim_of("hard")
    assert not (hard_claim.get("status") or {}).get("allocation")


async def test_healthz_is_served_while_a_long_decision_searches_node_after_node(kit: Kit) -> None:
    """20 nodes, each a search that runs out of its 5,000 steps: one decision spans all of them and
    yields between nodes, so the allocator's own event loop answers /healthz in the middle of it."""
    for i in range(20):
        await _hard_node(kit, f"h{i}", devices=24, colors=4)
    await kit.device_class_()
    await _hard_template(kit, colors=4)
    server = ObservabilityServer(0)
    await server.start()
    sched = await kit.start(search_steps=5_000, filter_timeout=0)
    answered_mid_decision = 0
    stop = asyncio.Event()

    async def probe() -> None:
        nonlocal answered_mid_decision
        async with aiohttp.ClientSession() as http:
            while not stop.is_set():
                async with http.get(f"{server.url}/healthz") as resp:
                    assert resp.status == 200
                    if sched.decision_lock.locked():  # answered while a decision holds the lock
                        answered_mid_decision += 1
                await asyncio.sleep(0.005)  # a client probing /healthz in a tight loop: the load tested

    task = asyncio.create_task(probe())
    try:
        await kit.template_pod("hard", "hard")
        message = await kit.wait_condition("hard", "search budget exhausted after 5000 steps", timeout=60)
        assert "20 node(s) search budget exhausted" in message, message
        async def answered() -> bool | None:
            return True if answered_mid_decision >= 3 else None

        await eventually(answered, 60, what="/healthz answered during a decision")
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await server.stop()


@pytest.mark.parametrize(("overrides", "reason"), [
    ({"search_steps": 20_000}, "search budget exhausted after 20000 steps"),
    ({"search_steps": 0, "filter_timeout": 0.5}, "(filter timeout 0.5s)"),
])
async def test_an_allocate_request_whose_search_runs_out_is_answered_with_the_reason(
        kit: Kit, overrides: dict[str, float], reason: str) -> None:
    """The NATS allocate path (a pod already on the node) has the same budget: steps and --filter-timeout."""
    node = await _hard_node(kit, "n")
    await kit.device_class_()
    await _hard_template(kit)
    sched = await kit.start(**overrides)
    pod = await kit.template_pod("hard", "hard", node=node)
    raw = await AllocateResponder(sched).handle(orjson.dumps(
        {"namespace": kit.namespace, "pod": "hard", "podUID": pod["metadata"]["uid"], "node": node}), {})
    reply = orjson.loads(raw)
    assert not reply["ok"] and reason in reply["message"], reply
    assert not ((await kit.claim_of("hard")).get("status") or {}).get("allocation")
