"""NATS request/reply ``draflow.allocator.allocate``: allocate the claims of a pod that is already bound.

The claim-controller asks for pods created with ``spec.nodeName`` set (nothing schedules them, so
nothing else would allocate their claims). JSON, as in services/claim-controller ``allocator.py``::

    request  {"namespace": str, "pod": str, "podUID": str, "node": str}
    reply    {"ok": bool, "message": str}

The claims are allocated on that node only (no node filters: the pod is there already), through the
same decision code, assume cache and write pipeline as scheduled pods, without the binding. The reply
comes after the writes. **Idempotent**: claims already allocated and reserved for the pod give
``ok: true`` at once; a request for a pod whose writes are in flight waits for them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from draflow_runtime.errors import ApiError, NotFound, TransportError
from draflow_runtime.kube import PODS
from draflow_runtime.log import bind, get_logger

from .binder import ClaimPlan, PodPlan
from .decision import Placement, Unschedulable, Waiting
from .scheduler import Scheduler

__all__ = ["AllocateResponder"]

log = get_logger(__name__)


def _reply(ok: bool, message: str) -> bytes:
    return orjson.dumps({"ok": ok, "message": message})


class AllocateResponder:
    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    async def handle(self, data: bytes, headers: dict[str, str]) -> bytes:
        try:
            req = orjson.loads(data)
            ns, name, uid, node = (str(req[k]) for k in ("namespace", "pod", "podUID", "node"))
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return _reply(False, "malformed request: need namespace, pod, podUID, node")
        with bind(pod=f"{ns}/{name}", node=node):
            return await self._allocate(ns, name, uid, node)

    async def _allocate(self, ns: str, name: str, uid: str, node: str) -> bytes:
        sched = self.scheduler
        if not sched.synced:
            return _reply(False, "allocator is starting (caches not synced yet)")
        namespace = sched.state.namespace
        if namespace is not None and ns != namespace:
            return _reply(False, f"namespace {ns} is not served by this allocator")
        try:
            pod = await sched.kube.get(PODS, name, ns)
        except NotFound:
            return _reply(False, f"pod {ns}/{name} not found")
        except (ApiError, TransportError) as err:
            return _reply(False, f"reading pod {ns}/{name}: {err}")
        if pod["metadata"].get("uid") != uid:
            return _reply(False, f"pod {ns}/{name} has another UID (recreated)")
        if (pod.get("spec") or {}).get("nodeName") != node:
            return _reply(False, f"pod {ns}/{name} is not bound to node {node}")
        key = f"{ns}/{name}"
        for _ in range(50):
            plan = sched.in_flight.get(key)
            if plan is None:
                break
            await asyncio.sleep(0.05)
        async with sched.decision_lock:  # decide and assume with no other decision in between
            decision = await sched.decider.decide(pod, only_node=node)
            if isinstance(decision, Waiting):
                return _reply(False, decision.reason)
            if isinstance(decision, Unschedulable):
                message = decision.explanation.message()
                sched.explanations.record(decision.explanation)
                return _reply(False, message)
            task = self._start(pod, decision)
        if task is None:
            return _reply(True, "claims already allocated and reserved")
        await asyncio.wait({task})
        if task.cancelled() or task.exception() is not None or not task.result():
            return _reply(False, "writing the allocation failed; ask again")
        return _reply(True, f"allocated on node {decision.node}")

    def _start(self, pod: dict[str, Any], decision: Placement) -> asyncio.Task[bool] | None:
        """Assume and start the writes (no binding); None when there is nothing to write."""
        claims = [ClaimPlan(p.claim, p.allocation, p.reserve) for p in decision.claims
                  if p.allocation is not None or p.reserve]
        if not claims:
            return None
        return self.scheduler.start_pipeline(PodPlan(pod, decision.node, claims, bind=False))
