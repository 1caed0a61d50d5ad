"""The claim-controller: three informers, one work queue, one runner.

Event handlers only enqueue keys (``pod:<ns>/<name>``, ``claim:<ns>/<name>``) and keep two small
pieces of bookkeeping the reconciles cannot reconstruct: the UIDs of deleted pods and the tombstones of
deleted claims (for the ``deleted`` NATS event). What enqueues what:

=================  ==================================================================================
pod event          the pod (if it has ``spec.resourceClaims``, is not being deleted and
                   :func:`~claim_controller.pods.pod_needs_work`: as upstream); when it is
                   deleted or done, also every claim it uses or owns, its extended resource claim too
                   (their reservations may have to go); a pod without claims of its own, gone or
                   done, the claims it controls (an extended resource claim its status never named)
claim event        the claim; every pod that references it by name (index ``byClaim``) and its owner
                   pod, those that need work
template event     every pod with a claim from that template (index ``byTemplate``); every PodGroup too
podgroup event     the PodGroup (``podgroup:<ns>/<name>``) if a claim of it is missing or it is being
                   deleted (``podgroups.needs_sync``); its member pods with claims (index
                   ``byPodGroup``); when it is deleted, the claims it names or owns (their reservations go)
=================  ==================================================================================

PodGroups (``scheduling.k8s.io/v1beta1``) are watched with GenericWorkload (``--feature-gates``): a member
pod waits for its PodGroup, as upstream. Their claims (:mod:`~claim_controller.podgroups`) and every
PodGroup event but a new group's arrival (which wakes its waiting members) need DRAWorkloadResourceClaims.

With ``--device-taint-eviction`` (default on) a :class:`~claim_controller.eviction.TaintEviction` shares
the pod and claim informers and runs its own queue (NoExecute device taints, DeviceTaintRule status).

With ``--shards N`` (N > 1) this replica reconciles only the keys of the shards it holds
(:mod:`claim_controller.sharding`): keys of other shards are not queued, a key whose shard was given up
meanwhile is dropped, :meth:`Controller.shard_acquired` queues everything of a shard just won and
:meth:`Controller.shard_lost` cancels and waits for the shard's reconciles before its Lease goes. Its
claims are watched per shard held (:mod:`~claim_controller.claimcache`: generated claims carry a shard label).

``reconcile(key)`` dispatches to :func:`~claim_controller.pods.sync_pod`,
:func:`~claim_controller.podgroups.sync_pod_group` or :func:`~claim_controller.claims.sync_claim`, which
read the caches and decide from the current state.
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
from draflow_runtime.dra import extended_claim_name, owning_pod, pod_is_finished
from draflow_runtime.events import EventRecorder
from draflow_runtime.informer import EventType, Informer, key_of
from draflow_runtime.kube import POD_GROUPS, PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS, KubeClient
from draflow_runtime.log import get_logger
from draflow_runtime.mutationcache import MutationCache
from draflow_runtime.podgroups import owning_pod_group
from draflow_runtime.reconcile import Done, RequeueAfter, Runner, TerminalError
from draflow_runtime.workqueue import WorkQueue

from . import metrics
from .allocator import AllocatorClient
from .claimcache import ShardedClaims, claim_cache
from .claims import sync_claim
from .context import BY_CLAIM, BY_MEMBER, BY_OWNER_UID, BY_TEMPLATE, Context, DeletedPods, Hooks
from .events_bus import ClaimEvents
from .eviction import BY_POOL, TaintEviction, allocated_pools
from .ownership import (
    claim_uses,
    owner_uid,
    pod_is_done,
    referenced_template_names,
)
from .podgroups import group_claim_keys, group_template_keys, member_key, needs_sync, sync_pod_group
from .pods import pod_needs_work, sync_pod
from .settings import Settings
from .sharding import EVICTION_SHARD, InFlight, claim_shard, pod_shard_key, shard_of, unlabelled_selector

__all__ = ["COMPONENT", "Controller"]

log = get_logger(__name__)

COMPONENT = "claim-controller"
POD_PREFIX = "pod:"
CLAIM_PREFIX = "claim:"
POD_GROUP_PREFIX = "podgroup:"

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
        self.namespace = namespace
        self.pods = Informer(kube, PODS, namespace, name="pods",
                             indexers={BY_CLAIM: claim_uses, BY_TEMPLATE: _templates_index,
                                       BY_MEMBER: member_key})
        self.claims = claim_cache(kube, namespace, settings.shards,
                                  {BY_OWNER_UID: owner_uid, BY_POOL: allocated_pools},
                                  everything_with=EVICTION_SHARD if settings.device_taint_eviction else None)
        self.pod_groups = Informer(kube, POD_GROUPS, namespace, name="podgroups",
                                   indexers={BY_CLAIM: group_claim_keys, BY_TEMPLATE: group_template_keys}) \
            if settings.generic_workload else None
        self.group_claims = settings.pod_groups  # DRAWorkloadResourceClaims (read once: handlers are hot)
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
            mutations=MutationCache(settings.mutation_cache_ttl, index=owner_uid),
            deleted_pods=DeletedPods(settings.deleted_pods_cache_size),
            hooks=hooks or Hooks(),
            tracer=trace.get_tracer("claim_controller", tracer_provider=tracer_provider),
            pod_groups=self.pod_groups,
        )
        self.runner = Runner(COMPONENT, self.queue, self.reconcile, workers=settings.workers,
                             timeout=settings.reconcile_timeout, on_terminal=self._on_terminal)
        self.pods.add_handler(self._on_pod)
        self.claims.add_handler(self._on_claim)
        self.templates.add_handler(self._on_template)
        if self.pod_groups is not None:
            self.pod_groups.add_handler(self._on_pod_group)
        self.eviction = TaintEviction(settings, kube, self.pods, self.claims, self.recorder) \
            if settings.device_taint_eviction else None
        self._synced = asyncio.Event()
        self.shards = settings.shards
        # Shards this replica may act on: all of them unless the work is split (then: Leases held).
        self.held: set[int] = set(range(self.shards)) if self.shards == 1 else set()
        self.in_flight = InFlight()
        self._eviction_task: asyncio.Task[None] | None = None

    @property
    def synced(self) -> bool:
        """All informers have listed (the readiness condition)."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    async def run(self) -> None:
        """Start the informers, wait for their first list, then reconcile until cancelled.

        Cancelling stops the workers (an in-flight reconcile is cancelled: every write is idempotent and
        the next leader starts over from the caches) and the informers.
        """
        informers = (self.templates, *((self.pod_groups,) if self.pod_groups is not None else ()),
                     self.claims, self.pods, *(self.eviction.informers if self.eviction is not None else ()))
        try:
            for informer in informers:
                await informer.start()
            for informer in informers:
                await informer.wait_synced()
            self._synced.set()
            metrics.CLAIMS.source = self._claims_for_metrics
            log.info("caches synced", pods=len(self.pods), claims=len(self.claims),
                     templates=len(self.templates))
            async with asyncio.TaskGroup() as group:
                group.create_task(self.runner.run())
                if self.eviction is not None and self.shards == 1:
                    group.create_task(self.eviction.runner.run())
        finally:
            self._synced.clear()
            if metrics.CLAIMS.source == self._claims_for_metrics:
                metrics.CLAIMS.source = lambda: None
            if self._eviction_task is not None:
                self._eviction_task.cancel()
            self.queue.shutdown()
            if self.eviction is not None:
                self.eviction.queue.shutdown()
            for informer in informers:
                with contextlib.suppress(Exception):
                    await informer.stop()
            await self.recorder.aclose()  # the counts of repeated Events not written yet

    def _claims_for_metrics(self) -> list[Obj] | None:
        """The claims of ``draflow_claim_controller_resource_claims`` (None until the informers synced)."""
        return self.claims.list() if self.synced else None

    # -- reconcile -------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> Done | RequeueAfter:
        if self.shards == 1:
            return await self._dispatch(key)
        shard = self._shard(key)
        if shard not in self.held:
            return Done()  # given up since it was queued: its new holder reconciles it
        result = await self.in_flight.run(shard, lambda: self._dispatch(key))
        return Done() if result is None else result

    async def _dispatch(self, key: str) -> Done | RequeueAfter:
        kind, _, rest = key.partition(":")
        namespace, _, name = rest.partition("/")
        if kind + ":" == POD_PREFIX:
            return await sync_pod(self.ctx, namespace, name)
        if kind + ":" == CLAIM_PREFIX:
            return await sync_claim(self.ctx, namespace, name)
        if kind + ":" == POD_GROUP_PREFIX and self.group_claims:
            return await sync_pod_group(self.ctx, namespace, name)
        log.error("unknown key dropped", key=key)
        return Done()

    async def _on_terminal(self, key: str, err: TerminalError) -> None:
        obj = err.obj
        if obj is None:
            _, _, rest = key.partition(":")
            namespace, _, name = rest.partition("/")
            if key.startswith(POD_PREFIX):
                obj = self.pods.get(rest)
            elif key.startswith(POD_GROUP_PREFIX):
                obj = self.ctx.pod_group(namespace, name)
            else:
                obj = self.ctx.claim(namespace, name)
        if obj is not None:
            reason = getattr(err, "reason", "ReconcileFailed")
            await self.recorder.event(obj, "Warning", reason, err.message, action="Reconciling")

    # -- shards (--shards > 1) ------------------------------------------------------------------------

    def _shard(self, key: str) -> int:
        kind, _, rest = key.partition(":")
        namespace, _, name = rest.partition("/")
        if kind + ":" == CLAIM_PREFIX:
            claim = self.ctx.claim(namespace, name) or self.ctx.tombstones.get(rest)
            return claim_shard(namespace, name, claim, self.shards)
        return shard_of(pod_shard_key(namespace, name), self.shards)

    def _claim_shard(self, claim: Obj) -> int:
        meta = claim["metadata"]
        return claim_shard(meta.get("namespace", ""), meta["name"], claim, self.shards)

    def _add(self, key: str) -> None:
        """Queue ``key`` if this replica holds its shard."""
        if self.shards == 1 or self._shard(key) in self.held:
            self.queue.add(key)

    async def shard_acquired(self, shard: int) -> None:
        """Shard won: queue every pod and claim of it (the previous holder may have stopped half way).

        First its labelled claims are watched (listed), and the claims that may be in it are read live
        into the mutation cache: a claim the previous holder made just before it died, not shown by an
        informer yet, would otherwise get its pod a second one."""
        if isinstance(self.claims, ShardedClaims):
            await self.claims.acquire(shard)
        listed = await self.kube.list(RESOURCE_CLAIMS, self.namespace,
                                      label_selector=unlabelled_selector(self.shards, but=shard))
        for claim in listed.get("items") or ():
            if self._claim_shard(claim) == shard:
                self.ctx.mutations.mutated(claim)
        self.held.add(shard)
        queued = 0
        for pod in self.pods.list():
            if self._wanted_pod(pod) and shard_of(key_of(pod), self.shards) == shard:
                self.queue.add(POD_PREFIX + key_of(pod))
                queued += 1
        for claim in self.claims.list():
            if self._claim_shard(claim) == shard:
                self.queue.add(CLAIM_PREFIX + key_of(claim))
                queued += 1
        groups = self.pod_groups.list() if self.pod_groups is not None and self.group_claims else []
        for group in groups:
            if shard_of(key_of(group), self.shards) == shard:
                self.queue.add(POD_GROUP_PREFIX + key_of(group))
                queued += 1
        if shard == EVICTION_SHARD and self.eviction is not None and self._eviction_task is None:
            self.eviction.resync()
            self._eviction_task = asyncio.create_task(self.eviction.runner.run(), name="taint-eviction")
        log.info("shard taken over", shard=shard, queued=queued)

    async def shard_lost(self, shard: int) -> None:
        """Shard given up (or its Lease not renewed): stop its reconciles and wait until they ended;
        then stop watching its labelled claims."""
        self.held.discard(shard)
        if shard == EVICTION_SHARD and self._eviction_task is not None:
            task, self._eviction_task = self._eviction_task, None
            task.cancel()
            await asyncio.wait({task})
        await self.in_flight.cancel(shard)
        if isinstance(self.claims, ShardedClaims):
            await self.claims.release(shard)

    # -- event handlers: enqueue only ------------------------------------------------------------

    @staticmethod
    def _wanted_pod(pod: Obj) -> bool:
        """A pod with claims or an extended resource claim (upstream ignores the others as well)."""
        return bool((pod.get("spec") or {}).get("resourceClaims") or extended_claim_name(pod))

    def _on_pod(self, event: EventType, old: Obj | None, new: Obj | None) -> None:
        pod = new if new is not None else old
        if pod is not None and (event == "delete" or pod_is_finished(pod)):
            self._protected_group_of(pod)
        if pod is None:
            return
        if not self._wanted_pod(pod):
            self._orphaned_by(event, pod)
            return
        if event == "delete":
            self.ctx.deleted_pods.add(pod["metadata"].get("uid", ""))
            self._enqueue_claims_of(pod)
            return
        deleting = (pod.get("metadata") or {}).get("deletionTimestamp")
        if (pod.get("spec") or {}).get("resourceClaims") and not deleting:
            # As upstream: a pod with only an extended resource claim, or one being deleted, needs no
            # sync_pod (it makes no claim for them); their claims are queued below.
            self._add_pod(pod)
        if pod_is_done(pod) or deleting:
            self._enqueue_claims_of(pod)

    def _orphaned_by(self, event: EventType, pod: Obj) -> None:
        """A pod without claims of its own that still controls one: the extended resource claim an
        allocator created and crashed before recording in ``pod.status`` (upstream's garbage collector
        deletes it by its owner reference; nothing else here would). Gone or done, its claims are queued
        (an index look-up, only on those two events)."""
        if event != "delete" and not pod_is_done(pod):
            return
        uid = pod["metadata"].get("uid", "")
        if not self.ctx.claims_owned_by(uid):
            return
        if event == "delete":
            self.ctx.deleted_pods.add(uid)
        self._enqueue_claims_of(pod)

    def _add_pod(self, pod: Obj) -> None:
        """Queue ``pod`` if :func:`~.pods.pod_needs_work` (as upstream's handlers: most events of a placed
        pod, its status written and its claims allocated and reserved, need no reconcile)."""
        if pod_needs_work(self.ctx, pod):
            self._add(POD_PREFIX + key_of(pod))

    def _protected_group_of(self, pod: Obj) -> None:
        """A member pod ended: its PodGroup, if being deleted, may lose its protection finalizer."""
        group = self.ctx.pod_group_of(pod) if self.group_claims else None
        if group is not None and (group.get("metadata") or {}).get("deletionTimestamp"):
            self._add(POD_GROUP_PREFIX + key_of(group))

    def _enqueue_claims_of(self, pod: Obj) -> None:
        namespace = pod["metadata"].get("namespace", "")
        for claim_key in claim_uses(pod):
            self._add(CLAIM_PREFIX + claim_key)
        for claim in self.ctx.claims_owned_by(pod["metadata"].get("uid", "")):
            self._add(f"{CLAIM_PREFIX}{namespace}/{claim['metadata']['name']}")

    def _on_claim(self, event: EventType, old: Obj | None, new: Obj | None) -> None:
        claim = new if new is not None else old
        if claim is None:
            return
        key = key_of(claim)
        if event == "delete":
            self.ctx.mutations.forget(key)
            self.ctx.tombstones.add(key, claim)
        self._add(CLAIM_PREFIX + key)
        for pod in self.ctx.pods_indexed(BY_CLAIM, key):
            self._add_pod(pod)
        owner = owning_pod(claim)
        if owner is not None:
            owner_key = f"{claim['metadata'].get('namespace', '')}/{owner[0]}"
            owner_pod = self.pods.get(owner_key)
            if owner_pod is None or pod_needs_work(self.ctx, owner_pod):
                self._add(POD_PREFIX + owner_key)
        if self.pod_groups is not None and self.group_claims:
            for group in self.pod_groups.by_index(BY_CLAIM, key):
                self._on_pod_group("update", None, group)
            group_owner = owning_pod_group(claim)
            if group_owner is not None:
                namespace = claim["metadata"].get("namespace", "")
                self._add(f"{POD_GROUP_PREFIX}{namespace}/{group_owner[0]}")
                self._add_members(f"{namespace}/{group_owner[0]}")

    def _on_template(self, event: EventType, old: Obj | None, new: Obj | None) -> None:
        if event == "delete" or new is None:
            return
        for pod in self.ctx.pods_indexed(BY_TEMPLATE, key_of(new)):
            self._add_pod(pod)
        if self.pod_groups is not None and self.group_claims:
            for group in self.pod_groups.by_index(BY_TEMPLATE, key_of(new)):
                self._add(POD_GROUP_PREFIX + key_of(group))

    def _on_pod_group(self, event: EventType, old: Obj | None, new: Obj | None) -> None:
        """Upstream ``enqueuePodGroup``: the group (its claims to make), its member pods (a status update
        names the group's claims for them); deleted: its claims (their reservations for it go)."""
        group = new if new is not None else old
        if group is None:
            return
        key = key_of(group)
        if not self.group_claims:  # GenericWorkload only: a new group wakes the members waiting for it
            if event == "add":
                self._add_members(key)
            return
        if event == "delete":
            self.ctx.deleted_pods.add(group["metadata"].get("uid", ""))
            namespace = group["metadata"].get("namespace", "")
            for claim_key in group_claim_keys(group):
                self._add(CLAIM_PREFIX + claim_key)
            for claim in self.ctx.claims_owned_by(group["metadata"].get("uid", "")):
                self._add(f"{CLAIM_PREFIX}{namespace}/{claim['metadata']['name']}")
            return
        if needs_sync(self.ctx, group):
            self._add(POD_GROUP_PREFIX + key)
        self._add_members(key)

    def _add_members(self, group_key: str) -> None:
        """Queue the member pods of PodGroup ``group_key`` that have claims (as upstream: the others have
        nothing to do with the group's claims)."""
        for pod in self.ctx.pods_indexed(BY_MEMBER, group_key):
            if (pod.get("spec") or {}).get("resourceClaims"):
                self._add(POD_PREFIX + key_of(pod))
