"""The node search ranked first (:mod:`structured_allocator.nodesearch`): when the claims take a fixed
number of devices wherever they fit and the scorer scores only counts, the nodes that pass the cheap
checks are searched best score first and the first that fits wins: one device search, not one per
node, and the node every-node search would have chosen. Over the fake caches of ``test_decision_budget``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sa_builders import DRIVER, claim, dev, first_available, req, sub
from test_decision_budget import DISTINCT, FakeState, decider, hard_devices, pod_with

from structured_allocator import nodesearch
from structured_allocator.decision import Decider, Placement, Unschedulable
from structured_allocator.scoring import make_scorer

RED = f'device.attributes["{DRIVER}"].color == "red"'


def searches() -> float:
    return sum(REGISTRY.get_sample_value("draflow_allocator_device_searches_total", {"result": r}) or 0.0
               for r in ("fits", "no_fit", "exhausted"))


def devices(n: int, color: str = "red") -> list[dict[str, Any]]:
    return [dev(f"d{i}", {"color": color}) for i in range(n)]


def add_pod(state: FakeState, name: str, *requests: dict[str, Any]) -> dict[str, Any]:
    c = claim(f"{name}-gpu", *requests)
    c["metadata"].update(uid=f"uid-{name}-gpu", namespace="ns")
    state.claims.items[f"ns/{name}-gpu"] = c
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "c"}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]}}


async def test_the_tightest_node_is_the_only_one_searched() -> None:
    # 40 nodes; the pack scorer wants the fewest devices left: n17 (3) of the first 32 walked (n33 has
    # 3 as well but is not in this decision's window, as with every node searched)
    state = FakeState({f"n{i:02d}": devices(3 if i in (17, 33) else 4 + i % 3) for i in range(40)})
    before = searches()
    out = await decider(state).decide(add_pod(state, "p", req("gpu", count=2)))
    assert isinstance(out, Placement) and out.node == "n17"
    assert searches() - before == 1


async def test_a_best_ranked_node_that_does_not_fit_gives_way_to_the_next_best() -> None:
    # n1 has the fewest devices but none is red: searched, does not fit; n3 (3 red) is the next best
    state = FakeState({"n0": devices(6), "n1": devices(2, "blue"), "n2": devices(5), "n3": devices(3)})
    before = searches()
    out = await decider(state).decide(add_pod(state, "p", req("gpu", count=2, selectors=(RED,))))
    assert isinstance(out, Placement) and out.node == "n3"
    assert searches() - before == 2


async def test_the_window_keeps_nodes_to_find_nodes_not_known_to_fail() -> None:
    # nodes_to_find 2: n0 and n1 first; n1 (tightest) does not fit, so n2 joins the window and wins
    state = FakeState({"n0": devices(6), "n1": devices(2, "blue"), "n2": devices(3), "n3": devices(2)})
    d = Decider(state, make_scorer("pack"), 2)  # type: ignore[arg-type]
    out = await d.decide(add_pod(state, "p", req("gpu", count=2, selectors=(RED,))))
    assert isinstance(out, Placement) and out.node == "n2"
    assert d.next_start == 3  # the walk ended at n2: the next decision starts at n3


async def test_spread_ranks_the_most_free_devices_first() -> None:
    state = FakeState({"n0": devices(3), "n1": devices(7), "n2": devices(5)})
    d = Decider(state, make_scorer("spread"), 32)  # type: ignore[arg-type]
    before = searches()
    out = await d.decide(add_pod(state, "p", req("gpu")))
    assert isinstance(out, Placement) and out.node == "n1"
    assert searches() - before == 1


async def test_nothing_fits_every_node_is_searched_and_explained() -> None:
    state = FakeState({"n0": devices(3, "blue"), "n1": devices(2, "blue"), "n2": devices(1)})
    before = searches()
    out = await decider(state).decide(add_pod(state, "p", req("gpu", count=2, selectors=(RED,))))
    assert isinstance(out, Unschedulable)
    assert searches() - before == 3  # n2, skipped by the free-device count, is searched to explain
    assert "3 node(s) cannot allocate the pod's claims" in out.explanation.message()


async def test_first_available_requests_search_every_node() -> None:
    # the subrequest a node serves changes the score: not ranked, each feasible node is searched
    state = FakeState({f"n{i}": devices(3 + i) for i in range(4)})
    before = searches()
    out = await decider(state).decide(add_pod(state, "p", first_available("gpu", sub("two", count=2),
                                                                          sub("one"))))
    assert isinstance(out, Placement) and out.node == "n0"
    assert searches() - before == 4


async def test_the_ranked_search_yields_to_the_event_loop_between_device_searches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Six nodes whose searches run out of steps, searched one after the other once all six are walked:
    the other tasks of the event loop run between those searches too, not only between nodes walked."""
    monkeypatch.setattr(nodesearch, "YIELD_EVERY", 0.0)  # yield whenever it may
    state = FakeState({f"n{i}": hard_devices(12, 3) for i in range(6)})
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)

    seen: set[int] = set()

    def cancelled() -> bool:  # polled when each device search starts (and every 64 steps of it)
        seen.add(ticks)
        return False

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    pod = pod_with(state, "p", 4, DISTINCT)
    out = await decider(state, search_steps=300).decide(pod, cancelled=cancelled)
    stop.set()
    await task
    assert isinstance(out, Unschedulable) and out.budget_exhausted
    assert len(seen) >= 6  # the ticker ran before each of the six searches
