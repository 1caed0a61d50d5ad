"""PostFilter's writes, in the background: give an allocated claim back so that it can be allocated
afresh (:mod:`.postfilter` for one pod, :mod:`.podgroup_postfilter` for a PodGroup).

* ``deallocate`` — only while the claim still has the allocation seen and is reserved for nobody or
  only ``consumer_uid`` (the pod, or the PodGroup): :meth:`~.binder.Binder.deallocate_unused`;
* ``unreserve`` — the PodGroup's ``reservedFor`` entry removed (strategic-merge ``$patch: delete`` by
  UID): :meth:`~.binder.Binder.remove_reservation`; the allocation stays (upstream).

One write at a time per claim (:class:`GiveBacks`); a Normal Event on the pod says what was done. The
claim's informer event that follows retries the pod (or its group); a pod whose attempt found the claim's
write still running is retried when it ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Literal

from draflow_runtime.events import EventRecorder
from draflow_runtime.informer import key_of
from draflow_runtime.log import get_logger

from .binder import Binder

__all__ = ["GiveBacks", "give_back"]

log = get_logger(__name__)


async def give_back(binder: Binder, recorder: EventRecorder, pod: Mapping[str, Any], claim: Mapping[str, Any],
                    *, consumer_uid: str, kind: Literal["deallocate", "unreserve"] = "deallocate",
                    why: str = "no node fits") -> None:
    """Make the write (see the module docstring); failures are logged (the next attempt decides again)."""
    ckey = key_of(dict(claim))
    try:
        if kind == "unreserve":
            await binder.remove_reservation(claim, consumer_uid)
            message = f'{why}: removed its PodGroup from the reservations of ResourceClaim "{ckey}"'
            reason = "ClaimUnreserved"
        else:
            if not await binder.deallocate_unused(claim, consumer_uid):
                return
            message = f'{why}: deallocated ResourceClaim "{ckey}" so that it can be allocated again'
            reason = "ClaimDeallocated"
        log.info("claim given back", claim=ckey, kind=kind)
        await recorder.event(dict(pod), "Normal", reason, message, action="Deallocating")
    except Exception as err:
        log.warning("post-filter write failed", claim=ckey, kind=kind, error=repr(err))


class GiveBacks:
    """PostFilter's writes in the background, one at a time per claim, under the write slots."""

    def __init__(self, binder: Binder, recorder: EventRecorder, slots: asyncio.Semaphore,
                 spawn: Callable[[Any, str], object], requeue: Callable[[str], None]) -> None:
        self.binder, self.recorder, self.slots = binder, recorder, slots
        self.spawn, self.requeue = spawn, requeue
        self._running: dict[str, set[str]] = {}  # claim uid -> pods whose attempt skipped it meanwhile

    def start(self, pod: Mapping[str, Any], claim: Mapping[str, Any], *, consumer_uid: str = "",
              kind: Literal["deallocate", "unreserve"] = "deallocate", why: str = "no node fits") -> None:
        """Give ``claim`` back (:func:`give_back`); ``consumer_uid``: the one consumer it may still be
        reserved for (default: the pod)."""
        uid = claim["metadata"]["uid"]
        if uid in self._running:
            self._running[uid].add(key_of(dict(pod)))
            return
        self._running[uid] = set()

        async def run() -> None:
            try:
                async with self.slots:
                    await give_back(self.binder, self.recorder, pod, claim, kind=kind, why=why,
                                    consumer_uid=consumer_uid or pod["metadata"]["uid"])
            finally:
                for key in self._running.pop(uid, ()):
                    self.requeue(key)

        self.spawn(run(), f"give-back-{key_of(dict(claim))}")
