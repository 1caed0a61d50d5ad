"""Shard assignment: which shard a key is in, and which live replica should hold which shard."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from draflow_runtime.shards import (
    assignment,
    desired_shards,
    member_lease_name,
    shard_lease_name,
    shard_of,
)


def test_a_key_is_in_the_same_shard_in_every_process() -> None:
    # Pinned values: Python's own hash() is salted per process and would differ between replicas.
    assert shard_of("default/app-0", 4) == 3
    assert shard_of("default/app-1", 4) == 0
    assert shard_of("bench/p-00042", 16) == 0


def test_keys_spread_evenly_over_the_shards() -> None:
    counts = Counter(shard_of(f"ns-{i % 7}/pod-{i}", 4) for i in range(20_000))
    assert set(counts) == {0, 1, 2, 3}
    assert all(4_000 < n < 6_000 for n in counts.values()), counts


def test_one_shard_holds_every_key() -> None:
    assert {shard_of(f"ns/p-{i}", 1) for i in range(100)} == {0}
    with pytest.raises(ValueError):
        shard_of("ns/p", 0)


@pytest.mark.parametrize("members", [["a"], ["a", "b"], ["a", "b", "c"], [f"r-{i}" for i in range(5)]])
@pytest.mark.parametrize("shards", [1, 4, 7, 16])
def test_every_shard_has_exactly_one_owner_and_the_split_is_even(members: list[str], shards: int) -> None:
    wanted = {m: desired_shards(m, members, shards) for m in members}
    everything = [s for held in wanted.values() for s in held]
    assert sorted(everything) == list(range(shards))  # each shard once, none left out
    sizes = [len(held) for held in wanted.values()]
    assert max(sizes) - min(sizes) <= 1


def test_every_replica_computes_the_same_assignment_whatever_the_order_of_members() -> None:
    assert assignment(["x", "y", "z"], 8) == assignment(["z", "x", "y", "x"], 8)
    assert assignment([], 4) == {}


def test_two_replicas_split_four_shards_two_and_two() -> None:
    owners = assignment(["bench-replica-0", "bench-replica-1"], 4)
    assert Counter(owners.values()) == {"bench-replica-0": 2, "bench-replica-1": 2}


def test_a_member_leaving_hands_its_shards_to_the_others_and_most_others_stay() -> None:
    shards, members = 64, ["a", "b", "c"]
    before = assignment(members, shards)
    after = assignment(["a", "b"], shards)
    assert set(after.values()) == {"a", "b"}
    stayed = sum(1 for s in range(shards) if before[s] != "c" and after[s] == before[s])
    assert stayed >= 0.75 * sum(1 for s in range(shards) if before[s] != "c")


def test_a_member_joining_takes_its_share() -> None:
    with_three = assignment(["a", "b", "c"], 64)
    assert Counter(with_three.values())["c"] in (21, 22)


def test_the_replica_itself_counts_as_a_member() -> None:
    assert desired_shards("me", [], 4) == {0, 1, 2, 3}
    assert desired_shards("me", ["other"], 4) == {0, 1, 2, 3} - desired_shards("other", ["me"], 4)


def test_lease_names_are_valid_object_names() -> None:
    name = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    assert shard_lease_name("claim-controller", 3) == "claim-controller-shard-3"
    assert name.match(shard_lease_name("claim-controller", 3))
    assert name.match(member_lease_name("claim-controller", 0))
