"""Which shard a key belongs to, and the reconciles of a shard that is being given up.

With ``--shards N`` (N > 1) replicas split the work through Leases (:mod:`draflow_runtime.shards`). A pod
and every claim it owns land in one shard, that of ``<namespace>/<pod name>``, so the one replica that
creates a pod's claims also cleans them up, and "never two claims for one pod claim" rests on the same
things as with one replica: one reconcile of the pod at a time, the mutation cache of the replica that
wrote the claim, the owner-UID index. A claim without an owner pod (one a user made, referenced by name)
is in the shard of ``<namespace>/<claim name>``. A PodGroup and the claims it owns are in the shard of
``<namespace>/<PodGroup name>``. The device-taint eviction and DeviceTaintRule status are
one unit of work, done by the holder of shard 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from draflow_runtime.dra import owning_pod
from draflow_runtime.podgroups import owning_pod_group
from draflow_runtime.shards import shard_of

__all__ = ["EVICTION_SHARD", "InFlight", "claim_shard_key", "pod_shard_key", "shard_of"]

#: The shard whose holder runs the device-taint eviction and writes DeviceTaintRule status.
EVICTION_SHARD = 0

Obj = dict[str, Any]
T = TypeVar("T")


def pod_shard_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def claim_shard_key(namespace: str, name: str, claim: Obj | None) -> str:
    """The owner pod's key for a generated (or extended resource) claim, the owner PodGroup's for a
    PodGroup's claim (its shard is that of ``podgroup:<namespace>/<name>``), else the claim's own key."""
    owner = (owning_pod(claim) or owning_pod_group(claim)) if claim is not None else None
    return pod_shard_key(namespace, owner[0] if owner is not None else name)


class InFlight:
    """The reconciles running per shard, so that giving up a shard can cancel them and wait until they
    are gone before its Lease is released (nobody else may act on the shard while one still writes)."""

    def __init__(self) -> None:
        self._tasks: dict[int, set[asyncio.Task[Any]]] = {}

    async def run(self, shard: int, work: Callable[[], Awaitable[T]]) -> T | None:
        """Run ``work()`` as a task of ``shard``; None when it was cancelled because the shard was lost
        (its new holder reconciles everything of the shard again)."""
        task: asyncio.Task[T] = asyncio.ensure_future(work())
        tasks = self._tasks.setdefault(shard, set())
        tasks.add(task)
        try:
            await asyncio.wait({task})
        finally:
            tasks.discard(task)
            if not task.done():  # the worker itself is being cancelled (shut-down)
                task.cancel()
        if task.cancelled():
            return None
        return task.result()

    async def cancel(self, shard: int) -> None:
        """Cancel the reconciles of ``shard`` and wait until all of them have ended."""
        tasks = list(self._tasks.get(shard, ()))
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
