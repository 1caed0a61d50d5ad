"""Several replicas share a controller's keys through ``coordination.k8s.io/v1`` Leases, one per shard.

A key belongs to shard ``shard_of(key, shards)`` (a stable hash, the same in every process). Shard *i* is
worked on only by the holder of the Lease ``<prefix>-shard-<i>``, each held with the client-go semantics of
:class:`~draflow_runtime.leader.LeaderElector` (compare-and-swap writes, the holder stops acting after
``renew_deadline`` without a renewal, a peer takes over only ``lease_duration`` after it last saw the
record change). So for every shard there is at most one replica acting at a time, exactly as for a
single leader, and a replica that dies has its shards taken over once their Leases expire: every replica
reads every shard's Lease each ``retry_period`` (:meth:`ShardView.observed`), so it knows since when a
record has not changed before it wants the shard, and takes over about ``lease_duration`` +
``retry_period`` after the dead holder's last renewal.

Who should hold which shard: every replica holds one member slot, a Lease ``<prefix>-member-<j>`` for
``j`` < ``shards`` (the first it can take, with the same elector; a replica beyond ``shards`` gets no slot
and stands by until one frees up), and reads the slots every ``retry_period``. Names known in advance
keep the RBAC to named Leases (no list, no update of other Leases). A member is live while its slot's
holder is set and its record changed within its ``leaseDurationSeconds`` of this replica's own clock, a
change this replica saw (a record as first read may be a dead replica's last: a replica started after
another died must not count it, or it leaves it shards the others left to the newcomer).
The shards are spread evenly over the live members by rendezvous hashing with a capacity
(:func:`assignment`), so every replica computes the same from the same members and a member coming or
going moves few shards besides its own; a replica without a slot wants no shard. A replica campaigns
for the shards it should hold and releases the ones it should not (after its ``on_lost`` callback has
stopped the work), so the new owner takes them at its next attempt. Views of the members can differ for
a moment; the Leases still admit one holder per shard, and the views converge.

``on_acquired(shard)`` runs when a shard is won (the controller enqueues everything of the shard: a
new holder re-reconciles it all); ``on_lost(shard)`` runs before the Lease is released or may expire
(the controller stops and waits for that shard's reconciles in flight).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Any

from .errors import ApiError, NotFound, TransportError
from .kube import LEASES, KubeClient
from .leader import LeaderElector
from .leaserecord import Clock, ObservedLease
from .log import get_logger

__all__ = [
    "ShardCoordinator",
    "ShardView",
    "assignment",
    "desired_shards",
    "lease_names",
    "member_lease_name",
    "shard_lease_name",
    "shard_of",
]

log = get_logger(__name__)

ShardCallback = Callable[[int], Awaitable[Any]]


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def shard_of(key: str, shards: int) -> int:
    """The shard of ``key`` (e.g. ``<namespace>/<pod>``): the same in every process and Python version."""
    if shards < 1:
        raise ValueError("shards must be >= 1")
    return _hash64(key) % shards


def assignment(members: Iterable[str], shards: int) -> dict[int, str]:
    """Shard -> member: every shard to exactly one member, every member ``shards // len(members)`` or one
    more. Shard by shard, the member with the highest hash of (member, shard) that still has room takes
    it (rendezvous hashing with a capacity), so all replicas compute the same from the same members and
    most shards stay where they were when a member comes or goes. Empty without members."""
    ranked = sorted(set(members))
    if not ranked:
        return {}
    base, extra = divmod(shards, len(ranked))  # ``extra`` members get one more than ``base``
    held = dict.fromkeys(ranked, 0)
    owners: dict[int, str] = {}
    for shard in range(shards):
        room = [m for m in ranked if held[m] < base or (held[m] == base and extra > 0)]
        owner = max(room, key=lambda m: (_hash64(f"{m}\x00{shard}"), m))
        owners[shard] = owner
        held[owner] += 1
        if held[owner] == base + 1:
            extra -= 1
    return owners


def desired_shards(identity: str, members: Iterable[str], shards: int) -> set[int]:
    """The shards ``identity`` should hold when ``members`` (plus itself) are the live replicas."""
    return {shard for shard, owner in assignment({*members, identity}, shards).items() if owner == identity}


def shard_lease_name(prefix: str, shard: int) -> str:
    return f"{prefix}-shard-{shard}"


def member_lease_name(prefix: str, slot: int) -> str:
    return f"{prefix}-member-{slot}"


def lease_names(prefix: str, shards: int) -> list[str]:
    """Every Lease a replica of ``shards`` shards may get and update: the shards', then the member slots'."""
    return [*(shard_lease_name(prefix, i) for i in range(shards)),
            *(member_lease_name(prefix, j) for j in range(shards))]


class ShardView:
    """What one replica knows of the member slots and shard Leases, by its own clock, and what follows
    from it (pure: the coordinator feeds it what it reads). ``leases[i]`` is shared with the elector of
    shard *i*."""

    def __init__(self, prefix: str, shards: int, identity: str, lease_duration: float,
                 clock: Clock = time.monotonic) -> None:
        self.prefix, self.shards, self.identity = prefix, shards, identity
        self.slots = [ObservedLease(lease_duration, clock) for _ in range(shards)]
        self.leases = [ObservedLease(lease_duration, clock) for _ in range(shards)]

    def observed(self, campaigning: Collection[int] = ()) -> list[tuple[str, ObservedLease]]:
        """The Leases this replica reads every retry period, each with what is known of it: the member
        slots, and the Lease of every shard it does not campaign for (the elector of a shard it campaigns
        for or holds reads that one itself, every retry period). So, as client-go's candidates do, it
        knows since when a shard's record has not changed before it wants the shard: a dead replica's
        shards are taken one lease duration after their last renewal, not one lease duration after this
        replica noticed the dead replica's member slot expire (two lease durations in all)."""
        return [*((member_lease_name(self.prefix, j), seen) for j, seen in enumerate(self.slots)),
                *((shard_lease_name(self.prefix, i), seen) for i, seen in enumerate(self.leases)
                  if i not in campaigning)]

    def live_members(self) -> set[str]:
        """Holders of member slots whose record this replica saw change (a renewal or a take) and that
        changed within their lease duration (own clock). A slot's record as first read is not enough: a
        replica that starts after another died would count the dead one as live for a lease duration and
        leave it shards that the others, who saw it expire, leave to the newcomer: nobody would hold
        them. A live member renews every retry period, so it counts from the second read on."""
        return {seen.holder for seen in self.slots if seen.seen_alive()}

    def wanted(self, member: bool) -> set[int]:
        """The shards this replica should hold now (none without a member slot of its own)."""
        return desired_shards(self.identity, self.live_members(), self.shards) if member else set()

    def may_take(self, shard: int) -> bool:
        """What the elector of ``shard`` concludes from what is known: free, ours, or expired."""
        return not self.leases[shard].held_by_other(self.identity)


class ShardCoordinator:
    """One replica's part (see the module docstring). ``held`` is the set of shards this replica may act
    on right now; it changes only around the callbacks."""

    def __init__(
        self,
        kube: KubeClient,
        namespace: str,
        prefix: str,
        shards: int,
        identity: str,
        *,
        on_acquired: ShardCallback,
        on_lost: ShardCallback,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
    ) -> None:
        if shards < 1:
            raise ValueError("shards must be >= 1")
        self._kube = kube
        self.namespace = namespace
        self.prefix = prefix
        self.shards = shards
        self.identity = identity
        self._on_acquired = on_acquired
        self._on_lost = on_lost
        self.retry_period = retry_period
        self.held: set[int] = set()
        self.members: set[str] = set()
        self.view = ShardView(prefix, shards, identity, lease_duration)
        self._electors = [
            LeaderElector(kube, namespace, shard_lease_name(prefix, i), identity, lease_duration,
                          renew_deadline, retry_period, observed=self.view.leases[i])
            for i in range(shards)
        ]
        self._slots = [
            LeaderElector(kube, namespace, member_lease_name(prefix, j), identity, lease_duration,
                          renew_deadline, retry_period)
            for j in range(shards)
        ]
        self._campaigns: dict[int, asyncio.Task[None]] = {}
        self._releasing: dict[int, asyncio.Task[None]] = {}
        self._log = log.bind(shards=shards, identity=identity, lease_prefix=f"{namespace}/{prefix}")

    async def run(self) -> None:
        """Keep a member slot and the wanted shards until cancelled; then give up every shard held (after
        ``on_lost``, Lease released) and the slot."""
        member = asyncio.create_task(self._keep_member_slot(), name="shard-member")
        try:
            while True:
                await self._rebalance()
                await asyncio.sleep(self.retry_period)
        finally:
            await asyncio.shield(self._shutdown(member))

    async def _shutdown(self, member: asyncio.Task[None]) -> None:
        await asyncio.gather(*(elector.stop() for elector in self._electors), return_exceptions=True)
        for task in (*self._campaigns.values(), *self._releasing.values()):
            task.cancel()
        await asyncio.gather(*self._campaigns.values(), *self._releasing.values(), return_exceptions=True)
        await asyncio.gather(*(slot.stop() for slot in self._slots), return_exceptions=True)
        member.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await member

    async def _keep_member_slot(self) -> None:
        """Take the first free member slot and hold it; look for one again whenever it is lost."""
        while True:
            for slot in self._slots:
                if await slot.try_acquire():
                    await slot.run(on_started_leading=asyncio.Event().wait)
                    break
            await asyncio.sleep(self.retry_period)

    async def _rebalance(self) -> None:
        if await self._read_leases():
            live = self.view.live_members()
            if live != self.members:
                self._log.info("shard members changed", members=sorted(live))
            self.members = live
        member = any(slot.is_leader for slot in self._slots)
        wanted = desired_shards(self.identity, self.members, self.shards) if member else set()
        for shard in range(self.shards):
            campaign = self._campaigns.get(shard)
            if shard in wanted:
                if shard in self._releasing or (campaign is not None and not campaign.done()):
                    continue
                self._campaigns[shard] = asyncio.create_task(self._campaign(shard), name=f"shard-{shard}")
            elif campaign is not None and shard not in self._releasing:
                self._releasing[shard] = asyncio.create_task(self._release(shard))

    async def _campaign(self, shard: int) -> None:
        await self._electors[shard].run(on_started_leading=lambda: self._hold(shard))

    async def _release(self, shard: int) -> None:
        """Stop campaigning for ``shard``; if held, ``on_lost`` runs and then the Lease is released."""
        try:
            await self._electors[shard].stop()
            campaign = self._campaigns.pop(shard, None)
            if campaign is not None:
                await asyncio.wait({campaign})
        finally:
            self._releasing.pop(shard, None)

    async def _hold(self, shard: int) -> None:
        """The leading task of one shard: acts from ``on_acquired`` until cancelled (lost or released)."""
        self.held.add(shard)
        self._log.info("shard acquired", shard=shard, held=sorted(self.held))
        try:
            await self._on_acquired(shard)
            await asyncio.Event().wait()
        finally:
            self.held.discard(shard)
            self._log.info("shard given up", shard=shard, held=sorted(self.held))
            await asyncio.shield(self._on_lost(shard))

    async def _read_leases(self) -> bool:
        """Read the Leases the view follows (at once); False when a member slot could not be read (the
        last view of the members is kept). A shard Lease not read stays as last seen: its elector reads
        it again before it decides."""
        campaigning = {shard for shard, task in self._campaigns.items() if not task.done()}
        observed = self.view.observed(campaigning)
        results = await asyncio.gather(
            *(self._kube.get(LEASES, name, self.namespace) for name, _ in observed), return_exceptions=True)
        complete = True
        for (name, seen), result in zip(observed, results, strict=True):
            if isinstance(result, NotFound):
                seen.observe(None)
            elif isinstance(result, (ApiError, TransportError)):
                self._log.warning("lease not read, keeping the last view", lease=name, error=str(result))
                complete = complete and seen not in self.view.slots
            elif isinstance(result, BaseException):
                raise result
            else:
                seen.observe(result.get("spec") or {})
        return complete
