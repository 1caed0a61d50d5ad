"""A failed placement gives its devices back only when the API server says they are free (make chaos found
two claims on one partition after kube-apiserver was killed: the status write's answer was lost, the undo
could not read the claim, the assumption was released and the devices handed out again)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes.aio.client import ApiClient, Configuration
from opentelemetry import trace

from draflow_runtime.errors import TransportError
from draflow_runtime.kube import KubeClient
from structured_allocator.assume import AssumeCache
from structured_allocator.binder import Binder, ClaimPlan, PodPlan
from structured_allocator.core import DeviceID
from structured_allocator.settle import give_up, settle_claim

GPU0 = DeviceID("gpu.example.com", "node-1", "gpu-0")


def _alloc(device: str = "gpu-0") -> dict[str, Any]:
    return {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": device}]}}


def _claim(rv: str, allocation: dict[str, Any] | None = None, uid: str = "u1") -> dict[str, Any]:
    claim: dict[str, Any] = {"metadata": {"uid": uid, "name": "c", "namespace": "ns", "resourceVersion": rv}}
    if allocation:
        claim["status"] = {"allocation": allocation}
    return claim


def _plan(cache: AssumeCache) -> ClaimPlan:
    cp = ClaimPlan(_claim("5"), _alloc(), reserve=True)
    cache.assume(cp.uid, cp.key, _alloc(), "ns/p")
    return cp


def test_an_undo_that_could_not_read_the_claim_keeps_the_devices_held() -> None:
    cache = AssumeCache()
    cp = _plan(cache)
    spawned: list[Any] = []

    def spawn(work: Any, name: str) -> None:
        spawned.append(name)
        work.close()  # not run here: settle_claim has its own test

    give_up(cache, KubeClient.__new__(KubeClient), cp, {cp.uid: None}, spawn, lambda key: None)
    assert GPU0 in cache.state.devices  # released before the fix: the device was handed out again
    assert spawned == ["settle-ns/c"]
    assert not cache.observe_claim(_claim("5"))  # the informer's stale copy changes nothing
    assert GPU0 in cache.state.devices


def test_an_undo_that_read_the_claim_still_allocated_counts_it_at_once() -> None:
    cache = AssumeCache()
    cp = _plan(cache)
    give_up(cache, KubeClient.__new__(KubeClient), cp, {cp.uid: _claim("9", _alloc())},
            lambda work, name: work.close(), lambda key: None)
    assert cache.assumed(cp.uid) is None
    assert GPU0 in cache.state.devices
    # an informer event older than that read is stale: it must not free the device
    assert not cache.observe_claim(_claim("7"))
    assert GPU0 in cache.state.devices
    # a newer one is the truth (deallocated meanwhile)
    assert cache.observe_claim(_claim("11"))
    assert GPU0 not in cache.state.devices


def test_an_undo_that_deallocated_releases() -> None:
    cache = AssumeCache()
    cp = _plan(cache)
    give_up(cache, KubeClient.__new__(KubeClient), cp, {}, lambda work, name: work.close(), lambda key: None)
    assert GPU0 not in cache.state.devices


def test_settling_keeps_a_newer_pipelines_assumption() -> None:
    cache = AssumeCache()
    cache.assume("u1", "ns/c", _alloc("gpu-0"), "ns/p")
    old = cache.assumed("u1")
    cache.assume("u1", "ns/c", _alloc("gpu-1"), "ns/p")  # the pod was retried meanwhile
    assert not cache.settle("u1", _claim("9"), old)
    assert cache.assumed("u1") is not old
    assert DeviceID("gpu.example.com", "node-1", "gpu-1") in cache.state.devices


class _Flaky:
    """A stand-in for the API client's ``get``: the API server is down ``down`` times, then answers."""

    def __init__(self, down: int, claim: dict[str, Any] | None) -> None:
        self.down, self.claim, self.calls = down, claim, 0

    async def get(self, *_: Any) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= self.down:
            raise TransportError("connection refused")
        assert self.claim is not None
        return self.claim


@pytest.mark.parametrize(("landed", "held"), [(True, True), (False, False)])
def test_settle_claim_reads_until_the_api_server_answers(landed: bool, held: bool) -> None:
    cache = AssumeCache()
    cp = _plan(cache)
    entry = cache.assumed(cp.uid)
    kube = _Flaky(2, _claim("9", _alloc() if landed else None))
    woken: list[str] = []
    asyncio.run(settle_claim(cache, kube, cp, entry, woken.append, first_delay=0.01))  # type: ignore[arg-type]
    assert kube.calls == 3
    assert cache.assumed(cp.uid) is None
    assert (GPU0 in cache.state.devices) is held
    assert woken == ["ns/c"]


def test_binder_undo_reports_an_allocation_it_could_not_take_back() -> None:
    async def run() -> dict[str, Any]:
        kube = KubeClient(ApiClient(Configuration(host="http://127.0.0.1:1")))  # nothing listens: refused
        try:
            binder = Binder(kube, "test", trace.get_tracer(__name__))
            cp = ClaimPlan(_claim("5"), _alloc(), reserve=True)
            plan = PodPlan(pod={"metadata": {"uid": "p1", "name": "p", "namespace": "ns"}}, node="node-1",
                           claims=[cp])
            plan.done.append((cp, "allocated"))
            return await binder.undo(plan)
        finally:
            await kube.close()
    assert asyncio.run(run()) == {"u1": None}
