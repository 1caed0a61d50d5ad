"""What a reconcile may read and use: caches, the mutation cache, the API client, Events, NATS.

Reconciles read only from here (informer caches merged with the mutation cache); the few live GETs
(an unknown reserved pod, a recorded claim missing from the cache, the Node of a bound pod whose
allocation selects by labels) go through the helpers below, so every one of them is in one place.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from draflow_runtime.dra import pod_group_name
from draflow_runtime.errors import NotFound
from draflow_runtime.events import EventRecorder
from draflow_runtime.informer import Informer
from draflow_runtime.kube import NODES, POD_GROUPS, PODS, RESOURCE_CLAIMS, KubeClient
from draflow_runtime.mutationcache import MutationCache

from .allocator import AllocatorClient
from .claimcache import Claims
from .events_bus import ClaimEvents
from .reservations import GONE, PodState
from .settings import Settings

__all__ = [
    "BY_CLAIM", "BY_MEMBER", "BY_OWNER_UID", "BY_TEMPLATE", "AppliedStatuses", "Context", "DeletedPods",
    "Hooks", "Tombstones",
]

#: Pod index: ``<ns>/<claim>`` of every claim the pod uses (spec references and recorded names).
BY_CLAIM = "byClaim"
#: Pod index: ``<ns>/<template>`` of every template the pod's claims come from.
BY_TEMPLATE = "byTemplate"
#: Claim index: UID of the pod or PodGroup that controls the claim.
BY_OWNER_UID = "byOwnerUID"
#: Pod index: ``<ns>/<podgroup>`` of the PodGroup the pod belongs to (DRAWorkloadResourceClaims).
BY_MEMBER = "byPodGroup"

Obj = dict[str, Any]


@dataclass
class Hooks:
    """Test seams. ``after_claim_create(pod, claim)`` runs right after a claim create succeeded and
    before the pod status is written: raising or blocking there simulates a crash at the worst moment."""

    after_claim_create: Callable[[Obj, Obj], Awaitable[None]] | None = None


class DeletedPods:
    """LRU of the UIDs of pods (and PodGroups) the informer saw deleted (upstream keeps 500)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._uids: OrderedDict[str, None] = OrderedDict()

    def add(self, uid: str) -> None:
        self._uids[uid] = None
        self._uids.move_to_end(uid)
        while len(self._uids) > self._size:
            self._uids.popitem(last=False)

    def __contains__(self, uid: object) -> bool:
        return uid in self._uids


class Tombstones:
    """Claims the informer saw deleted, until the claim's reconcile has announced it (bounded)."""

    def __init__(self, size: int = 16384) -> None:
        self._size = size
        self._items: OrderedDict[str, Obj] = OrderedDict()

    def add(self, key: str, claim: Obj) -> None:
        self._items[key] = claim
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)

    def pop(self, key: str) -> Obj | None:
        return self._items.pop(key, None)

    def get(self, key: str) -> Obj | None:
        return self._items.get(key)

    def discard(self, key: str) -> None:
        self._items.pop(key, None)


class AppliedStatuses:
    """Pod statuses this process applied that the pod informer may not show yet (bounded LRU).

    By pod UID: the ``resourceVersion`` the apply returned and the claim names it recorded. While the
    cached pod is older than that write, the same names need no second apply: the write landed, and its
    watch event enqueues the pod again. Without this, a pod reconciled again before that event (the new
    claim's event enqueues its owner) applied the same status a second time (1.6-1.7 applies per pod in
    steady state; upstream writes once)."""

    def __init__(self, size: int = 16384) -> None:
        self._size = size
        self._items: OrderedDict[str, tuple[int, dict[str, str]]] = OrderedDict()

    def record(self, applied: Obj, names: dict[str, str]) -> None:
        """``applied``: the pod the apply returned."""
        meta = applied.get("metadata") or {}
        version = _int_rv(meta.get("resourceVersion"))
        if version is None:
            return
        uid = str(meta.get("uid", ""))
        self._items[uid] = (version, dict(names))
        self._items.move_to_end(uid)
        while len(self._items) > self._size:
            self._items.popitem(last=False)

    def pending(self, cached: Obj) -> bool:
        """This process applied a status to the pod after the version the cache shows: that write's own
        watch event is still to come (and queues the pod again). Changes nothing."""
        meta = cached.get("metadata") or {}
        entry = self._items.get(str(meta.get("uid", "")))
        if entry is None:
            return False
        seen = _int_rv(meta.get("resourceVersion"))
        return seen is not None and seen < entry[0]

    def landed(self, cached: Obj, names: dict[str, str]) -> bool:
        """Did this process apply exactly ``names`` to the pod after the version the cache shows?"""
        meta = cached.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        entry = self._items.get(uid)
        if entry is None:
            return False
        version, applied = entry
        seen = _int_rv(meta.get("resourceVersion"))
        if seen is None or seen >= version:
            del self._items[uid]  # the informer caught up with (or passed) the write: it decides now
            return False
        return applied == names


def _int_rv(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


@dataclass
class Context:
    """Dependencies of ``sync_pod``/``sync_claim``; built by the ``Controller``."""

    settings: Settings
    kube: KubeClient
    pods: Informer
    claims: Claims
    templates: Informer
    recorder: EventRecorder
    events: ClaimEvents
    allocator: AllocatorClient
    mutations: MutationCache
    deleted_pods: DeletedPods
    tombstones: Tombstones = field(default_factory=Tombstones)
    applied: AppliedStatuses = field(default_factory=AppliedStatuses)
    hooks: Hooks = field(default_factory=Hooks)
    tracer: trace.Tracer = field(default_factory=lambda: trace.get_tracer("claim_controller"))
    pod_groups: Informer | None = None  # GenericWorkload on: PodGroups of the watched namespaces

    def pod_group(self, namespace: str, name: str) -> Obj | None:
        """The cached PodGroup (None: unknown, or PodGroups are not watched)."""
        if self.pod_groups is None:
            return None
        return self.pod_groups.get(f"{namespace}/{name}")

    def pod_group_of(self, pod: Obj) -> Obj | None:
        """The cached PodGroup ``pod`` belongs to (None: none, unknown, or the gate is off)."""
        group = pod_group_name(pod)
        return self.pod_group(pod["metadata"].get("namespace", ""), group) if group else None

    async def pod_group_state(self, namespace: str, name: str, uid: str) -> PodState:
        """What is known of PodGroup ``name`` that had ``uid``: cache, then deleted UIDs, then a live GET."""
        if uid and uid in self.deleted_pods:
            return GONE
        cached = self.pod_group(namespace, name)
        if cached is not None:
            return cached
        try:
            return await self.kube.get(POD_GROUPS, name, namespace)
        except NotFound:
            return GONE

    def claim(self, namespace: str, name: str) -> Obj | None:
        """The claim from the informer, or the newer copy this process wrote."""
        key = f"{namespace}/{name}"
        return self.mutations.get(key, self.claims.get(key))  # type: ignore[return-value]

    def claims_owned_by(self, pod_uid: str) -> list[Obj]:
        """Claims controlled by the pod with ``pod_uid`` (informer index + mutation cache)."""
        return self.mutations.by_index(pod_uid, self.claims.by_index(BY_OWNER_UID, pod_uid))  # type: ignore[return-value]

    def pods_indexed(self, index: str, value: str) -> list[Obj]:
        """Cached pods under ``index`` = ``value`` (``BY_CLAIM``/``BY_TEMPLATE``)."""
        # Informer.list (a method) shadows the builtin in the informer's annotations, so mypy cannot
        # read by_index's return type; the value is a plain list of dicts.
        return list(self.pods.by_index(index, value))  # type: ignore[attr-defined]

    async def claim_anywhere(self, namespace: str, name: str) -> Obj | None:
        """The claim from the caches, else (``--shards`` above 1) live: a pod may use by name a claim
        generated for a pod of another shard, which this replica does not watch."""
        claim = self.claim(namespace, name)
        if claim is None and self.settings.shards > 1:
            claim = await self.live_claim(namespace, name)
        return claim

    async def live_claim(self, namespace: str, name: str) -> Obj | None:
        """GET the claim (the cache may lag); None when it does not exist. Kept in the mutation cache."""
        try:
            claim = await self.kube.get(RESOURCE_CLAIMS, name, namespace)
        except NotFound:
            return None
        self.mutations.mutated(claim)
        return claim

    async def pod_state(self, namespace: str, name: str, uid: str) -> PodState:
        """What is known of pod ``name`` that had ``uid``: cache, then deleted UIDs, then a live GET."""
        if uid and uid in self.deleted_pods:
            return GONE
        cached = self.pods.get(f"{namespace}/{name}")
        if cached is not None:
            return cached
        try:
            return await self.kube.get(PODS, name, namespace)
        except NotFound:
            return GONE

    async def node_labels(self, name: str) -> dict[str, str] | None:
        """Labels of Node ``name`` (live GET: needed only for label-based allocation selectors)."""
        try:
            node = await self.kube.get(NODES, name)
        except NotFound:
            return None
        return dict((node.get("metadata") or {}).get("labels") or {})
