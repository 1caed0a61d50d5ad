"""Claims this controller just wrote, kept until the informer has caught up (or a TTL passes).

Without it this sequence makes a second claim for one pod claim: create the claim → the pod-status
apply fails → the pod is retried before the claim informer has seen the create → no claim found →
create again. Upstream's controller solves it the same way (client-go ``MutationCache``).

Lookups merge the informer's view with the recorded writes and return the newer object: the one with
the larger ``resourceVersion`` (compared as integers; when either is not an integer the informer's
object wins, as in client-go). An entry is dropped when the informer holds the same or a newer version,
when the informer reports the object deleted (:meth:`forget`), or after ``ttl`` seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .ownership import owner_pod_uid

__all__ = ["MutationCache"]

Obj = Mapping[str, Any]


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _rv(obj: Obj) -> int | None:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or "")
    except ValueError:
        return None


class MutationCache:
    """Recent writes of claims, indexed by key ``<ns>/<name>`` and by owning pod UID. Not thread-safe
    (one event loop)."""

    def __init__(self, ttl: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._entries: dict[str, tuple[float, Obj]] = {}
        self._by_owner: dict[str, set[str]] = {}

    def __len__(self) -> int:
        self._expire()
        return len(self._entries)

    def mutated(self, obj: Obj) -> None:
        """Record the object a write returned (a create, patch or update answer)."""
        key = _key(obj)
        self._drop(key)
        self._entries[key] = (self._clock() + self._ttl, obj)
        for uid in owner_pod_uid(obj):
            self._by_owner.setdefault(uid, set()).add(key)

    def forget(self, key: str) -> None:
        """Drop ``key`` (the informer saw it deleted)."""
        self._drop(key)

    def get(self, key: str, cached: Obj | None) -> Obj | None:
        """The newer of the informer's object ``cached`` and the recorded write for ``key``."""
        self._expire()
        entry = self._entries.get(key)
        if entry is None:
            return cached
        recorded = entry[1]
        if cached is None:
            return recorded
        cached_uid = (cached.get("metadata") or {}).get("uid")
        recorded_uid = (recorded.get("metadata") or {}).get("uid")
        cached_rv, recorded_rv = _rv(cached), _rv(recorded)
        if cached_uid != recorded_uid or cached_rv is None or recorded_rv is None or cached_rv >= recorded_rv:
            # The informer caught up (or the object was replaced): the recorded write is history.
            self._drop(key)
            return cached
        return recorded

    def by_owner(self, uid: str, cached: Iterable[Obj]) -> list[Obj]:
        """Claims controlled by the pod with ``uid``: the informer's (``cached``) merged with writes."""
        self._expire()
        merged: dict[str, Obj] = {_key(obj): obj for obj in cached}
        for key in list(self._by_owner.get(uid, ())):
            obj = self.get(key, merged.get(key))
            if obj is not None:
                merged[key] = obj
        return list(merged.values())

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        for uid in owner_pod_uid(entry[1]):
            keys = self._by_owner.get(uid)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_owner[uid]

    def _expire(self) -> None:
        now = self._clock()
        # Entries are inserted with a constant TTL, so dict order is expiry order.
        for key, (deadline, _) in list(self._entries.items()):
            if deadline > now:
                break
            self._drop(key)
