"""The pod controller: one pods informer and one work queue for every node the process serves.

Keys are :class:`PodKey` (reconcile one pod) and :class:`NodeKey` (unprepare the claims of pods that are
no longer active on that node: deleted, force-deleted, finished, or replaced). Handlers only enqueue; the
reconcile reads the informer cache and decides from the current state:

=================================================  ===========================================================
pod state                                          action
=================================================  ===========================================================
gone from the cache                                nothing here; the delete handler queued its NodeKey
Succeeded/Failed                                   unprepare the pod's claims (from the checkpoint)
terminating (simulated kubelet)                    unprepare, then delete with grace 0 and a UID precondition
terminating (real kubelet owns the node)           keep prepared until the pod is gone
otherwise                                          prepare its claims; simulated kubelet: CDI annotation,
                                                   Running, health, finish after ``run-duration``
=================================================  ===========================================================

A claim that is not ready yet (not generated, not allocated, pod not reserved) is retried after a short,
growing delay; a driver error becomes a Warning Event on the pod and is retried with backoff. A claim the
node's sweep fails to unprepare is reported too, on each of its pods that the cache still has (a pod gone
from the API server has nothing to put an Event on: logged with claim and pod UID); the recorder folds the
repeats of one failure into one Event's series.

**Nudges** (:meth:`PodController.nudge`, from the NATS ``allocated`` events): the pod is queued at once. If
the pods watch has not shown it yet, its reconcile reads it live from the API server (``GET``), and until
the watch shows it the node sweep re-reads it live too, so a pod prepared that way is never taken for a
finished one. As soon as the cache has the pod, the cache is the only source again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from draflow_runtime.dra import pod_is_finished
from draflow_runtime.errors import DraflowError, NotFound
from draflow_runtime.informer import Informer
from draflow_runtime.kube import PODS
from draflow_runtime.log import bind, get_logger
from draflow_runtime.reconcile import Done, ReconcileResult, RequeueAfter, RequeueWithBackoff
from draflow_runtime.workqueue import WorkQueue

from .driverrpc import ClaimFailure
from .manager import NodeManager, PrepareOutcome
from .podclaims import allocated_resources_status, container_cdi_devices
from .simkubelet import SimKubelet, run_deadline

log = get_logger(__name__)

FAILED_PREPARE_REASON = "FailedPrepareDynamicResources"
FAILED_UNPREPARE_REASON = "FailedUnprepareDynamicResources"


@dataclass(frozen=True, slots=True)
class PodKey:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"pod/{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class NodeKey:
    node: str

    def __str__(self) -> str:
        return f"node/{self.node}"


class PrepareFailed(DraflowError):
    """Some claims of a pod could not be prepared (retried with backoff)."""

    def __init__(self, pod: str, failures: list[ClaimFailure]) -> None:
        super().__init__(f"pod {pod}: " + "; ".join(_describe(f) for f in failures))
        self.pod = pod
        self.failures = failures


class UnprepareFailed(DraflowError):
    """Some claims could not be unprepared (retried with backoff)."""

    def __init__(self, where: str, failures: list[ClaimFailure]) -> None:
        super().__init__(f"{where}: " + "; ".join(_describe(f) for f in failures))
        self.failures = failures


def _describe(f: ClaimFailure) -> str:
    return f"claim {f.claim}: driver {f.driver}: {f.message}" if f.driver else f"claim {f.claim}: {f.message}"


def pod_node(pod: Mapping[str, Any]) -> str:
    return (pod.get("spec") or {}).get("nodeName") or ""


class PodController:
    """Prepares and unprepares claims for the pods of the served nodes; drives the simulated kubelet."""

    def __init__(
        self,
        pods: Informer,
        queue: WorkQueue,
        managers: Mapping[str, NodeManager],
        recorder: Any,
        sim: SimKubelet | None,
        health_view: Callable[[str], Mapping[tuple[str, str, str], tuple[str, str]]] | None = None,
        kube: Any = None,
    ) -> None:
        self.pods = pods
        self.kube = kube  # live reads of nudged pods the cache does not show yet (None: no nudges)
        self.queue = queue
        self.managers = managers
        self.recorder = recorder
        self.sim = sim
        self.health_view = health_view
        self._health_written: dict[str, tuple[str, bytes]] = {}  # pod uid -> (node, last health written)
        # Pod uid -> node, for pods this process wrote Running that the cache still shows Pending: a
        # reconcile woken meanwhile (e.g. by the CDI annotation's echo) writes no second Running status.
        self._running_written: dict[str, str] = {}
        # Nudged pods not in the cache: None until read live, then (uid, node) of the live read.
        self._nudged: dict[PodKey, tuple[str, str] | None] = {}
        pods.add_handler(self._on_event)

    # --- handlers (enqueue only) ---------------------------------------------------------------------

    def _on_event(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        obj = new if new is not None else old
        if obj is None:
            return
        node = pod_node(obj)
        if node not in self.managers:
            return
        if event == "delete":
            self.queue.add(NodeKey(node))
        else:
            self.queue.add(PodKey(obj["metadata"]["namespace"], obj["metadata"]["name"]))

    def on_claim_event(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """A claim changed (allocated, reserved): look at the reserving pods that run on our nodes."""
        obj = new if new is not None else old
        if obj is None:
            return
        namespace = obj["metadata"]["namespace"]
        for ref in (obj.get("status") or {}).get("reservedFor") or []:
            if ref.get("resource") != "pods":
                continue
            pod = self.pods.get(f"{namespace}/{ref.get('name')}")
            if pod is not None and pod_node(pod) in self.managers:
                self.queue.add(PodKey(namespace, ref["name"]))

    def nudge(self, namespace: str, name: str, node: str) -> None:
        """The pod's claims were just allocated (for ``node``; "" unknown): look at it now.

        A pod the cache has is simply queued. One it does not have yet is queued for a live read, but
        only when the event names one of our nodes (every shim hears every event)."""
        key = PodKey(namespace, name)
        pod = self.pods.get(f"{namespace}/{name}")
        if pod is not None:
            if pod_node(pod) in self.managers:
                self.queue.add(key)
            return
        if self.kube is None or node not in self.managers:
            return
        self._nudged.setdefault(key, None)
        self.queue.add(key)

    def enqueue_node_pods(self, node: str) -> None:
        for pod in self.pods.by_index("byNode", node):
            self.queue.add(PodKey(pod["metadata"]["namespace"], pod["metadata"]["name"]))

    def enqueue_node(self, node: str) -> None:
        """The node's sweep (claims of pods gone from the API) and each of its pods."""
        self.queue.add(NodeKey(node))
        self.enqueue_node_pods(node)

    def enqueue_all(self) -> None:
        for node in self.managers:
            self.enqueue_node(node)

    # --- reconcile ------------------------------------------------------------------------------------

    async def reconcile(self, key: PodKey | NodeKey) -> ReconcileResult:
        if isinstance(key, NodeKey):
            return await self._reconcile_node(key.node)
        pod = self.pods.get(f"{key.namespace}/{key.name}")
        if pod is not None:
            self._nudged.pop(key, None)  # the watch caught up: the cache is the truth again
        elif key in self._nudged:
            pod = await self._read_live(key)
        if pod is None or pod_node(pod) not in self.managers:
            return Done()
        with bind(pod=f"{key.namespace}/{key.name}", node=pod_node(pod)):
            return await self._reconcile_pod(key, pod)

    def _active(self, pod: Mapping[str, Any]) -> bool:
        if pod_is_finished(pod):
            return False
        return not (self.sim is not None and pod["metadata"].get("deletionTimestamp"))

    async def _read_live(self, key: PodKey) -> dict[str, Any] | None:
        """GET a nudged pod the cache does not show; remember it while it is on one of our nodes."""
        try:
            pod: dict[str, Any] = await self.kube.get(PODS, key.name, namespace=key.namespace)
        except NotFound:
            self._nudged.pop(key, None)
            return None
        if pod_node(pod) not in self.managers:
            self._nudged.pop(key, None)
            return None
        self._nudged[key] = (pod["metadata"]["uid"], pod_node(pod))
        return pod

    async def _nudged_active(self, node: str) -> set[str]:
        """UIDs of active pods on ``node`` that were read live and that the cache still does not show."""
        active: set[str] = set()
        for key, seen in list(self._nudged.items()):
            if seen is None or seen[1] != node:
                continue
            if self.pods.get(f"{key.namespace}/{key.name}") is not None:
                self._nudged.pop(key, None)
                continue
            pod = await self._read_live(key)
            if pod is None:
                continue
            if pod_node(pod) == node and self._active(pod):
                active.add(pod["metadata"]["uid"])
            else:
                self._nudged.pop(key, None)  # finished or moved: nothing to protect any more
        return active

    async def _reconcile_node(self, node: str) -> ReconcileResult:
        manager = self.managers[node]
        active = {p["metadata"]["uid"] for p in self.pods.by_index("byNode", node) if self._active(p)}
        active |= await self._nudged_active(node)
        failures = await manager.release_inactive(active)
        for uid, (where, _) in list(self._health_written.items()):
            if where == node and uid not in active:
                del self._health_written[uid]
        for uid, where in list(self._running_written.items()):
            if where == node and uid not in active:
                del self._running_written[uid]
        if failures:
            await self._report_unprepare_failures(node, failures)
            raise UnprepareFailed(f"node {node}", failures)
        return Done()

    async def _report_unprepare_failures(self, node: str, failures: list[ClaimFailure]) -> None:
        """A Warning Event for each failure on every pod of its claim that the cache still has (the
        claim keeps its last pods until it is unprepared); a pod gone from it is only logged."""
        manager = self.managers[node]
        cached = {p["metadata"]["uid"]: p for p in self.pods.by_index("byNode", node)}
        for f in failures:
            for uid in sorted(manager.pods_of_claim(f.claim)):
                pod = cached.get(uid)
                if pod is not None:
                    await self._event(pod, FAILED_UNPREPARE_REASON, f)
                else:
                    log.warning("claim not unprepared for a pod gone from the API server", node=node,
                                claim=f.claim, pod_uid=uid, driver=f.driver, error=f.message)

    async def _reconcile_pod(self, key: PodKey, pod: dict[str, Any]) -> ReconcileResult:
        manager = self.managers[pod_node(pod)]
        uid = pod["metadata"]["uid"]
        if not self._active(pod):
            failures = await manager.unprepare_pod(uid)
            self._health_written.pop(uid, None)
            self._running_written.pop(uid, None)
            if failures:
                for f in failures:
                    await self._event(pod, FAILED_UNPREPARE_REASON, f)
                raise UnprepareFailed(f"pod {key.namespace}/{key.name}", failures)
            if self.sim is not None and pod["metadata"].get("deletionTimestamp"):
                await self.sim.finish_deletion(pod)
            return Done()
        if pod["metadata"].get("deletionTimestamp"):
            return Done()  # a real kubelet is stopping it; unprepare once it is gone
        outcome = await manager.prepare_pod(pod)
        for f in outcome.failures:
            await self._event(pod, FAILED_PREPARE_REASON, f)
        if self.sim is not None:
            await self._simulate(pod, outcome)
        if outcome.failures:
            raise PrepareFailed(f"{key.namespace}/{key.name}", outcome.failures)
        if outcome.waiting:
            log.debug("pod claims not ready", waiting=outcome.waiting)
            return RequeueWithBackoff(base_delay=0.2, max_delay=10.0)  # 0.2 s doubling, at most 10 s
        if self.sim is not None:
            left = run_deadline(pod)
            if left is not None and left > 0:
                return RequeueAfter(left)
        return Done()

    async def _simulate(self, pod: dict[str, Any], outcome: PrepareOutcome) -> None:
        assert self.sim is not None
        phase = (pod.get("status") or {}).get("phase")
        uid = pod["metadata"]["uid"]
        if phase != "Running":
            if not outcome.ready or uid in self._running_written:
                return
            await self.sim.publish_cdi_devices(pod, container_cdi_devices(pod, outcome.claims))
            # Always with the current health: containerStatuses is an atomic list, so a status written
            # without allocatedResourcesStatus (e.g. again from a cache that still says Pending) drops it.
            health, _ = self._health(pod, outcome)
            await self.sim.mark_running(pod, health)
            self._running_written[uid] = pod_node(pod)
            return
        self._running_written.pop(uid, None)
        left = run_deadline(pod)
        if left is not None and left <= 0:
            await self.sim.mark_succeeded(pod)
            return
        if outcome.ready:
            await self.sim.publish_cdi_devices(pod, container_cdi_devices(pod, outcome.claims))
            health, changed = self._health(pod, outcome)
            if changed:
                await self.sim.mark_running(pod, health)

    def _health(
        self, pod: dict[str, Any], outcome: PrepareOutcome
    ) -> tuple[dict[str, list[dict[str, Any]]] | None, bool]:
        """(the allocatedResourcesStatus to write — None while no health is known —, whether it differs
        from the last one written for the pod). Records it as written."""
        if self.health_view is None or not outcome.claims:
            return None, False
        view = self.health_view(pod_node(pod))
        if not view:
            return None, False
        desired = allocated_resources_status(pod, outcome.claims, view)
        digest = orjson.dumps(desired, option=orjson.OPT_SORT_KEYS)
        uid = pod["metadata"]["uid"]
        written = self._health_written.get(uid)
        if written is None:  # nothing written by this process yet (e.g. just restarted): what the pod shows
            written = (pod_node(pod), orjson.dumps(health_in_status(pod), option=orjson.OPT_SORT_KEYS))
            desired_seen = orjson.dumps(_without_empty(desired), option=orjson.OPT_SORT_KEYS)
            if written[1] == desired_seen:
                written = (pod_node(pod), digest)
        changed = written != (pod_node(pod), digest)
        self._health_written[uid] = (pod_node(pod), digest)
        return desired, changed

    async def _event(self, pod: Mapping[str, Any], reason: str, failure: ClaimFailure) -> None:
        try:
            action = "Unpreparing" if reason == FAILED_UNPREPARE_REASON else "Preparing"
            await self.recorder.event(pod, "Warning", reason, _describe(failure), action=action)
        except Exception as exc:
            log.warning("event not recorded", reason=reason, error=repr(exc))


def health_in_status(pod: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """``allocatedResourcesStatus`` per container as the pod's status shows it now (the API server omits
    empty lists and strings), in :func:`allocated_resources_status`'s shape."""
    status = pod.get("status") or {}
    out: dict[str, list[dict[str, Any]]] = {}
    for c in [*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ())]:
        if c.get("allocatedResourcesStatus"):
            out[c["name"]] = _without_empty(c["allocatedResourcesStatus"])
    return out


def _without_empty(value: Any) -> Any:
    """``value`` with every empty list, mapping and string dropped from mappings, as JSON from the API
    server shows it (``omitempty``)."""
    if isinstance(value, Mapping):
        return {k: _without_empty(v) for k, v in value.items() if v not in ("", [], {}, None)}
    if isinstance(value, list):
        return [_without_empty(v) for v in value]
    return value
