"""NATS request/reply ``draflow.allocator.allocate``: allocate the claims of a pod that is already bound.

The claim-controller asks for pods created with ``spec.nodeName`` set (nothing schedules them, so
nothing else would allocate their claims). JSON, as in services/claim-controller ``allocator.py``::

    request  {"namespace": str, "pod": str, "podUID": str, "node": str}
    reply    {"ok": bool, "message": str}

The responder checks the request and reads the pod live (the allocator's informers hold only unbound
pods), then queues an :class:`AllocateKey` in the scheduler's work queue and awaits the key's future.
The scheduler's one worker reconciles it like a pod key (:meth:`AllocateRequests.reconcile`): the claims
are allocated on that node only (no node filters: the pod is there already), through the same decision
code, assume cache and write pipeline as scheduled pods, without the binding; the future is answered
when the writes end. **Idempotent**: claims already allocated and reserved for the pod give ``ok: true``
at once. Duplicate requests for one pod share the key and its future; a request for a pod whose writes
are in flight waits for them (woken when that pipeline ends, no polling). The pod's deletion (the
bound-pods informer) answers ``ok: false`` and stops its search; so does the end of the leadership term.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from draflow_runtime.errors import ApiError, NotFound, TransportError
from draflow_runtime.kube import PODS
from draflow_runtime.log import bind, get_logger
from draflow_runtime.reconcile import Done

from .binder import ClaimPlan, PodPlan
from .decision import Unschedulable, Waiting

if TYPE_CHECKING:
    from .scheduler import Scheduler

__all__ = ["AllocateKey", "AllocateRequests", "AllocateResponder"]

log = get_logger(__name__)

Reply = tuple[bool, str]
STOPPING: Reply = (False, "allocator is stopping; ask again")


@dataclass(frozen=True, slots=True)
class AllocateKey:
    """Work-queue key of an allocate request: the bound pod (by UID) and its node."""

    namespace: str
    name: str
    uid: str
    node: str

    @property
    def pod_key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def __str__(self) -> str:
        return f"allocate:{self.pod_key}@{self.node}"


@dataclass
class _Request:
    pod: dict[str, Any]  # the live read of the latest request
    future: asyncio.Future[Reply]
    started: bool = False  # a write pipeline was started for it: its end answers the future


class AllocateRequests:
    """The scheduler's open allocate requests: one future per :class:`AllocateKey`."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._open: dict[AllocateKey, _Request] = {}
        self._after_pipeline: dict[str, set[AllocateKey]] = {}  # pod key -> requests waiting for it
        scheduler.state.bound_pods.add_handler(self._on_bound_pod)

    def submit(self, key: AllocateKey, pod: dict[str, Any]) -> asyncio.Future[Reply]:
        """Queue ``key`` (merged with an open request for it); the future is its reply."""
        queue = self.scheduler.queue
        if queue.shutting_down:
            done: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
            done.set_result(STOPPING)
            return done
        request = self._open.get(key)
        if request is None:
            request = self._open[key] = _Request(pod, asyncio.get_running_loop().create_future())
        elif not request.started:
            request.pod = pod
        queue.add(key)
        return request.future

    def _answer(self, key: AllocateKey, reply: Reply) -> None:
        request = self._open.pop(key, None)
        if request is not None and not request.future.done():
            request.future.set_result(reply)

    def close(self) -> None:
        """The leadership term ends: answer every open request (nothing waits forever)."""
        for key in list(self._open):
            self._answer(key, STOPPING)
        self._after_pipeline.clear()

    def _on_bound_pod(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is not None or old is None:
            return
        meta = old["metadata"]
        for key in [k for k in self._open if (k.namespace, k.name, k.uid) ==
                    (meta.get("namespace"), meta.get("name"), meta.get("uid"))]:
            if not self._open[key].started:  # a started pipeline answers when it ends
                self._answer(key, (False, f"pod {key.pod_key} was deleted"))

    def pipeline_finished(self, pod_key: str) -> None:
        """The write pipeline of ``pod_key`` ended: requests that waited for it go on."""
        for key in self._after_pipeline.pop(pod_key, ()):
            self.scheduler.queue.add(key)

    async def reconcile(self, key: AllocateKey) -> Done:
        """Decide for the request's pod on its node and start the writes; answer when there are none."""
        request = self._open.get(key)
        if request is None or request.started:
            return Done()  # answered already, or its pipeline will answer
        sched = self.scheduler
        if key.pod_key in sched.in_flight:
            self._after_pipeline.setdefault(key.pod_key, set()).add(key)
            return Done()
        with bind(pod=key.pod_key, node=key.node):
            async with sched.decision_lock:
                decision = await sched.decider.decide(request.pod, only_node=key.node,
                                                      cancelled=lambda: key not in self._open)
            if key not in self._open:
                return Done()  # answered meanwhile (pod deleted, term ended)
            if isinstance(decision, Waiting):
                self._answer(key, (False, decision.reason))
                return Done()
            if isinstance(decision, Unschedulable):
                sched.explanations.record(decision.explanation)
                self._answer(key, (False, decision.explanation.message()))
                return Done()
            claims = [ClaimPlan(p.claim, p.allocation, p.reserve, consumer=p.consumer)
                      for p in decision.claims if p.allocation is not None or p.reserve]
            if not claims:
                self._answer(key, (True, "claims already allocated and reserved"))
                return Done()
            request.started = True
            task = sched.start_pipeline(PodPlan(request.pod, decision.node, claims, bind=False))
            task.add_done_callback(lambda t: self._answer(key, _pipeline_reply(t, decision.node)))
            return Done()


def _pipeline_reply(task: asyncio.Task[bool], node: str) -> Reply:
    if task.cancelled() or task.exception() is not None or not task.result():
        return (False, "writing the allocation failed; ask again")
    return (True, f"allocated on node {node}")


def _reply(ok: bool, message: str) -> bytes:
    return orjson.dumps({"ok": ok, "message": message})


class AllocateResponder:
    """The NATS handler: validate, read the pod live, queue the request, await its reply."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    async def handle(self, data: bytes, headers: dict[str, str]) -> bytes:
        try:
            req = orjson.loads(data)
            ns, name, uid, node = (str(req[k]) for k in ("namespace", "pod", "podUID", "node"))
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return _reply(False, "malformed request: need namespace, pod, podUID, node")
        with bind(pod=f"{ns}/{name}", node=node):
            return _reply(*await self._allocate(AllocateKey(ns, name, uid, node)))

    async def _allocate(self, key: AllocateKey) -> Reply:
        sched = self.scheduler
        if not sched.synced:
            return (False, "allocator is starting (caches not synced yet)")
        namespace = sched.state.namespace
        if namespace is not None and key.namespace != namespace:
            return (False, f"namespace {key.namespace} is not served by this allocator")
        try:
            pod = await sched.kube.get(PODS, key.name, key.namespace)
        except NotFound:
            return (False, f"pod {key.pod_key} not found")
        except (ApiError, TransportError) as err:
            return (False, f"reading pod {key.pod_key}: {err}")
        if pod["metadata"].get("uid") != key.uid:
            return (False, f"pod {key.pod_key} has another UID (recreated)")
        if (pod.get("spec") or {}).get("nodeName") != key.node:
            return (False, f"pod {key.pod_key} is not bound to node {key.node}")
        # shielded: one requester giving up does not cancel the reply a duplicate request shares
        return await asyncio.shield(sched.requests.submit(key, pod))
