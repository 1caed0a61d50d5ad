"""This process's own recent writes, kept until the informer has caught up (or a TTL passes).

A controller that writes and then reads its informer may read the world from before its own write: the
claim-controller would create a second claim for one pod claim, the slice-publisher would plan a pool from
slices it has just replaced. client-go's ``MutationCache`` is the upstream answer, and this is ours, shared
by both services.

Lookups merge the informer's object with the recorded write and return the newer one:

* a recorded write (:meth:`MutationCache.mutated`, the object a create/update/patch returned) wins while
  it is newer than the informer's copy (``resourceVersion`` compared as integers, as in client-go: the
  API server's resourceVersions of one resource are one sequence, so this also holds for an object
  deleted and created again under the same name; when either is not an integer the informer's copy
  wins);
* a recorded delete (:meth:`MutationCache.deleted`) hides the informer's copy of the deleted object (a
  UID this process deleted under that key) until the informer drops it;
* with ``seen_rv`` (the informer's last resourceVersion) a write the informer has already passed is
  history even when the informer no longer shows the object (someone deleted it meanwhile).

An entry is dropped once the informer's copy wins, on :meth:`MutationCache.forget` (the informer saw the
object deleted) or after ``ttl`` seconds. An optional ``index`` function (object → values) lets
:meth:`MutationCache.by_index` merge an informer index (claims by owner pod UID, slices by pool) with the
writes. Not thread-safe: one event loop.

Expiry is amortised O(1) per call: entries live in an ``OrderedDict`` in deadline order (every entry
gets the same TTL and a re-recorded key moves to the end), so expiring pops from the front and stops
at the first live entry. A lookup never walks or copies the whole cache.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MutationCache", "object_key"]

Obj = Mapping[str, Any]


def object_key(obj: Obj) -> str:
    """``<namespace>/<name>`` (``/<name>`` for a cluster-scoped object), the informer's key."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _rv(obj: Obj | None) -> int | None:
    try:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")
    except ValueError:
        return None


def _uid(obj: Obj) -> str | None:
    return (obj.get("metadata") or {}).get("uid")


@dataclass
class _Entry:
    deadline: float
    obj: Obj | None  # None: deleted by this process
    gone: set[str] = field(default_factory=set)  # UIDs this process deleted under the key
    indexed: tuple[str, ...] = ()


class MutationCache:
    """Recent writes and deletes, by informer key and optionally by ``index`` (see the module docstring)."""

    def __init__(
        self,
        ttl: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        *,
        index: Callable[[Obj], Iterable[str]] | None = None,
    ) -> None:
        self._ttl = ttl
        self._clock = clock
        self._index = index
        # Deadline order (see the module docstring): OrderedDict finds its first entry in O(1) even after
        # many pops from the front (a plain dict scans the holes those pops leave).
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._by_index: dict[str, set[str]] = {}

    def __len__(self) -> int:
        self._expire()
        return len(self._entries)

    def mutated(self, obj: Obj) -> None:
        """Record the object a write returned (a create, update or patch answer)."""
        self._record(object_key(obj), obj, obj, set())

    def deleted(self, obj: Obj) -> None:
        """Record that this process deleted ``obj`` (the object as it was before the delete)."""
        uid = _uid(obj)
        self._record(object_key(obj), None, obj, {uid} if uid else set())

    def forget(self, key: str) -> None:
        """Drop ``key`` (the informer saw it deleted)."""
        self._drop(key)

    def get(self, key: str, cached: Obj | None, *, seen_rv: str | int | None = None) -> Obj | None:
        """The newer of the informer's object ``cached`` and the recorded write for ``key``; None when
        the object does not exist as far as this process knows."""
        self._expire()
        entry = self._entries.get(key)
        if entry is None:
            return cached
        ours = cached is not None and _uid(cached) in entry.gone  # the informer shows what we deleted
        recorded = entry.obj
        if recorded is None:
            if ours:
                return None
            self._drop(key)
            return cached
        recorded_rv = _rv(recorded)
        if seen_rv is not None and recorded_rv is not None and _int(seen_rv) >= recorded_rv:
            self._drop(key)  # the informer has passed our write
            return cached
        if cached is None or ours:
            return recorded
        cached_rv = _rv(cached)
        if cached_rv is None or recorded_rv is None or cached_rv >= recorded_rv:
            # The informer caught up (or the object was replaced since): the recorded write is history.
            self._drop(key)
            return cached
        return recorded

    def by_index(
        self, value: str, cached: Iterable[Obj], *, seen_rv: str | int | None = None
    ) -> list[Obj]:
        """The informer's objects under index ``value`` (``cached``) merged with the recorded writes."""
        self._expire()
        merged: dict[str, Obj] = {object_key(obj): obj for obj in cached}
        for key in list(self._by_index.get(value, ())):
            obj = self.get(key, merged.get(key), seen_rv=seen_rv)
            if obj is None:
                merged.pop(key, None)
            else:
                merged[key] = obj
        return list(merged.values())

    def _record(self, key: str, obj: Obj | None, source: Obj, gone: set[str]) -> None:
        old = self._entries.get(key)
        if old is not None:
            gone |= old.gone
        self._drop(key)
        indexed = tuple(self._index(source)) if self._index is not None else ()
        self._entries[key] = _Entry(self._clock() + self._ttl, obj, gone, indexed)
        for value in indexed:
            self._by_index.setdefault(value, set()).add(key)

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        for value in entry.indexed:
            keys = self._by_index.get(value)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_index[value]

    def _expire(self) -> None:
        now = self._clock()
        entries = self._entries
        while entries:
            key, entry = next(iter(entries.items()))
            if entry.deadline > now:
                break
            self._drop(key)

def _int(rv: str | int) -> int:
    try:
        return int(rv or 0)
    except ValueError:
        return 0
