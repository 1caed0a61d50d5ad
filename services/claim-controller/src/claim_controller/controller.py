"""The claim-controller: three informers, one work queue, one runner.

Event handlers only enqueue keys (``pod:<ns>/<name>``, ``claim:<ns>/<name>``) and keep two small
pieces of bookkeeping the reconciles cannot reconstruct: the UIDs of deleted pods and the tombstones of
deleted claims (for the ``deleted`` NATS event). What enqueues what:

=================  ==================================================================================
pod event          the pod (if it has ``spec.resourceClaims``); when it is deleted or done, also every
                   claim it uses or owns (their reservations may have to go)
claim event        the claim; every pod that references it by name (index ``byClaim``); its owner pod
template event     every pod with a claim from that template (index ``byTemplate``)
=================  ==================================================================================

With ``--device-taint-eviction`` (default on) a :class:`~claim_controller.eviction.TaintEviction` shares
the pod and claim informers and runs its own queue (NoExecute device taints, DeviceTaintRule status).

``reconcile(key)`` dispatches to :func:`~claim_controller.pods.sync_pod` or
:func:`~claim_controller.claims.sync_claim`, which read the caches and decide from the current state.
A :class:`~draflow_runtime.reconcile.TerminalError` becomes a Warning Event on the object it names.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import TracerProvider

from draflow_runtime.bus import EventBus
from draflow_runtime.dra import extended_claim_name, owning_pod
from draflow_runtime.events import EventRecorder
from draflow_runtime.informer import EventType, Informer, key_of
from draflow_runtime.kube import PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS, KubeClient
from draflow_runtime.log import get_logger
from draflow_runtime.mutationcache import MutationCache
from draflow_runtime.reconcile import Done, RequeueAfter, Runner, TerminalError
from draflow_runtime.workqueue import WorkQueue

from .allocator import AllocatorClient
from .claims import sync_claim
from .context import BY_CLAIM, BY_OWNER_UID, BY_TEMPLATE, Context, DeletedPods, Hooks
from .events_bus import ClaimEvents
from .eviction import BY_POOL, TaintEviction, allocated_pools
from .ownership import (
    claim_uses,
    owner_pod_uid,
    pod_is_done,
    referenced_template_names,
)
from .pods import sync_pod
from .settings import Settings

__all__ = ["COMPONENT", "Controller"]

log = get_logger(__name__)

COMPONENT = "claim-controller"
POD_PREFIX = "pod:"
CLAIM_PREFIX = "claim:"

Obj = dict[str, Any]


def _templates_index(pod: Obj) -> Iterable[str]:
    namespace = pod["metadata"].get("namespace", "")
    return [f"{namespace}/{t}" for t in referenced_template_names(pod)]


class Controller:
    """Wires informers, handlers, the queue and the runner around ``sync_pod``/``sync_claim``.

    ``bus`` publishes claim lifecycle events (None: not published); ``requester`` sends allocation
    requests (an ``EventBus``; None: NATS disabled). ``namespace`` limits every informer to one
    namespace (tests, benchmarks); None watches the cluster. ``hooks`` are test seams;
    ``tracer_provider`` defaults to the global one.
    """

    def __init__(
        self,
        settings: Settings,
        kube: KubeClient,
        *,
        bus: EventBus | None = None,
        requester: Any = None,
        namespace: str | None = None,
        hooks: Hooks | None = None,
        queue: WorkQueue | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.settings = settings
        self.kube = kube
        self.pods = Informer(kube, PODS, namespace, name="pods",
                             indexers={BY_CLAIM: claim_uses, BY_TEMPLATE: _templates_index})
        self.claims = Informer(kube, RESOURCE_CLAIMS, namespace, name="resourceclaims",
                               indexers={BY_OWNER_UID: owner_pod_uid, BY_POOL: allocated_pools})
        self.templates = Informer(kube, RESOURCE_CLAIM_TEMPLATES, namespace, name="resourceclaimtemplates")
        self.queue = queue if queue is not None else WorkQueue(name=COMPONENT)
        self.recorder = EventRecorder(kube, COMPONENT)
        self.ctx = Context(
            settings=settings,
            kube=kube,
            pods=self.pods,
            claims=self.claims,
            templates=self.templates,
            recorder=self.recorder,
            events=ClaimEvents(bus),
            allocator=AllocatorClient(requester, settings.allocator_subject, settings.allocator_timeout),
            mutations=MutationCache(settings.mutation_cache_ttl, index=owner_pod_uid),
            deleted_pods=DeletedPods(settings.deleted_pods_cache_size),
            hooks=hooks or Hooks(),
            tracer=trace.get_tracer("claim_controller", tracer_provider=tracer_provider),
        )
        self.runner = Runner(COMPONENT, self.queue, self.reconcile, workers=settings.workers,
                             timeout=settings.reconcile_timeout, on_terminal=self._on_terminal)
        self.pods.add_handler(self._on_pod)
        self.claims.add_handler(self._on_claim)
        self.templates.add_handler(self._on_template)
        self.eviction = TaintEviction(settings, kube, self.pods, self.claims, self.recorder) \
            if settings.device_taint_eviction else None
        self._synced = False

    @property
    def synced(self) -> bool:
        """All informers have listed (the readiness condition)."""
        return self._synced

    async def run(self) -> None:
        """Start the informers, wait for their first list, then reconcile until cancelled.

        Cancelling stops the workers (an in-flight reconcile is cancelled: every write is idempotent and
        the next leader starts over from the caches) and the informers.
        """
        informers = (self.templates, self.claims, self.pods,
                     *(self.eviction.informers if self.eviction is not None else ()))
        try:
            for informer in informers:
                await informer.start()
            for informer in informers:
                await informer.wait_synced()
            self._synced = True
            log.info("caches synced", pods=len(self.pods), claims=len(self.claims),
                     templates=len(self.templates))
            async with asyncio.TaskGroup() as group:
                group.create_task(self.runner.run())
                if self.eviction is not None:
                    group.create_task(self.eviction.runner.run())
        finally:
            self._synced = False
            self.queue.shutdown()
            if self.eviction is not None:
                self.eviction.queue.shutdown()
            for informer in informers:
                with contextlib.suppress(Exception):
                    await informer.stop()
            await self.recorder.aclose()  # the counts of repeated Events not written yet

    # -- reconcile -------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> Done | RequeueAfter:
        kind, _, rest = key.partition(":")
        namespace, _, name = rest.partition("/")
        if kind + ":" == POD_PREFIX:
            return await sync_pod(self.ctx, namespace, name)
        if kind + ":" == CLAIM_PREFIX:
            return await sync_claim(self.ctx, namespace, name)
        log.error("unknown key dropped", key=key)
        return Done()

    async def _on_terminal(self, key: str, err: TerminalError) -> None:
        obj = err.obj
        if obj is None:
            _, _, rest = key.partition(":")
            namespace, _, name = rest.partition("/")
            obj = self.pods.get(rest) if key.startswith(POD_PREFIX) else self.ctx.claim(namespace, name)
        if obj is not None:
            reason = getattr(err, "reason", "ReconcileFailed")
            await self.recorder.event(obj, "Warning", reason, err.message, action="Reconciling")

    # -- event handlers: enqueue only ------------------------------------------------------------

    def _on_pod(self, event: EventType, old: Obj | None, new: Obj | None) -> None:
        pod = new if new is not None else old
        if pod is None or not ((pod.get("spec") or {}).get("resourceClaims") or extended_claim_name(pod)):
            return  # a pod with neither claims nor an extended resource claim (upstream the same)
        key = key_of(pod)
        if event == "delete":
            self.ctx.deleted_pods.add(pod["metadata"].get("uid", ""))
            self._enqueue_claims_of(pod)
            return
        self.queue.add(POD_PREFIX + key)
        if pod_is_done(pod) or (pod.get("metadata") or {}).get("deletionTimestamp"):
            self._enqueue_claims_of(pod)

    def _enqueue_claims_of(self, pod: Obj) -> None:
        namespace = pod["metadata"].get("namespace", "")
        for claim_key in claim_uses(pod):
            self.queue.add(CLAIM_PREFIX + claim_key)
        for claim in self.ctx.claims_owned_by(pod["metadata"].get("uid", "")):
            self.queue.add(f"{CLAIM_PREFIX}{namespace}/{claim['metadata']['name']}")

    def _on_claim(self, event: EventType, old: Obj | None, new: Obj | None) -> None:
        claim = new if new is not None else old
        if claim is None:
            return
        key = key_of(claim)
        if event == "delete":
            self.ctx.mutations.forget(key)
            self.ctx.tombstones.add(key, claim)
        self.queue.add(CLAIM_PREFIX + key)
        for pod in self.ctx.pods_indexed(BY_CLAIM, key):
            self.queue.add(POD_PREFIX + key_of(pod))
        owner = owning_pod(claim)
        if owner is not None:
            self.queue.add(f"{POD_PREFIX}{claim['metadata'].get('namespace', '')}/{owner[0]}")

    def _on_template(self, event: EventType, old: Obj | None, new: Obj | None) -> None:
        if event == "delete" or new is None:
            return
        for pod in self.ctx.pods_indexed(BY_TEMPLATE, key_of(new)):
            self.queue.add(POD_PREFIX + key_of(pod))

