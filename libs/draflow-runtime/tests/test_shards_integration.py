"""Shard Leases on a real API server: replicas split the shards, never hold one twice, take over on exit."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from draflow_runtime.kube import LEASES, KubeClient
from draflow_runtime.shards import ShardCoordinator, shard_lease_name
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration

SHARDS = 6
TIMING = {"lease_duration": 4.0, "renew_deadline": 3.0, "retry_period": 0.5}


class Replica:
    """One coordinator; records its shards and checks, when one goes, that the Lease is still its own
    (the work stops before the Lease is released)."""

    def __init__(self, kube: KubeClient, namespace: str, identity: str, owners: dict[int, set[str]],
                 shards: int = SHARDS) -> None:
        self.identity = identity
        self.kube = kube
        self.namespace = namespace
        self.owners = owners
        self.acquired: list[int] = []
        self.lost_while_lease_held: list[bool] = []
        self.coordinator = ShardCoordinator(kube, namespace, "ctl", shards, identity,
                                            on_acquired=self._acquired, on_lost=self._lost, **TIMING)
        self.task: asyncio.Task[None] | None = None

    async def _acquired(self, shard: int) -> None:
        self.owners.setdefault(shard, set()).add(self.identity)
        self.acquired.append(shard)

    async def _lost(self, shard: int) -> None:
        self.owners[shard].discard(self.identity)
        lease = await self.kube.get(LEASES, shard_lease_name("ctl", shard), self.namespace)
        self.lost_while_lease_held.append(lease["spec"].get("holderIdentity") == self.identity)

    def start(self) -> None:
        self.task = asyncio.create_task(self.coordinator.run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


async def test_two_replicas_split_the_shards_and_one_takes_all_when_the_other_leaves(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
) -> None:
    ns = await make_namespace("shards")
    owners: dict[int, set[str]] = {}
    a, b = Replica(kube, ns, "replica-a", owners), Replica(kube, ns, "replica-b", owners)
    overlaps: list[dict[int, set[str]]] = []

    async def watch_overlaps() -> None:
        while True:
            if any(len(o) > 1 for o in owners.values()):
                overlaps.append({s: set(o) for s, o in owners.items()})
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch_overlaps())
    a.start()
    try:
        await eventually(lambda: len(a.coordinator.held) == SHARDS, what="the only replica holds every shard")
        b.start()

        def split() -> Any:
            held_a, held_b = a.coordinator.held, b.coordinator.held
            return held_a and held_b and held_a | held_b == set(range(SHARDS)) and not held_a & held_b
        await eventually(split, timeout=60, what="both replicas hold some shards, together all")

        holders = {s: (await kube.get(LEASES, shard_lease_name("ctl", s), ns))["spec"]["holderIdentity"]
                   for s in range(SHARDS)}
        assert {s for s, h in holders.items() if h == "replica-b"} == b.coordinator.held

        given_up = set(a.coordinator.held)
        await a.stop()  # a clean exit: its shards are released after their work stopped
        await eventually(lambda: len(b.coordinator.held) == SHARDS, timeout=30,
                         what="the remaining replica takes every shard")
        assert given_up <= set(b.acquired)
        assert a.lost_while_lease_held and all(a.lost_while_lease_held)
    finally:
        watcher.cancel()
        await a.stop()
        await b.stop()
    assert overlaps == [], "a shard was held by two replicas at once"
    assert all(b.lost_while_lease_held)


async def test_a_replica_beyond_the_shard_count_stands_by_until_a_slot_frees_up(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
) -> None:
    ns = await make_namespace("shards")
    owners: dict[int, set[str]] = {}
    replicas = [Replica(kube, ns, f"replica-{i}", owners, shards=2) for i in range(3)]
    for replica in replicas:
        replica.start()
    try:
        def two_working() -> Any:
            held = [r.coordinator.held for r in replicas]
            return sorted(len(h) for h in held) == [0, 1, 1] and set().union(*held) == {0, 1}
        await eventually(two_working, timeout=60, what="two replicas hold a shard each, one stands by")
        standby = next(r for r in replicas if not r.coordinator.held)
        assert standby.acquired == []

        leaving = next(r for r in replicas if r is not standby)
        await leaving.stop()
        await eventually(lambda: standby.coordinator.held, timeout=30,
                         what="the standby takes a member slot and a shard")
        rest = [r for r in replicas if r is not leaving]
        assert set().union(*(r.coordinator.held for r in rest)) == {0, 1}
    finally:
        for replica in replicas:
            await replica.stop()
    assert all(len(o) <= 1 for o in owners.values())
