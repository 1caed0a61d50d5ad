"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go semantics.

* A candidate takes the lease when it has no holder, or when the holder's record has not changed for
  ``lease_duration`` seconds of the candidate's **own** clock, measured from when the candidate last saw
  the record change (clocks of different machines are never compared).
* Every write is a compare-and-swap on ``metadata.resourceVersion``; losing a race is a normal "not now".
* A taker increments ``leaseTransitions`` and sets ``acquireTime``; the leader renews ``renewTime`` every
  ``retry_period`` and steps down if it could not renew for ``renew_deadline`` (or sees another holder).
* ``stop()`` releases: ``holderIdentity`` is cleared so a peer takes over at its next try. Cancelling
  ``run()`` instead behaves like a killed process: nothing is released and peers wait for expiry.

``renew_deadline`` must be shorter than ``lease_duration`` so a leader that cannot renew stops acting
before anyone else can take over.

``leader_election_master_status{name=<lease>}`` is 1 while this candidate leads and 0 otherwise: the gauge
client-go's leader election exports, so the alerts people have for kube-controller-manager and
kube-scheduler work for draflow's controllers too (a service without ``--leader-elect`` sets it to 1 for as
long as it runs; :meth:`draflow_runtime.servicecontext.ServiceContext.lead`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import random
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prometheus_client import Gauge

from .errors import AlreadyExists, ApiError, Conflict, NotFound, TransportError
from .kube import LEASES, KubeClient
from .leaserecord import ObservedLease
from .log import get_logger
from .metrics import registered_collector

if TYPE_CHECKING:
    from .settings import ServiceSettings

__all__ = ["LEADING", "LeaderElector"]

log = get_logger(__name__)

LEADING = registered_collector(
    Gauge, "leader_election_master_status",
    "1 while this process leads the Lease 'name' (or runs without leader election), else 0.", ["name"],
)

_JITTER = 1.2  # client-go JitterUntil factor for the acquire loop


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """One candidate for the leadership named by the Lease ``namespace``/``name``."""

    def __init__(
        self,
        kube: KubeClient,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        *,
        observed: ObservedLease | None = None,
    ) -> None:
        """``observed``: what is known of the Lease, shared with whoever else reads it for this candidate
        (a :class:`~draflow_runtime.shards.ShardCoordinator` refreshes it every retry period); by default
        only this candidate's own reads update it."""
        if not lease_duration > renew_deadline > retry_period * _JITTER > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period * 1.2 > 0")
        self._kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._is_leader = False
        self._stop = asyncio.Event()
        self._stopped = asyncio.Event()
        self._stopped.set()
        self.observed = observed if observed is not None else ObservedLease(lease_duration)
        self._log = log.bind(lease=f"{namespace}/{name}", identity=identity)
        self._leading = LEADING.labels(name)
        self._leading.set(0)

    @classmethod
    def from_settings(cls, kube: KubeClient, settings: ServiceSettings) -> LeaderElector:
        """The candidate a service's ``leader_election_*``, ``identity`` and lease timing settings
        describe."""
        return cls(
            kube, settings.leader_election_namespace, settings.leader_election_id, settings.identity,
            lease_duration=settings.lease_duration, renew_deadline=settings.renew_deadline,
            retry_period=settings.retry_period,
        )

    @property
    def is_leader(self) -> bool:
        """True while this candidate holds the lease and has renewed it within ``renew_deadline``."""
        return self._is_leader

    @property
    def leader(self) -> str:
        """The holder this candidate last observed ('' when none)."""
        return self.observed.holder

    async def run(
        self,
        on_started_leading: Callable[[], Awaitable[Any]],
        on_stopped_leading: Callable[[], Any] | None = None,
    ) -> None:
        """Campaign; once leading, run ``on_started_leading()`` as a task while renewing the lease.

        Returns when leadership is lost, when ``on_started_leading`` returns or raises, or after
        ``stop()``. Then the leading task is cancelled and ``on_stopped_leading()`` (plain or coroutine
        function) is called. The lease is released unless ``run`` itself was cancelled. One ``run`` at a
        time per elector; an elector may ``run`` again after it returned.
        """
        self._stop.clear()
        self._stopped.clear()
        leading: asyncio.Task[Any] | None = None
        release = True
        try:
            if not await self._acquire():
                return
            self._is_leader = True
            self._leading.set(1)
            self._log.info("became leader")
            leading = asyncio.ensure_future(on_started_leading())
            await self._renew(leading)
        except asyncio.CancelledError:
            release = False
            raise
        finally:
            was_leader = self._is_leader
            self._is_leader = False
            self._leading.set(0)
            if leading is not None:
                leading.cancel()
                await asyncio.wait({leading})
                if not leading.cancelled() and leading.exception() is not None:
                    self._log.error("leading task failed", exc_info=leading.exception())
            if was_leader:
                self._log.info("stopped leading")
                if release:
                    await self._release()
                if on_stopped_leading is not None:
                    await self._call(on_stopped_leading)
            self._stopped.set()

    async def run_forever(self, on_started_leading: Callable[[], Awaitable[Any]]) -> None:
        """``run`` again and again: a replica that loses the lease campaigns for it again at once.

        Returns only after ``stop()``; cancelling it behaves like cancelling ``run`` (no release)."""
        while True:
            await self.run(on_started_leading=on_started_leading)
            if self._stop.is_set():
                return
            self._log.warning("leadership lost, campaigning again")

    async def try_acquire(self) -> bool:
        """One attempt to take (or renew) the lease, without campaigning or leading: True when this
        candidate holds it afterwards. Never raises ``ApiError``. A ``run`` right after a successful
        attempt leads at once."""
        return await self._try_acquire_or_renew()

    async def stop(self) -> None:
        """Stop campaigning/leading, release the lease if held, and wait until ``run`` has returned.
        Idempotent."""
        self._stop.set()
        await self._stopped.wait()

    # -- loops -----------------------------------------------------------------------------------

    async def _sleep(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless stopped first; return True when stopped."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stop.wait()
        return self._stop.is_set()

    async def _acquire(self) -> bool:
        """Try every ``retry_period`` (jittered) until the lease is ours; False when stopped first."""
        while not self._stop.is_set():
            if await self._try_acquire_or_renew():
                return True
            if await self._sleep(self.retry_period * (1 + random.random() * (_JITTER - 1))):
                return False
        return False

    async def _renew(self, leading: asyncio.Task[Any]) -> None:
        """Renew every ``retry_period`` until stopped, the leading task ends, or renewal is lost."""
        last_renew = time.monotonic()
        stop_waiter = asyncio.create_task(self._stop.wait())
        try:
            while True:
                await asyncio.wait([leading, stop_waiter], timeout=self.retry_period,
                                   return_when=asyncio.FIRST_COMPLETED)
                if self._stop.is_set() or leading.done():
                    return
                if await self._renew_once(last_renew):
                    last_renew = time.monotonic()
                    continue
                holder = self.observed.holder
                if holder and holder != self.identity:
                    self._log.warning("lease taken by another holder", holder=holder)
                    return
                if time.monotonic() - last_renew >= self.renew_deadline:
                    self._log.warning("failed to renew lease within the deadline",
                                      deadline=self.renew_deadline)
                    return
        finally:
            stop_waiter.cancel()

    async def _renew_once(self, last_renew: float) -> bool:
        """One renewal attempt, bounded by what is left of the renew deadline."""
        remaining = last_renew + self.renew_deadline - time.monotonic()
        if remaining <= 0:
            return False
        try:
            async with asyncio.timeout(remaining):
                return await self._try_acquire_or_renew()
        except TimeoutError:
            return False

    # -- one attempt -----------------------------------------------------------------------------

    def _record(self, now: str, transitions: int, acquire_time: str) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.lease_duration)),
            "acquireTime": acquire_time,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    async def _try_acquire_or_renew(self) -> bool:
        """One compare-and-swap attempt; True when we hold the lease afterwards. Never raises ApiError."""
        now = _micro_time()
        try:
            lease = await self._kube.get(LEASES, self.name, self.namespace)
        except NotFound:
            body: dict[str, Any] = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._record(now, 0, now),
            }
            try:
                await self._kube.create(LEASES, body, self.namespace)
            except (AlreadyExists, Conflict):
                return False
            except (ApiError, TransportError) as err:
                self._log.warning("lease create failed", error=str(err))
                return False
            self.observed.observe(body["spec"])
            return True
        except (ApiError, TransportError) as err:
            self._log.warning("lease read failed", error=str(err))
            return False

        spec = lease.get("spec") or {}
        self.observed.observe(spec)
        holder = self.observed.holder
        if self.observed.held_by_other(self.identity):
            return False  # someone else holds a valid lease
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder == self.identity:
            acquire_time = spec.get("acquireTime") or now
        else:
            transitions += 1
            acquire_time = now
        new_spec = self._record(now, transitions, acquire_time)
        lease = {**lease, "spec": {**spec, **new_spec}}
        try:
            await self._kube.replace(LEASES, lease)
        except Conflict:
            return False
        except (ApiError, TransportError) as err:
            self._log.warning("lease update failed", error=str(err))
            return False
        if holder != self.identity:
            self._log.info("lease acquired", previous_holder=holder, transitions=transitions)
        self.observed.observe(new_spec)
        return True

    async def _release(self) -> None:
        """Clear ``holderIdentity`` if we still hold the lease. Failures are logged, never raised."""
        try:
            lease = await self._kube.get(LEASES, self.name, self.namespace)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            now = _micro_time()
            released = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1,
                        "renewTime": now, "acquireTime": now}
            await self._kube.replace(LEASES, {**lease, "spec": released})
            self._log.info("lease released")
        except (ApiError, TransportError) as err:
            self._log.warning("lease release failed", error=str(err))

    @staticmethod
    async def _call(fn: Callable[[], Any]) -> None:
        try:
            outcome = fn()
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            log.exception("on_stopped_leading failed")
