"""The claims one replica watches when the work is split (``--shards N``, N > 1).

Every replica decoding every claim event costs each of them the whole cluster's claim churn. Claims the
controller generates carry their pod's shard in a label (:data:`~.naming.SHARD_LABEL`), so
:class:`ShardedClaims` watches them per shard — one informer with :func:`~.sharding.shard_selector` for
each shard it watches, started (a fresh list) when the shard is won and stopped (its cache dropped, no
events) once the shard's work has stopped — plus one informer with
:func:`~.sharding.unlabelled_selector` for every other claim (user claims, PodGroup claims, extended
resource claims, claims of another shard count). Read like one :class:`~draflow_runtime.informer.Informer`:
``get``, ``list``, ``by_index``, ``len``; every handler is added to every part.

A claim is in exactly one part (its label decides), except while someone relabels it: then the watch it
leaves reports it deleted and the one it joins reports it added, as for any two informers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from draflow_runtime.informer import Handler, Indexer, Informer
from draflow_runtime.kube import RESOURCE_CLAIMS, KubeClient
from draflow_runtime.log import get_logger

from .sharding import shard_selector, unlabelled_selector

__all__ = ["Claims", "ShardedClaims", "claim_cache"]

log = get_logger(__name__)

Obj = dict[str, Any]
NAME = "resourceclaims"
_List = list  # ``ShardedClaims.list`` shadows the builtin in the class body's annotations


class ShardedClaims:
    """The unlabelled claims, and the labelled claims of the shards :meth:`watch` was given."""

    def __init__(self, kube: KubeClient, namespace: str | None, shards: int,
                 indexers: dict[str, Indexer], *, everything_with: int | None = None) -> None:
        """``everything_with``: while that shard is held, the claims of every shard are watched (the
        device-taint eviction of the holder of shard 0 looks at every allocated claim)."""
        self._kube, self._namespace, self.shards = kube, namespace, shards
        self._everything_with = everything_with
        self._held: set[int] = set()  # shards won or being won
        self._indexers = indexers
        self._handlers: _List[Handler] = []
        self.unlabelled = Informer(kube, RESOURCE_CLAIMS, namespace, unlabelled_selector(shards),
                                   indexers=indexers, name=NAME)
        self.parts: dict[int, Informer] = {}
        self._running = False

    def _informers(self) -> _List[Informer]:
        return [self.unlabelled, *self.parts.values()]

    # -- Informer-like ---------------------------------------------------------------------------

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)
        for informer in self._informers():
            informer.add_handler(handler)

    async def start(self) -> None:
        self._running = True
        for informer in self._informers():
            await informer.start()

    async def stop(self) -> None:
        """Stop every watch (the caches stay, as :meth:`Informer.stop`). Idempotent."""
        self._running = False
        for informer in self._informers():
            await informer.stop()

    async def wait_synced(self) -> None:
        for informer in self._informers():
            await informer.wait_synced()

    @property
    def synced(self) -> bool:
        return all(informer.synced for informer in self._informers())

    def get(self, key: str) -> Obj | None:
        for informer in self._informers():
            obj = informer.get(key)
            if obj is not None:
                return obj
        return None

    def list(self) -> _List[Obj]:
        return [obj for informer in self._informers() for obj in informer.list()]

    def by_index(self, index: str, value: str) -> _List[Obj]:
        return [obj for informer in self._informers() for obj in informer.by_index(index, value)]

    def __len__(self) -> int:
        return sum(len(informer) for informer in self._informers())

    # -- shards ----------------------------------------------------------------------------------

    def watched(self) -> set[int]:
        """The shards whose labelled claims are watched: those held, or all of them while
        ``everything_with`` is held."""
        if self._everything_with is not None and self._everything_with in self._held:
            return set(range(self.shards))
        return set(self._held)

    async def acquire(self, shard: int) -> None:
        """``shard`` is being won: watch its labelled claims; return once they are listed."""
        self._held.add(shard)
        await self.watch(self.watched())

    async def release(self, shard: int) -> None:
        """``shard`` was given up (its work has stopped): stop watching what is no longer needed."""
        self._held.discard(shard)
        await self.keep_only(self.watched())

    async def watch(self, shards: Iterable[int]) -> None:
        """Watch the labelled claims of ``shards`` too; return once the watch of each of them has listed
        (also one another call started)."""
        wanted = set(shards)
        new = sorted(wanted - set(self.parts))
        for shard in new:
            informer = Informer(self._kube, RESOURCE_CLAIMS, self._namespace,
                                shard_selector(shard, self.shards), indexers=self._indexers,
                                name=f"{NAME}-shard-{shard}")
            for handler in self._handlers:
                informer.add_handler(handler)
            self.parts[shard] = informer
            if self._running:
                await informer.start()
        if new:
            log.info("claim watches started", started=new, shards=sorted(self.parts))
        if self._running:
            for shard in sorted(wanted):
                part = self.parts.get(shard)
                if part is not None:
                    await part.wait_synced()

    async def keep_only(self, shards: Iterable[int]) -> None:
        """Stop watching the labelled claims of every shard not in ``shards`` and forget them (no events:
        they are not deleted, only no longer this replica's)."""
        keep = set(shards)
        gone = [shard for shard in self.parts if shard not in keep]
        for shard in gone:
            part = self.parts.pop(shard, None)  # None: a concurrent call stopped it already
            if part is not None:
                await part.stop()
        if gone:
            log.info("claim watches stopped", stopped=sorted(gone), shards=sorted(self.parts))


#: What the controller reads claims from: one informer, or (``--shards`` above 1) the sharded watches.
Claims = Informer | ShardedClaims


def claim_cache(kube: KubeClient, namespace: str | None, shards: int, indexers: dict[str, Indexer], *,
                everything_with: int | None = None) -> Claims:
    """One informer on every claim with one shard, else :class:`ShardedClaims`."""
    if shards > 1:
        return ShardedClaims(kube, namespace, shards, indexers, everything_with=everything_with)
    return Informer(kube, RESOURCE_CLAIMS, namespace, name=NAME, indexers=indexers)
