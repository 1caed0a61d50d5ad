"""Which labelled claims a --shards replica watches as it wins and gives up shards (no API server: the
watches are never started here, only set up and dropped)."""

from __future__ import annotations

from typing import Any

from claim_controller.claimcache import ShardedClaims

SHARDS = 4


def cache(everything_with: int | None = None) -> ShardedClaims:
    kube: Any = None  # never used: nothing is started
    return ShardedClaims(kube, "ns", SHARDS, {}, everything_with=everything_with)


async def test_a_replica_watches_the_labelled_claims_of_the_shards_it_holds_only() -> None:
    claims = cache()
    await claims.acquire(1)
    await claims.acquire(3)
    assert set(claims.parts) == {1, 3} == claims.watched()
    await claims.release(1)
    assert set(claims.parts) == {3}


async def test_the_holder_of_the_eviction_shard_watches_every_shard_until_it_gives_it_up() -> None:
    claims = cache(everything_with=0)
    await claims.acquire(2)
    assert set(claims.parts) == {2}
    await claims.acquire(0)
    assert set(claims.parts) == set(range(SHARDS))
    await claims.release(0)
    assert set(claims.parts) == {2}


async def test_giving_up_every_shard_drops_every_watch_and_its_claims() -> None:
    claims = cache(everything_with=0)
    for shard in range(SHARDS):
        await claims.acquire(shard)
    for shard in range(SHARDS):
        await claims.release(shard)
    assert claims.parts == {}
    assert claims.list() == [] and len(claims) == 0 and claims.get("ns/x") is None
