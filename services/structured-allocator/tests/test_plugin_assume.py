"""kube-scheduler v1.37.1 DynamicResources ``dra_manager_test.go`` (the claim tracker's pending allocations
and how many pods share one) restated on draflow's assume cache: ``SignalClaimPendingAllocation`` is
``assume`` (the first pod) or ``share`` (a later member of the same pod-group cycle),
``GetPendingAllocation`` is ``assumed``/``allocation``, ``MaybeRemoveClaimPendingAllocation`` is ``unshare``
(one pod gives up; the devices stay held while another still writes them) or ``release`` (forced)."""

from __future__ import annotations

from sa_builders import alloc, claim, req, res

from structured_allocator.assume import AssumeCache
from structured_allocator.core import DeviceID

UID = "uid-c"
FIRST = alloc(res("gpu", "gpu-0"))
OTHER = alloc(res("gpu", "gpu-1"))
GPU0 = DeviceID("gpu.example.com", "node-1", "gpu-0")


def pending(cache: AssumeCache) -> None:
    c = claim("c", req("gpu"))
    c["metadata"].update(uid=UID, namespace="ns")
    cache.observe_claim(c)


def test_signal_empty_the_first_pod_assumes_the_allocation() -> None:
    cache = AssumeCache()
    pending(cache)
    cache.assume(UID, "ns/c", FIRST, "ns/p1")
    entry = cache.assumed(UID)
    assert entry is not None and entry.allocation == FIRST and entry.sharers == set()
    assert GPU0 in cache.state.devices


def test_signal_extended_resource_claim_not_in_cache_is_held_too() -> None:
    cache = AssumeCache()  # the special claim is not created yet: the informer never saw it
    cache.assume("extended-x", "ns/<extended-resources>", FIRST, "ns/p1")
    assert cache.allocation("extended-x") == FIRST and GPU0 in cache.state.devices


def test_signal_already_exists_counts_a_second_sharer_and_keeps_the_first_allocation() -> None:
    cache = AssumeCache()
    pending(cache)
    cache.assume(UID, "ns/c", FIRST, "ns/p1")
    assert cache.share(UID, "ns/p2")
    entry = cache.assumed(UID)
    assert entry is not None and entry.sharers == {"ns/p2"} and entry.allocation == FIRST  # not OTHER
    assert cache.allocation(UID) == FIRST


def test_get_pending_allocation() -> None:
    cache = AssumeCache()
    assert cache.assumed(UID) is None and cache.allocation(UID) is None  # empty
    cache.assume(UID, "ns/c", FIRST, "ns/p1")
    cache.assume("uid-other", "ns/o", OTHER, "ns/p9")
    assert cache.allocation(UID) == FIRST  # claim


def test_maybe_remove_empty() -> None:
    cache = AssumeCache()
    assert not cache.unshare(UID, "ns/p1") and not cache.release(UID)


def test_maybe_remove_the_last_sharer_gives_the_devices_back() -> None:
    cache = AssumeCache()
    pending(cache)
    cache.assume(UID, "ns/c", FIRST, "ns/p1")
    assert not cache.unshare(UID, "ns/p1")  # nobody else writes it: the caller releases
    assert cache.release(UID)
    assert cache.assumed(UID) is None and GPU0 not in cache.state.devices


def test_maybe_remove_force_delete_last_sharer() -> None:
    cache = AssumeCache()
    pending(cache)
    cache.assume(UID, "ns/c", FIRST, "ns/p1")
    assert cache.release(UID)
    assert cache.allocation(UID) is None and GPU0 not in cache.state.devices


def test_maybe_remove_decrement_remaining_sharers() -> None:
    cache = AssumeCache()
    pending(cache)
    cache.assume(UID, "ns/c", FIRST, "ns/p1")
    cache.share(UID, "ns/p2")
    cache.share(UID, "ns/p3")
    assert cache.unshare(UID, "ns/p1")  # others still write it: held
    entry = cache.assumed(UID)
    assert entry is not None and len({entry.pod_key, *entry.sharers}) == 2 and "ns/p1" not in entry.sharers
    assert GPU0 in cache.state.devices


def test_maybe_remove_force_delete_remaining_sharers() -> None:
    cache = AssumeCache()
    pending(cache)
    cache.assume(UID, "ns/c", FIRST, "ns/p1")
    cache.share(UID, "ns/p2")
    assert cache.release(UID)
    assert cache.assumed(UID) is None and GPU0 not in cache.state.devices
