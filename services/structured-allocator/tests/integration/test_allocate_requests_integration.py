"""Allocate requests (NATS ``draflow.allocator.allocate``) go through the scheduler's work queue as an
``AllocateKey`` whose future the reconcile answers: duplicates share one pipeline, a deleted pod and the
end of the leadership term answer the request (nothing hangs), against a real kube-apiserver."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from prometheus_client import REGISTRY
from sa_kit import Kit, devices_of, eventually

from draflow_runtime.kube import PODS, RESOURCE_CLAIMS
from structured_allocator.responder import AllocateKey, AllocateResponder
from structured_allocator.scheduler import Scheduler

pytestmark = pytest.mark.integration


def _request(kit: Kit, pod: dict[str, Any], node: str) -> bytes:
    return orjson.dumps({"namespace": kit.namespace, "pod": pod["metadata"]["name"],
                         "podUID": pod["metadata"]["uid"], "node": node})


async def _bound_pod(kit: Kit) -> tuple[str, dict[str, Any]]:
    node = await kit.node("n")
    await kit.slice(node, 1)
    await kit.device_class_()
    await kit.template("one-gpu")
    return node, await kit.template_pod("p", "one-gpu", node=node)


async def _worker_holds_request(sched: Scheduler) -> None:
    async def holds() -> bool | None:
        return True if any(isinstance(k, AllocateKey) for k in sched.queue.processing()) else None

    await eventually(holds, what="the worker took the allocate request")


async def _idle(sched: Scheduler) -> None:
    async def idle() -> bool | None:
        return True if not sched.queue.processing() and not len(sched.queue) and not sched.in_flight else None

    await eventually(idle, what="the allocator idle")


def _allocated() -> float:
    """Write pipelines without a binding that succeeded (allocate requests), in this process so far."""
    return REGISTRY.get_sample_value("draflow_allocator_placements_total", {"result": "allocated"}) or 0.0


def _reply(raw: bytes) -> dict[str, Any]:
    reply: dict[str, Any] = orjson.loads(raw)
    return reply


async def test_duplicate_requests_for_one_pod_share_one_write_pipeline(kit: Kit) -> None:
    node, pod = await _bound_pod(kit)
    sched = await kit.start()
    responder = AllocateResponder(sched)
    request = _request(kit, pod, node)
    placed = _allocated()
    first, second = await asyncio.gather(responder.handle(request, {}), responder.handle(request, {}))
    assert _reply(first) == _reply(second) == {"ok": True, "message": f"allocated on node {node}"}
    assert _allocated() == placed + 1
    claim = await kit.claim_of("p")
    assert devices_of(claim) == [f"{kit.driver}/{node}/gpu-0"]
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]


async def test_a_request_whose_pod_is_deleted_is_answered_and_allocates_nothing(kit: Kit) -> None:
    node, pod = await _bound_pod(kit)
    claim_name = (await kit.claim_of("p"))["metadata"]["name"]
    sched = await kit.start()
    placed = _allocated()
    responder = AllocateResponder(sched)
    async with sched.decision_lock:  # the worker is busy deciding for another pod
        reply = asyncio.create_task(responder.handle(_request(kit, pod, node), {}))
        await _worker_holds_request(sched)
        await kit.kube.delete(PODS, "p", kit.namespace, grace_period_seconds=0)
        async with asyncio.timeout(30):  # answered by the pod's deletion, not by the decision
            answer = _reply(await reply)
    assert answer == {"ok": False, "message": f"pod {kit.namespace}/p was deleted"}
    await _idle(sched)
    claim = await kit.kube.get(RESOURCE_CLAIMS, claim_name, kit.namespace)
    assert not (claim.get("status") or {}).get("allocation")
    assert _allocated() == placed


async def test_the_end_of_the_term_answers_open_requests(kit: Kit) -> None:
    node, pod = await _bound_pod(kit)
    sched = await kit.start()
    responder = AllocateResponder(sched)
    request = _request(kit, pod, node)
    async with sched.decision_lock:
        reply = asyncio.create_task(responder.handle(request, {}))
        await _worker_holds_request(sched)
        await kit.stop(sched)
        async with asyncio.timeout(30):
            answer = _reply(await reply)
    assert answer == {"ok": False, "message": "allocator is stopping; ask again"}
    # a request after the term ended is answered at once, never queued
    assert _reply(await responder.handle(request, {})) == answer
    assert not (((await kit.claim_of("p")).get("status") or {}).get("allocation"))
