"""Waiting for binding conditions between the claim writes and the binding (upstream: PreBind).

:meth:`BindingWaiter.wait` runs inside a write pipeline, never in the decision loop, and holds no write
slot. It reads the claims from the informer cache only: it wakes when the informer reports a change of
one of the claims it waits for (:meth:`notify`, called from the claim handler) and otherwise re-checks
every ``poll_interval`` seconds (the timeout is measured from ``allocationTimestamp``). The pure rules
are in :mod:`.bindingconds`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from .binder import ClaimPlan, WriteFailed
from .bindingconds import BindingState, binding_status, needs_binding_conditions, utcnow

__all__ = ["BindingFailed", "BindingWaiter"]


class BindingFailed(WriteFailed):
    """A binding failure condition became True or the binding timeout passed (``claim`` names it)."""


class BindingWaiter:
    def __init__(self, get_claim: Callable[[str], Mapping[str, Any] | None], *, timeout: float,
                 poll_interval: float, clock: Callable[[], datetime] = utcnow) -> None:
        self.get_claim = get_claim
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.clock = clock
        self._wakeups: dict[str, set[asyncio.Event]] = {}

    def notify(self, claim_key: str) -> None:
        for event in self._wakeups.get(claim_key, ()):
            event.set()

    def pending(self, claims: list[ClaimPlan]) -> list[ClaimPlan]:
        """The claims of a plan whose devices have binding conditions."""
        return [cp for cp in claims if needs_binding_conditions(self._allocation(cp))]

    def _allocation(self, cp: ClaimPlan) -> Mapping[str, Any] | None:
        if cp.allocation is not None:
            return cp.allocation
        cached = self.get_claim(cp.key) or cp.claim
        return (cached.get("status") or {}).get("allocation")

    async def wait(self, claims: list[ClaimPlan]) -> None:
        """Return once every binding condition of ``claims`` is True. Raises :class:`BindingFailed`
        (failure condition, timeout) or :class:`WriteFailed` (the claim vanished or was replaced)."""
        if not claims:
            return
        event = asyncio.Event()
        for cp in claims:
            self._wakeups.setdefault(cp.key, set()).add(event)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout  # also bounds a claim without allocationTimestamp
        try:
            while True:
                event.clear()
                if self._all_ready(claims):
                    return
                left = deadline - loop.time()
                if left <= 0:
                    raise BindingFailed(f"binding conditions not met within {self.timeout:g}s",
                                        claim=claims[0].key)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), min(self.poll_interval, left))
        finally:
            for cp in claims:
                waiting = self._wakeups.get(cp.key)
                if waiting is not None:
                    waiting.discard(event)
                    if not waiting:
                        del self._wakeups[cp.key]

    def _all_ready(self, claims: list[ClaimPlan]) -> bool:
        ready = True
        now = self.clock()
        for cp in claims:
            cached = self.get_claim(cp.key)
            if cached is None or cached["metadata"].get("uid") != cp.uid:
                raise WriteFailed("claim vanished while waiting for binding conditions", claim=cp.key)
            status = binding_status(cached, self._allocation(cp), now=now, timeout=self.timeout)
            if status.state.unavailable:
                raise BindingFailed(status.message, claim=cp.key)
            ready = ready and status.state in (BindingState.READY, BindingState.NONE)
        return ready
