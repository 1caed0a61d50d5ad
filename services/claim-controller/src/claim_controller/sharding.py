"""Which shard a key belongs to, and the reconciles of a shard that is being given up.

With ``--shards N`` (N > 1) replicas split the work through Leases (:mod:`draflow_runtime.shards`). A pod
and every claim it owns land in one shard, that of ``<namespace>/<pod name>``, so the one replica that
creates a pod's claims also cleans them up, and "never two claims for one pod claim" rests on the same
things as with one replica: one reconcile of the pod at a time, the mutation cache of the replica that
wrote the claim, the owner-UID index. A claim without an owner pod (one a user made, referenced by name)
is in the shard of ``<namespace>/<claim name>``. A PodGroup and the claims it owns are in the shard of
``<namespace>/<PodGroup name>``. The device-taint eviction and DeviceTaintRule status are
one unit of work, done by the holder of shard 0.

A claim the controller generates for a pod carries the label :data:`~.naming.SHARD_LABEL` =
``<i>-of-<N>`` (:func:`shard_label`: its owner pod's shard, fixed at creation), so a replica watches the
labelled claims of the shards it holds only (:func:`shard_selector`, one watch per shard) and the rest with
:func:`unlabelled_selector`: user claims, PodGroup claims (their member pods are in other shards),
extended resource claims (the allocator makes them), claims made under another shard count. Pods carry no
label of ours: every replica watches every pod. A claim with a label of this shard count is in the label's
shard (:func:`claim_shard`): for a generated claim that is its pod's, and a claim someone else labelled
is still reconciled by the one replica that sees it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from draflow_runtime.dra import owning_pod
from draflow_runtime.podgroups import owning_pod_group
from draflow_runtime.shards import shard_of

from .naming import SHARD_LABEL

__all__ = [
    "EVICTION_SHARD", "InFlight", "claim_shard", "claim_shard_key", "labelled_shard", "pod_shard_key",
    "shard_label", "shard_labels", "shard_of", "shard_selector", "unlabelled_selector",
]

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


def shard_label(shard: int, shards: int) -> str:
    """The value of :data:`~.naming.SHARD_LABEL` for ``shard`` of ``shards``: ``2-of-4``."""
    return f"{shard}-of-{shards}"


def shard_labels(namespace: str, pod_name: str, shards: int) -> dict[str, str]:
    """The labels of a claim generated for pod ``namespace/pod_name``: :data:`~.naming.SHARD_LABEL` with
    more than one shard, else none."""
    if shards < 2:
        return {}
    return {SHARD_LABEL: shard_label(shard_of(pod_shard_key(namespace, pod_name), shards), shards)}


def labelled_shard(claim: Obj, shards: int) -> int | None:
    """The shard the claim's :data:`~.naming.SHARD_LABEL` names for this shard count (None: no such
    label, or one of another shard count or malformed)."""
    value = ((claim.get("metadata") or {}).get("labels") or {}).get(SHARD_LABEL)
    if not isinstance(value, str):
        return None
    shard, sep, count = value.partition("-of-")
    if not sep or not shard.isdigit() or count != str(shards):
        return None
    return int(shard) if int(shard) < shards and value == shard_label(int(shard), shards) else None


def claim_shard(namespace: str, name: str, claim: Obj | None, shards: int) -> int:
    """The shard of claim ``namespace/name``: its label's (:func:`labelled_shard`), else its owner's or
    its own key's (:func:`claim_shard_key`)."""
    labelled = labelled_shard(claim, shards) if claim is not None else None
    if labelled is not None:
        return labelled
    return shard_of(claim_shard_key(namespace, name, claim), shards)


def shard_selector(shard: int, shards: int) -> str:
    """The label selector of the claims generated for the pods of ``shard``."""
    return f"{SHARD_LABEL}={shard_label(shard, shards)}"


def unlabelled_selector(shards: int, but: int | None = None) -> str:
    """The label selector of every claim without a shard label of this shard count (``notin`` also
    matches a claim without the label); with ``but``, the claims labelled for that shard as well."""
    return f"{SHARD_LABEL} notin ({','.join(shard_label(i, shards) for i in range(shards) if i != but)})"


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
