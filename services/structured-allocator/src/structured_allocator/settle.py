"""Giving up the devices of a failed placement only when the API server says they are free.

A status write whose answer was lost (the connection broke, kube-apiserver died mid-request) may have
landed. If the undo cannot read the claim either, nobody knows whether the claim is allocated, and the
informer may lag for seconds (it is re-listing after the same outage). Releasing the assumption then
would hand the same devices to the next pod while the API server has them allocated: a double
allocation (seen in `make chaos`: two claims on one partition after kube-apiserver was killed).

So a failed pipeline gives up each allocation it tried to write in one of three ways:

* the undo deallocated it, or found it unallocated: :meth:`AssumeCache.release` (the informer's view);
* the undo read the claim and it stays allocated (someone else's allocation, or our earlier write whose
  answer was lost): :meth:`AssumeCache.settle` with that read, so the devices count as used at once;
* the undo failed: the assumption stays (the devices stay held) and :func:`settle_claim` reads the
  claim with backoff until the API server answers, then settles with what it has.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from draflow_runtime.errors import ApiError, NotFound, TransportError
from draflow_runtime.kube import RESOURCE_CLAIMS, KubeClient
from draflow_runtime.log import get_logger

from .assume import AssumeCache, Assumed
from .binder import ClaimPlan

__all__ = ["give_up", "settle_claim"]

log = get_logger(__name__)


def give_up(assume: AssumeCache, kube: KubeClient, cp: ClaimPlan,
            known: Mapping[str, Mapping[str, Any] | None],
            spawn: Callable[[Any, str], object], wake: Callable[[str], None]) -> None:
    """Give up the allocation ``cp`` tried to write, by what the undo learnt (``known``, from
    :meth:`Binder.undo`). ``spawn(coroutine, name)`` runs it in the background; ``wake`` requeues the claim's
    waiting pods."""
    if cp.uid not in known:
        assume.release(cp.uid)
        return
    claim = known[cp.uid]
    entry = assume.assumed(cp.uid)
    if claim is not None:
        assume.settle(cp.uid, claim, entry)
        return
    log.warning("allocation write outcome unknown, holding its devices until the API server answers",
                claim=cp.key)
    spawn(settle_claim(assume, kube, cp, entry, wake), f"settle-{cp.key}")


async def settle_claim(assume: AssumeCache, kube: KubeClient, cp: ClaimPlan, entry: Assumed | None,
                       wake: Callable[[str], None], *, first_delay: float = 0.5,
                       max_delay: float = 30.0) -> None:
    """Read the claim until the API server answers, then settle the assumption with it."""
    meta = cp.claim["metadata"]
    delay = first_delay
    while True:
        try:
            claim: Mapping[str, Any] | None = await kube.get(RESOURCE_CLAIMS, meta["name"], meta["namespace"])
        except NotFound:
            claim = None
        except (ApiError, TransportError) as err:
            log.info("claim not readable yet, still holding its devices", claim=cp.key, error=str(err),
                     retry_in=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, max_delay)
            continue
        if claim is not None and claim["metadata"].get("uid") != cp.uid:
            claim = None  # replaced: the old claim is gone
        assume.settle(cp.uid, claim, entry)
        allocated = bool(claim and (claim.get("status") or {}).get("allocation"))
        log.info("claim settled after an unknown write outcome", claim=cp.key, allocated=allocated)
        wake(cp.key)
        return
