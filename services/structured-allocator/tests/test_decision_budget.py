"""The decision's search budget (issue 12, defect 6): per-node step budget, the decision's filter timeout,
cancellation, and yielding to the event loop between nodes. In memory: a Decider over a small fake of
the informer caches (what ClusterState offers it)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sa_builders import DRIVER, claim, dclass, dev, req, rslice

from structured_allocator import nodesearch
from structured_allocator.assume import AssumeCache
from structured_allocator.decision import Decider, Placement, Unschedulable
from structured_allocator.device_counts import counting_slices
from structured_allocator.nodefit import NodeUsage
from structured_allocator.scoring import make_scorer

DISTINCT = [{"requests": ["gpu"], "distinctAttribute": f"{DRIVER}/color"}]


class _Cache:
    def __init__(self, items: dict[str, dict[str, Any]]) -> None:
        self.items = items

    def get(self, key: str) -> dict[str, Any] | None:
        return self.items.get(key)


class FakeState:
    """The parts of ClusterState the Decider reads."""

    def __init__(self, nodes: dict[str, list[dict[str, Any]]]) -> None:
        self.nodes = _Cache({n: {"metadata": {"name": n, "resourceVersion": "1"}, "status": {
            "allocatable": {"pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}}
            for n in nodes})
        self.assume = AssumeCache()
        self.slices = counting_slices(self.assume.state,
                                      (rslice(f"s-{n}", devs, node=n) for n, devs in nodes.items()))
        self.device_counts = self.slices.counts
        self.claims = _Cache({})
        self.usage = NodeUsage()
        self._names = sorted(nodes)

    def node_names(self) -> list[str]:
        return self._names

    def classes_by_name(self) -> dict[str, dict[str, Any]]:
        return {"gpu": dclass("gpu", f'device.driver == "{DRIVER}"')}


def hard_devices(n: int = 24, colors: int = 4) -> list[dict[str, Any]]:
    """``colors`` distinct colors: a request for colors + 1 distinct ones never fits, after a search
    that tries every combination of the others."""
    return [dev(f"d{i}", {"color": f"c{i % colors}"}) for i in range(n)]


def pod_with(state: FakeState, name: str, count: int,
             constraints: list[dict[str, Any]] | None) -> dict[str, Any]:
    c = claim(f"{name}-gpu", req("gpu", count=count), constraints=constraints)
    c["metadata"].update(uid=f"uid-{name}-gpu", namespace="ns")
    state.claims.items[f"ns/{name}-gpu"] = c
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "c"}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]}}


def decider(state: FakeState, **kw: Any) -> Decider:
    return Decider(state, make_scorer("pack"), 32, **kw)  # type: ignore[arg-type]


async def test_a_node_whose_search_runs_out_of_steps_is_explained_and_retried_with_backoff() -> None:
    state = FakeState({"n1": hard_devices()})
    out = await decider(state, search_steps=500).decide(pod_with(state, "p", 5, DISTINCT))
    assert isinstance(out, Unschedulable) and out.budget_exhausted
    assert "1 node(s) search budget exhausted after 500 steps" in out.explanation.message()


async def test_without_a_budget_the_same_search_ends_in_does_not_fit() -> None:
    state = FakeState({"n1": hard_devices(12, 3)})
    out = await decider(state).decide(pod_with(state, "p", 4, DISTINCT))
    assert isinstance(out, Unschedulable) and not out.budget_exhausted
    assert "search budget" not in out.explanation.message()


async def test_another_node_still_fits_when_one_runs_out_of_steps() -> None:
    easy = [dev(f"e{i}", {"color": f"c{i}"}) for i in range(5)]
    state = FakeState({"a-hard": hard_devices(), "b-easy": easy})
    out = await decider(state, search_steps=500).decide(pod_with(state, "p", 5, DISTINCT))
    assert isinstance(out, Placement) and out.node == "b-easy"


async def test_the_filter_timeout_stops_the_whole_search() -> None:
    state = FakeState({f"n{i}": hard_devices() for i in range(5)})
    now = [0.0]

    def clock() -> float:
        now[0] += 0.5  # every look at the clock costs half a second
        return now[0]

    out = await decider(state, search_steps=0, filter_timeout=3.0, monotonic=clock).decide(
        pod_with(state, "p", 5, DISTINCT))
    assert isinstance(out, Unschedulable) and out.budget_exhausted
    message = out.explanation.message()
    assert "(filter timeout 3s)" in message
    assert "1 node(s) search budget exhausted after" in message  # it stopped at the first node


async def test_cancellation_stops_the_search() -> None:
    state = FakeState({"n1": hard_devices()})
    out = await decider(state).decide(pod_with(state, "p", 5, DISTINCT), cancelled=lambda: True)
    assert isinstance(out, Unschedulable) and out.budget_exhausted
    assert "pod changed or went away" in out.explanation.message()


async def test_the_search_yields_to_the_event_loop_between_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nodesearch, "YIELD_EVERY", 0.0)  # yield after every node
    state = FakeState({f"n{i}": hard_devices(12, 3) for i in range(6)})
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)  # one tick per turn of the event loop: what the test counts

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)  # one turn: the ticker starts before the search
    before = ticks
    out = await decider(state, search_steps=300).decide(pod_with(state, "p", 4, DISTINCT))
    during = ticks - before
    stop.set()
    await task
    assert isinstance(out, Unschedulable)
    assert during >= 5  # the other task ran between the six nodes
