"""One asyncio lock per key, created on first use and dropped when its last user leaves.

Used where work about one object must run one at a time while work about other objects runs
concurrently: the Event recorder (per object and message) and the allocator's turns on a shared claim.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable


class KeyedLocks:
    """``async with locks.hold(key):`` — serialises holders of the same key only. ``len(locks)`` is the
    number of keys in use (0 when nobody holds or waits)."""

    def __init__(self) -> None:
        self._locks: dict[Hashable, tuple[asyncio.Lock, int]] = {}  # key -> (lock, holders + waiters)

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
