"""The incremental free-device counts never drift from a full recount (`device_counts`).

Random sequences of everything that changes them: slice upserts (new, replaced, re-sent with the same
resourceVersion, moved to another node, shared), slice deletions, informer claim events (allocated,
deallocated, deleted, stale), assumed allocations written, shared, released and settled; exclusive, shared
(``shareID``) and admin-access results; the same device in two slices."""

from __future__ import annotations

import random
from typing import Any

import pytest
from sa_builders import DRIVER, dev, rslice

from structured_allocator.assume import AssumeCache
from structured_allocator.core import DeviceID, SliceIndex
from structured_allocator.device_counts import CountingSliceIndex, TrackedDevices, counting_slices

NODES = ["n0", "n1", "n2"]
POOLS = ["p0", "p1", "p2"]
DEVICES = ["d0", "d1", "d2", "d3", "d4"]


def recount(index: SliceIndex, in_use: set[DeviceID], node: str) -> tuple[int, int, bool]:
    """What the decision counted before the counts were kept: every device of every slice of the node."""
    free = total = 0
    shared = False
    for s in index.slices_for_node(node):
        if not s.node_name:
            shared = True
            continue
        for d in s.devices:
            total += 1
            free += d.id not in in_use
    return free, total, shared


def assert_counts(index: CountingSliceIndex, assume: AssumeCache) -> None:
    assert isinstance(assume.state.devices, TrackedDevices)
    for node in [*NODES, "elsewhere"]:
        assert index.counts.free_devices(node) == recount(index, assume.state.devices, node), node


class Events:
    """Random events against a real AssumeCache and slice index."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.assume = AssumeCache()
        self.index = counting_slices(self.assume.state)
        self.version = 0
        self.slice_versions: dict[str, str] = {}

    def _rv(self) -> str:
        self.version += 1
        return str(self.version)

    def allocation(self) -> dict[str, Any]:
        results = []
        for _ in range(self.rng.randint(1, 3)):
            result: dict[str, Any] = {"request": "r", "driver": DRIVER, "pool": self.rng.choice(POOLS),
                                      "device": self.rng.choice(DEVICES)}
            roll = self.rng.random()
            if roll < 0.15:
                result["shareID"] = f"share-{self.rng.randint(0, 3)}"
                result["consumedCapacity"] = {"memory": "1Gi"}
            elif roll < 0.25:
                result["adminAccess"] = True
            results.append(result)
        return {"devices": {"results": results}}

    def claim(self, uid: str, allocated: bool) -> dict[str, Any]:
        c: dict[str, Any] = {"metadata": {"name": uid, "namespace": "ns", "uid": uid,
                                          "resourceVersion": self._rv()}}
        if allocated:
            c["status"] = {"allocation": self.allocation()}
        return c

    def step(self) -> None:
        rng, assume = self.rng, self.assume
        uid = f"u{rng.randint(0, 7)}"
        op = rng.randrange(9)
        if op == 0:
            self.upsert_slice()
        elif op == 1:
            self.index.remove(f"s{rng.randint(0, 5)}")
        elif op in (2, 3):
            assume.observe_claim(self.claim(uid, allocated=op == 2))
        elif op == 4:
            assume.observe_claim(None, uid=uid)
        elif op == 5:
            assume.assume(uid, f"ns/{uid}", self.allocation(), "ns/pod")
            if rng.random() < 0.5:
                assume.mark_written(uid)
        elif op == 6:
            pod = f"ns/pod-{rng.randint(0, 2)}"
            if rng.random() < 0.3:  # a pod-group cycle: another pod writes the same assumption
                assume.share(uid, pod)
            elif not (rng.random() < 0.5 and assume.unshare(uid, pod)):
                assume.release(uid)
        elif op == 7:
            claim = self.claim(uid, allocated=rng.random() < 0.5) if rng.random() < 0.8 else None
            assume.settle(uid, claim, assume.assumed(uid))
        else:  # a stale informer event: an older resourceVersion than a settled read
            stale = self.claim(uid, allocated=rng.random() < 0.5)
            stale["metadata"]["resourceVersion"] = str(max(1, self.version - rng.randint(1, 20)))
            assume.observe_claim(stale)

    def upsert_slice(self) -> None:
        rng = self.rng
        name = f"s{rng.randint(0, 5)}"
        names = rng.sample(DEVICES, rng.randint(0, len(DEVICES)))
        if names and rng.random() < 0.1:
            names.append(names[0])  # a duplicate device name (invalid, still counted as before)
        devices = [dev(n) for n in names]
        where = rng.choice([*NODES, "shared"])
        rv = self.slice_versions.get(name) if rng.random() < 0.2 else None  # re-sent unchanged: kept
        rv = rv or self._rv()
        self.slice_versions[name] = rv
        pool, gen = rng.choice(POOLS), rng.randint(1, 2)
        if where == "shared":
            raw = rslice(name, devices, node=None, pool=pool, gen=gen, rv=rv, allNodes=True)
        else:
            raw = rslice(name, devices, node=where, pool=pool, gen=gen, rv=rv)
        self.index.upsert(raw)


@pytest.mark.parametrize("seed", range(40))
def test_counts_match_a_recount_after_random_events(seed: int) -> None:
    events = Events(random.Random(seed))
    for _ in range(300):
        events.step()
        assert_counts(events.index, events.assume)


def test_every_set_mutation_is_counted() -> None:
    assume = AssumeCache()
    index = counting_slices(assume.state, [rslice("s", [dev(n) for n in DEVICES], node="n0", pool="p")])
    ids = [DeviceID(DRIVER, "p", n) for n in DEVICES]
    devices = assume.state.devices
    devices.add(ids[0])
    devices.update([ids[1], ids[2]])
    assert index.counts.free_devices("n0") == (2, 5, False)
    devices.discard(ids[1])
    devices.remove(ids[2])
    with pytest.raises(KeyError):
        devices.remove(ids[2])
    assert index.counts.free_devices("n0") == (4, 5, False)
    devices |= {ids[1], ids[3]}
    devices -= {ids[0]}
    assert index.counts.free_devices("n0") == (3, 5, False)
    devices &= {ids[1]}
    devices ^= {ids[1], ids[4]}
    assert index.counts.free_devices("n0") == recount(index, devices, "n0") == (4, 5, False)
    devices.intersection_update([ids[4]])
    devices.symmetric_difference_update([ids[0]])
    devices.difference_update([ids[4]])
    assert index.counts.free_devices("n0") == recount(index, devices, "n0") == (4, 5, False)
    devices.pop()
    assert index.counts.free_devices("n0") == (5, 5, False)
    devices.update(ids)
    devices.clear()
    assert index.counts.free_devices("n0") == (5, 5, False)


def test_devices_in_use_before_counting_starts_are_counted() -> None:
    assume = AssumeCache()
    assume.observe_claim({"metadata": {"name": "c", "namespace": "ns", "uid": "u", "resourceVersion": "1"},
                          "status": {"allocation": {"devices": {"results": [
                              {"request": "r", "driver": DRIVER, "pool": "p", "device": "d0"}]}}}})
    index = counting_slices(assume.state, [rslice("s", [dev("d0"), dev("d1")], node="n0", pool="p")])
    assert index.counts.free_devices("n0") == (1, 2, False)
    assume.observe_claim(None, uid="u")
    assert index.counts.free_devices("n0") == (2, 2, False)
