"""The scheduling loop: pods in a work queue, one in-memory decision at a time, writes in the background.

::

    informers ──(handlers enqueue pod keys)──▶ WorkQueue ──▶ reconcile(pod key)      [one worker]
    NATS allocate requests ──(AllocateKey)──────▲            └▶ responder.AllocateRequests.reconcile
                                                                │ Decider.decide(pod): no I/O
                         ┌──────────────────────────────────────┼─────────────────────────────┐
                     Placement                               Waiting                   Unschedulable
          assume the allocations, spawn the write   retried when the claim /    condition + Event + NATS,
          pipeline (Binder) under a semaphore       its write shows up          explanation kept for HTTP

Writes never stall decisions (upstream: PreBind runs in its own goroutine): the assume cache holds the
devices and ``reservedFor`` entries in flight, and the pod counts on its node (:class:`~.nodefit.NodeUsage`)
until the bound-pods informer shows it. Binding conditions are waited for between the claim writes and
the binding (:mod:`.binding_wait`, no write slot held). A failed pipeline is undone, its assumptions
released, the pod retried with backoff. Unschedulable pods are retried when something that could help
changes (slices, classes, nodes, their claims, any claim freeing devices, a NATS pool nudge) or after
``unschedulable_retry`` (broken input: only on a change; a search that ran out: ``RequeueWithBackoff``).
When no node fits, an allocated claim of the pod nobody else uses is given back in the background
(PostFilter, :mod:`.postfilter`, :mod:`.giveback`). Members of a PodGroup are tried with their group
(``GroupKey``, :mod:`.gang_attempts`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import Counter, Histogram

from draflow_runtime.bus import EventBus
from draflow_runtime.events import EventRecorder
from draflow_runtime.informer import key_of
from draflow_runtime.kube import KubeClient
from draflow_runtime.log import bind, get_logger
from draflow_runtime.metrics import registered_collector
from draflow_runtime.reconcile import Done, RequeueAfter, RequeueWithBackoff, Runner
from draflow_runtime.workqueue import WorkQueue

from . import extended_writes as xw
from . import nodealloc as na
from . import nodealloc_plan as na_plan
from .binder import Binder, ClaimPlan, Hooks, PodPlan
from .binding_wait import BindingWaiter
from .claimspan import PoolTraces, claim_context, link_pools
from .decision import Decider, Unschedulable, Waiting
from .explain_http import ExplanationStore
from .gang import assume_plan, plan_of
from .gang_attempts import GroupAttempts, GroupKey
from .giveback import GiveBacks
from .podclaims import claims_missing
from .report import Reporter
from .responder import AllocateKey, AllocateRequests
from .scoring import make_scorer
from .settings import Settings
from .settle import give_up
from .state import ClusterState

__all__ = ["COMPONENT", "Scheduler"]

log = get_logger(__name__)

COMPONENT = "structured-allocator"

DECISION_SECONDS = registered_collector(
    Histogram, "draflow_allocator_decision_seconds",
    "Time of one in-memory scheduling decision (no I/O).", ["outcome"],
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
)
PLACEMENTS = registered_collector(
    Counter, "draflow_allocator_placements_total", "Write pipelines by result: bound, failed.", ["result"]
)


class Scheduler:
    """One leadership term of the allocator: informers, queue, decisions, write pipelines."""

    def __init__(
        self,
        settings: Settings,
        kube: KubeClient,
        *,
        bus: EventBus | None = None,
        namespace: str | None = None,
        hooks: Hooks | None = None,
        tracer_provider: TracerProvider | None = None,
        explanations: ExplanationStore | None = None,
    ) -> None:
        self.settings = settings
        self.kube = kube
        self.tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(__name__)
        self.state = ClusterState(kube, settings.scheduler_name_set, self, namespace=namespace,
                                  taint_rules=settings.watch_device_taint_rules,
                                  pod_groups=settings.gates["GenericWorkload"])
        self.pool_traces = PoolTraces()  # span links of allocations to the pool syncs they used
        self.state.slice_informer.add_handler(self.pool_traces.on_slice)
        self.decider = Decider(self.state, make_scorer(settings.scorer), settings.nodes_to_find,
                               binding_timeout=settings.binding_timeout, search_steps=settings.search_steps,
                               filter_timeout=settings.effective_filter_timeout,
                               features=settings.allocator_features,
                               node_allocatable=settings.gates[na.GATE],
                               pod_groups=settings.gates["DRAWorkloadResourceClaims"])
        # Held while a decision searches (one worker: pods and allocate requests take turns). Decisions
        # yield to the event loop between nodes; the assume cache must not change under a search.
        self.decision_lock = asyncio.Lock()
        self.binder = Binder(kube, settings.field_manager, self.tracer, hooks)
        self.binding = BindingWaiter(self.state.claims.get, timeout=settings.binding_timeout,
                                     poll_interval=settings.binding_poll_interval)
        # claim uids PostFilter is giving back -> pods whose attempt skipped it meanwhile (retried after)
        self.reporter = Reporter(kube, EventRecorder(kube, COMPONENT), settings.field_manager, bus,
                                 self.tracer)
        self.explanations = explanations if explanations is not None else ExplanationStore(
            settings.explanations_kept)
        self.queue = WorkQueue(name="pods", base_delay=settings.write_retry_base, max_delay=30.0,
                               qps=1000.0, burst=2000)
        # A decision may search for up to filter_timeout seconds (0: unbounded): the reconcile timeout
        # must not cut it short.
        timeout = settings.filter_timeout + 20.0 if settings.filter_timeout else None
        self.runner = Runner("scheduler", self.queue, self.reconcile, workers=1,
                             timeout=max(30.0, timeout) if timeout else None)
        self.write_slots = asyncio.Semaphore(settings.write_concurrency)
        self.give_backs = GiveBacks(self.binder, self.reporter.recorder, self.write_slots, self._spawn,
                                    self.queue.add)  # PostFilter's writes
        self.in_flight: dict[str, PodPlan] = {}
        self.unschedulable: set[str] = set()
        self._waiters: dict[str, set[str]] = {}
        self._bound: set[str] = set()  # placed, until the informer drops the pod (spec.nodeName set)
        self._failures: dict[str, int] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._synced = asyncio.Event()  # set once the informers synced and the pods are queued
        self.requests = AllocateRequests(self)  # NATS allocate requests, reconciled by the same worker
        self.groups = GroupAttempts(self, enabled=settings.gates["GenericWorkload"])  # pod-group cycles

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        """Until the informers have synced and the pods they hold are queued."""
        await self._synced.wait()

    async def run(self) -> None:
        """Sync the informers, then schedule until cancelled."""
        try:
            await self.state.start()
            for pod in self.state.pods.list():
                if self.state.ours(pod):
                    self.queue.add(key_of(pod))
            self._synced.set()
            log.info("allocator synced", pods=len(self.state.pods), claims=len(self.state.claims),
                     slices=len(self.state.slices), nodes=len(self.state.nodes))
            await self.runner.run()
        finally:
            self.queue.shutdown()
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.wait(self._tasks)
            self.requests.close()
            await self.state.stop()
            await self.reporter.recorder.aclose()  # the counts of repeated Events not written yet

    # -- listener (informer handlers: enqueue only) ------------------------------------------------------

    def pod_changed(self, key: str, pod: Mapping[str, Any] | None) -> None:
        if pod is None:
            self._bound.discard(key)
            self.unschedulable.discard(key)
            self.reporter.forget(key)
            self.explanations.forget_pod(key)
            self._failures.pop(key, None)
            self.queue.forget(key)
            return
        if key not in self.in_flight and key not in self._bound:  # reconcile would do nothing for it
            self.queue.add(key)

    def claim_changed(self, key: str, freed: bool) -> None:
        self.binding.notify(key)
        claim = self.state.claims.get(key)
        if claim is None or (claim.get("status") or {}).get("allocation"):
            self.explanations.forget([key])  # deleted or allocated: no longer waiting for devices
        for pod in self.state.pods_using_claim(key):
            pod_key = key_of(pod)
            if pod_key not in self.in_flight and pod_key not in self._bound:  # our own writes' echoes
                self.queue.add(pod_key)
        if freed:
            self.requeue_unschedulable()

    def cluster_changed(self, what: str) -> None:
        self.requeue_unschedulable()

    def requeue_unschedulable(self) -> None:
        for key in self.unschedulable:
            # a pod whose search ran out waits its backoff (RequeueWithBackoff below)
            if not (self.queue.num_requeues(key) and self.queue.waiting_until(key) is not None):
                self.queue.add(key)

    async def nudge(self, data: bytes, headers: dict[str, str]) -> None:
        """NATS ``draflow.events.pool.>``: a pool changed, pods waiting for devices may fit now."""
        self.requeue_unschedulable()

    # -- reconcile ----------------------------------------------------------------------------------------

    async def reconcile(self, key: str | AllocateKey | GroupKey) -> Done | RequeueAfter | RequeueWithBackoff:
        if isinstance(key, AllocateKey):
            return await self.requests.reconcile(key)
        if isinstance(key, GroupKey):
            return await self.groups.reconcile(key)
        pod = self.state.pods.get(key)
        if pod is None or not self.state.ours(pod) or pod["metadata"].get("deletionTimestamp"):
            self.unschedulable.discard(key)
            self.explanations.forget_pod(key)
            return Done()
        if key in self.in_flight or key in self._bound:
            return Done()  # in flight: its pipeline requeues the pod if it fails
        group = self.groups.key_of(pod)
        if group is not None:  # a PodGroup member: tried with its group (one key per group)
            self.queue.add(group)
            return Done()
        if claims_missing(pod, self.state.claims.get):
            return Done()  # PreEnqueue: the pod update or claim event that ends the wait enqueues it
        with bind(pod=key):
            return await self.attempt(pod)

    def _gone(self, key: str, uid: str) -> Callable[[], bool]:
        """The search's cancellation hook: the pod was deleted, replaced or bound meanwhile."""
        def gone() -> bool:
            pod = self.state.pods.get(key)
            return pod is None or pod["metadata"].get("uid") != uid or bool(
                pod["metadata"].get("deletionTimestamp"))
        return gone

    async def attempt(self, pod: Mapping[str, Any]) -> Done | RequeueAfter | RequeueWithBackoff:
        """One scheduling attempt: decide (timed, no I/O, yields between nodes), then start writes or
        report."""
        key = key_of(dict(pod))
        async with self.decision_lock:
            return await self._attempt(pod, key)

    async def _attempt(self, pod: Mapping[str, Any], key: str) -> Done | RequeueAfter | RequeueWithBackoff:
        with self.tracer.start_as_current_span("schedule pod") as span:
            span.set_attribute("draflow.pod", key)
            started = time.perf_counter()
            decision = await self.decider.decide(pod, cancelled=self._gone(key, pod["metadata"]["uid"]))
            elapsed = time.perf_counter() - started
            outcome = type(decision).__name__.lower()
            DECISION_SECONDS.labels(outcome).observe(elapsed)
            span.set_attribute("draflow.outcome", outcome)
            if isinstance(decision, Waiting):
                if decision.on_claim:
                    self._waiters.setdefault(decision.on_claim, set()).add(key)
                log.debug("pod waits", reason=decision.reason)
                return Done()
            if isinstance(decision, Unschedulable):
                return self._unschedulable(pod, decision, span)
            self.start_pipeline(plan_of(pod, decision), span)
            return Done()

    def start_pipeline(self, plan: PodPlan, span: trace.Span | None = None) -> asyncio.Task[bool]:
        """Assume the plan's allocations (and the pod on its node, for node fit) and run its writes in
        the background."""
        assume_plan(self.state, plan)
        return self.run_assumed(plan, span)

    def run_assumed(self, plan: PodPlan, span: trace.Span | None) -> asyncio.Task[bool]:
        """Run the writes of a plan already assumed (:func:`~.gang.assume_plan`), each claim continuing
        its trace under ``span`` (the attempt)."""
        if span is not None:
            span.set_attribute("draflow.node", plan.node)
            for cp in plan.claims:
                cp.context = claim_context(self.tracer, cp.claim, span, plan.node, cp.allocation)
        self.in_flight[plan.key] = plan
        return self._spawn(self._pipeline(plan), f"write-{plan.key}")

    def _unschedulable(self, pod: Mapping[str, Any], decision: Unschedulable, span: trace.Span, *,
                       post_filter: bool = True) -> Done | RequeueAfter | RequeueWithBackoff:
        key = key_of(dict(pod))
        message = decision.explanation.message()
        span.set_status(trace.Status(trace.StatusCode.ERROR, message[:200]))
        contexts = [claim_context(self.tracer, claim, span, None, None, message) for claim in decision.claims]
        self.unschedulable.add(key)
        self.explanations.record(decision.explanation)
        log.info("pod unschedulable", reason=message)
        self._spawn(self.reporter.unschedulable(pod, message, decision.claims, contexts), f"report-{key}")
        if decision.deallocate is not None and post_filter:
            self.give_backs.start(pod, decision.deallocate)
        if decision.stale_extended is not None:
            self._spawn(xw.delete_stale(self.binder, decision.stale_extended, lambda: self.queue.add(key)),
                        f"delete-stale-{key}")
        if decision.explanation.error:
            return Done()  # broken input: retried when a class, claim or slice changes, not on a timer
        if decision.budget_exhausted:
            # The search ran out (a hard claim): back off 1 s, 2 s, ... up to unschedulable_retry, and
            # cluster events do not retry it sooner — each attempt may cost a whole filter timeout.
            return RequeueWithBackoff(base_delay=1.0, max_delay=self.settings.unschedulable_retry)
        return RequeueAfter(self.settings.unschedulable_retry)

    def _spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- write pipelines ------------------------------------------------------------------------------

    async def _pipeline(self, plan: PodPlan) -> bool:
        """Write the claims of ``plan``, wait for binding conditions, bind (if ``plan.bind``); True when
        all of it succeeded. On failure everything is undone and the pod retried with backoff."""
        key = plan.key
        try:
            async with self.binder.shared_claim_turn(plan), self.write_slots:
                if plan.extended is not None:
                    xw.move_assumption(self.state.assume, plan, await xw.create_extended(self.binder, plan))
                await self.binder.write_claims(plan, lambda cp: self._claim_written(plan, cp))
                for cp in plan.created:  # upstream PreBind: before the binding
                    await xw.record_extended(self.binder, plan, cp.claim["metadata"]["name"])
                if plan.node_allocatable and plan.bind:  # upstream PreBind as well
                    await na_plan.record(self.binder.kube, self.binder.field_manager, plan.pod,
                                         plan.node_allocatable)
            # Pods already bound (NATS allocate requests) have no binding to hold back.
            waiting = self.binding.pending(plan.claims) if plan.bind else []
            if waiting:
                await self.reporter.recorder.event(
                    dict(plan.pod), "Normal", "BindingConditionsPending",
                    f"waiting for binding conditions of {', '.join(cp.key for cp in waiting)} "
                    f"on node {plan.node}", action="Binding")
                await self.binding.wait(waiting)
            if plan.bind:
                async with self.write_slots:
                    await self.binder.bind(plan.pod, plan.node)
        except Exception as err:
            PLACEMENTS.labels("failed").inc()
            failures = self._failures.get(key, 0) + 1
            self._failures[key] = failures
            delay = min(self.settings.write_retry_base * 2 ** failures, 30.0)
            log.warning("placement failed, undoing", pod=key, node=plan.node, error=repr(err),
                        retry_in=delay)
            known: dict[str, Mapping[str, Any] | None] = {}  # what the undo learnt of the API server
            try:
                known = await self.binder.undo(plan)
                await xw.undo_created(self.binder, plan)
                if plan.node_allocatable and plan.bind:  # upstream Unreserve
                    await na_plan.clear(self.binder.kube, self.binder.field_manager, plan.pod)
            finally:
                xw.release_extended(self.state.assume, plan)
                for cp in plan.claims:
                    # a pod-group member sharing an allocation another member still writes leaves it held
                    if cp.allocation is not None and not self.state.assume.unshare(cp.uid, plan.key):
                        give_up(self.state.assume, self.binder.kube, cp, known, self._spawn, self._wake)
                    self.state.assume.unreserve(cp.uid, cp.consumer_uid(plan.uid))
                self.state.usage.forget(plan.uid)
                self.queue.add_after(key, delay)
            await self.reporter.recorder.event(dict(plan.pod), "Warning", "FailedBinding",
                                               f"placing on node {plan.node} failed: {err}",
                                               action="Binding")
            return False
        else:
            PLACEMENTS.labels("bound" if plan.bind else "allocated").inc()
            if plan.bind:
                self._bound.add(key)
            self._failures.pop(key, None)
            self.unschedulable.discard(key)
            self.reporter.forget(key)
            self.explanations.forget([cp.key for cp in plan.claims])
            self.explanations.forget_pod(key)
            log.info("pod placed", pod=key, node=plan.node, claims=[cp.key for cp in plan.claims])
            return True
        finally:
            self.in_flight.pop(key, None)
            self.requests.pipeline_finished(key)
            for cp in plan.claims:
                self._wake(cp.key)

    async def _claim_written(self, plan: PodPlan, cp: ClaimPlan) -> None:
        self.state.assume.mark_written(cp.uid)
        if cp.reserve:
            self.state.assume.reservation_written(cp.uid, cp.consumer_uid(plan.uid), cp.written_version)
        self._wake(cp.key)
        if cp.allocation is not None:  # in the binder's ``write claim`` span, in the claim's trace
            link_pools(trace.get_current_span(), self.pool_traces.links(cp.allocation))
        if cp.allocation is not None and not cp.shares_pending:  # a sharer only adds its consumer
            await self.reporter.allocated(cp.claim, cp.allocation, plan.pod, plan.node)
        elif cp.reserve:
            await self.reporter.reserved(cp.claim, plan.pod, plan.node)

    def _wake(self, claim_key: str) -> None:
        for pod_key in self._waiters.pop(claim_key, ()):
            self.queue.add(pod_key)
