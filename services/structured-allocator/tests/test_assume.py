"""The assume cache: a device is held from the decision until the API server's copy takes over."""

from __future__ import annotations

from typing import Any

from structured_allocator.assume import AssumeCache
from structured_allocator.core import DeviceID

GPU0 = DeviceID("gpu.example.com", "node-1", "gpu-0")


def _alloc(device: str = "gpu-0") -> dict[str, Any]:
    return {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": device}]}}


def _claim(uid: str = "u1", allocation: dict[str, Any] | None = None) -> dict[str, Any]:
    claim: dict[str, Any] = {"metadata": {"uid": uid, "name": "c", "namespace": "ns"}}
    if allocation:
        claim["status"] = {"allocation": allocation}
    return claim


def test_assumed_devices_are_in_use_until_released() -> None:
    cache = AssumeCache()
    cache.assume("u1", "ns/c", _alloc(), "ns/p")
    assert GPU0 in cache.state.devices
    assert cache.release("u1")
    assert GPU0 not in cache.state.devices


def test_a_stale_event_without_allocation_does_not_drop_an_assumption() -> None:
    cache = AssumeCache()
    cache.assume("u1", "ns/c", _alloc(), "ns/p")
    assert not cache.observe_claim(_claim())
    assert GPU0 in cache.state.devices


def test_the_informer_copy_replaces_the_assumption_and_deallocation_frees() -> None:
    cache = AssumeCache()
    cache.assume("u1", "ns/c", _alloc(), "ns/p")
    cache.observe_claim(_claim(allocation=_alloc()))
    assert cache.assumed("u1") is None
    assert GPU0 in cache.state.devices
    assert not cache.release("u1")  # nothing assumed any more: the API server's allocation stays
    assert GPU0 in cache.state.devices
    assert cache.observe_claim(_claim())  # deallocated: devices freed
    assert GPU0 not in cache.state.devices


def test_a_device_counted_twice_stays_in_use_until_both_are_gone() -> None:
    cache = AssumeCache()
    cache.observe_claim(_claim("u1", _alloc()))
    cache.observe_claim(_claim("u2", _alloc()))  # inconsistent input: never free it early
    cache.observe_claim(None, uid="u1")
    assert GPU0 in cache.state.devices
    cache.observe_claim(None, uid="u2")
    assert GPU0 not in cache.state.devices


def test_shared_allocations_add_and_remove_consumed_capacity() -> None:
    cache = AssumeCache()
    result = {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0",
              "shareID": "00000000-0000-0000-0000-000000000001", "consumedCapacity": {"memory": "10Gi"}}
    cache.observe_claim(_claim("u1", {"devices": {"results": [result]}}))
    assert cache.state.capacity[GPU0]["memory"] == 10 * 2**30 * 10**9  # in nano units
    cache.observe_claim(None, uid="u1")
    assert GPU0 not in cache.state.capacity and not cache.state.shared


def _reserved(uid: str, rv: str, pods: list[str]) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": "c", "namespace": "ns", "resourceVersion": rv},
            "status": {"allocation": _alloc(), "reservedFor": [
                {"resource": "pods", "name": p, "uid": p} for p in pods]}}


def test_reservations_in_flight_count_until_the_informer_shows_them() -> None:
    cache = AssumeCache()
    cache.observe_claim(_reserved("u1", "10", ["a"]))
    cache.reserve("u1", "b")
    cache.reserve("u1", "c")
    assert cache.reservations("u1", [{"uid": "a"}]) == (3, 2)
    cache.reservation_written("u1", "b", "12")
    cache.observe_claim(_reserved("u1", "11", ["a", "c"]))  # c's write shows; b's not yet
    assert cache.reservations("u1", [{"uid": "a"}, {"uid": "c"}]) == (3, 1)
    # the informer reaches b's write after b was already removed again: b no longer counts
    cache.observe_claim(_reserved("u1", "13", ["a", "c"]))
    assert cache.reservations("u1", [{"uid": "a"}, {"uid": "c"}]) == (2, 0)


def test_a_failed_reservation_stops_counting_and_a_deleted_claim_forgets_all() -> None:
    cache = AssumeCache()
    cache.reserve("u1", "a")
    cache.reserve("u1", "b")
    cache.unreserve("u1", "a")
    assert cache.reservations("u1", []) == (1, 1)
    cache.observe_claim(None, uid="u1")
    assert cache.reservations("u1", []) == (0, 0)
