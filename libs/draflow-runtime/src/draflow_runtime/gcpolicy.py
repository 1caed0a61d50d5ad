"""The process's garbage-collector policy of a service that caches what it watches (the claim-controller,
the structured-allocator): fewer young collections, and the synced caches left out of the full ones.

A watch event decodes into hundreds of small dicts and lists (a pod with its managedFields), so CPython's
default young-generation threshold (700 allocations) starts a collection every few events, and every
tenth of those a middle one; each full collection walks every object the informers cache (all pods and
claims; the allocator's slices too). Measured in the side-by-side template workload
(``bench/side_by_side.py``, scale 0.2), that was about 8 % of the claim-controller's CPU; in the stream
workload (scale 0.4) 0.74 of the allocator's 7.5 s (0.17 s with this policy). Reference counting frees
almost all of these objects anyway (watch events and cached objects hold no cycles), so collecting less
often loses little memory.

:func:`tune` raises the young threshold once at start-up; :func:`freeze_when_synced` moves what exists
once the caches have been listed (the cache, the imported modules) into the permanent generation, so full
collections only walk what came after. Frozen objects are still freed by reference counting.
"""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable

from .log import get_logger

__all__ = ["YOUNG_THRESHOLD", "freeze_when_synced", "tune"]

log = get_logger(__name__)

#: Allocations (minus deallocations) between two young collections (CPython's default: 700).
YOUNG_THRESHOLD = 20_000


def tune() -> None:
    """Raise the young-generation threshold (the older generations keep their ratios)."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


async def freeze_when_synced(wait_synced: Callable[[], Awaitable[None]]) -> None:
    """Once ``wait_synced()`` returns: one full collection, then freeze everything that survived."""
    await wait_synced()
    gc.collect()
    gc.freeze()
    log.info("caches synced, objects frozen for the garbage collector", frozen=gc.get_freeze_count())
