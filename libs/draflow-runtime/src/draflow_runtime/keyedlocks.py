"""One asyncio lock per key, created on first use and dropped when its last user leaves.

Used where work about one object must run one at a time while work about other objects runs
concurrently: the Event recorder (per object and message), the allocator's turns on a shared claim and
the kubelet-dra-shim's claims (:meth:`KeyedLocks.hold_all`: every claim of a pod at once).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable, Iterable


class KeyedLocks:
    """``async with locks.hold(key):`` — serialises holders of the same key only. ``len(locks)`` is the
    number of keys in use (0 when nobody holds or waits)."""

    def __init__(self) -> None:
        self._locks: dict[Hashable, tuple[asyncio.Lock, int]] = {}  # key -> (lock, holders + waiters)

    @contextlib.asynccontextmanager
    async def hold_all(self, keys: Iterable[Hashable]) -> AsyncIterator[None]:
        """Hold the lock of every key in ``keys`` (no duplicates needed), taken in sorted order so two
        callers holding overlapping sets never deadlock. Keys must be mutually orderable (e.g. str)."""
        async with contextlib.AsyncExitStack() as stack:
            for key in sorted(set(keys)):  # type: ignore[type-var]
                await stack.enter_async_context(self.hold(key))
            yield

    def __len__(self) -> int:
        return len(self._locks)

    @contextlib.asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)
