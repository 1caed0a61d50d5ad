"""The free-device count before a node's other checks (:mod:`structured_allocator.nodesearch`): the walk
skips a node with too few free devices at once; the same node wins, the next decision starts at the same
place and an unschedulable pod gets the same explanation as with every check in kube-scheduler's order
(``COUNT_FIRST`` off). Over the fake caches of ``test_decision_budget``."""

from __future__ import annotations

from typing import Any

import pytest
from sa_builders import dev, req
from test_decision_budget import FakeState
from test_node_search_ranked import RED, add_pod, devices

from structured_allocator import nodesearch
from structured_allocator.decision import Decider, Placement, Unschedulable
from structured_allocator.scoring import make_scorer


def _cordon(state: FakeState, *names: str) -> None:
    for name in names:
        state.nodes.items[name]["spec"] = {"unschedulable": True}


def _taint(state: FakeState, *names: str) -> None:
    for name in names:
        state.nodes.items[name]["spec"] = {"taints": [{"key": "gpu", "value": "x", "effect": "NoSchedule"}]}


def _state() -> FakeState:
    """Twelve nodes: full ones (no device or one), cordoned and tainted ones among both, blue ones."""
    counts = [0, 1, 3, 0, 4, 1, 2, 0, 5, 1, 3, 2]
    state = FakeState({f"n{i:02d}": devices(n, "blue" if i in (4, 10) else "red")
                       for i, n in enumerate(counts)})
    _cordon(state, "n00", "n02", "n05")
    _taint(state, "n01", "n06", "n07")
    return state


async def _decide(state: FakeState, count_first: bool, monkeypatch: pytest.MonkeyPatch, scorer: str,
                  window: int, pod: dict[str, Any], start: int = 0) -> tuple[Any, int]:
    monkeypatch.setattr(nodesearch, "COUNT_FIRST", count_first)
    d = Decider(state, make_scorer(scorer), window)  # type: ignore[arg-type]
    d.next_start = start
    return await d.decide(pod), d.next_start


def _explained(decision: Unschedulable) -> dict[str, Any]:
    """What ``/explain`` shows of the pod's claim, its time left out."""
    out = decision.explanation.for_claim("ns/p-gpu")
    out.pop("time")
    return out


@pytest.mark.parametrize("scorer", ["pack", "spread"])
@pytest.mark.parametrize("window", [1, 2, 32])
@pytest.mark.parametrize("start", [0, 3, 7, 11])
async def test_the_same_node_wins_and_the_next_decision_starts_at_the_same_place(
        monkeypatch: pytest.MonkeyPatch, scorer: str, window: int, start: int) -> None:
    state = _state()
    pod = add_pod(state, "p", req("gpu", count=2, selectors=(RED,)))
    slow = await _decide(state, False, monkeypatch, scorer, window, pod, start)
    fast = await _decide(state, True, monkeypatch, scorer, window, pod, start)
    assert isinstance(slow[0], Placement)
    assert (fast[0].node, fast[1]) == (slow[0].node, slow[1])


@pytest.mark.parametrize("count", [3, 6])
async def test_nothing_fits_the_explanation_is_the_one_of_the_checks_in_order(
        monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    # count 3: n04 (4 blue) and n08 (5 red, tainted below) pass the count; 6: every node is skipped by it
    state = _state()
    _taint(state, "n08")
    pod = add_pod(state, "p", req("gpu", count=count, selectors=(RED,)))
    slow, _ = await _decide(state, False, monkeypatch, "pack", 32, pod)
    fast, _ = await _decide(state, True, monkeypatch, "pack", 32, pod)
    assert isinstance(slow, Unschedulable) and isinstance(fast, Unschedulable)
    assert fast.explanation.message() == slow.explanation.message()
    assert _explained(fast) == _explained(slow)
    assert "were unschedulable" in fast.explanation.message()  # n00, n02, n05: none has devices enough


async def test_a_node_skipped_by_the_count_and_then_searched_to_explain_is_the_one_with_most_free(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # n1 has the most free devices of the nodes that pass the filters: its funnel explains (as before)
    state = FakeState({"n0": devices(1), "n1": [*devices(2), dev("b", {"color": "blue"})], "n2": devices(3)})
    _cordon(state, "n2")
    pod = add_pod(state, "p", req("gpu", count=4, selectors=(RED,)))
    slow, _ = await _decide(state, False, monkeypatch, "pack", 32, pod)
    fast, _ = await _decide(state, True, monkeypatch, "pack", 32, pod)
    assert _explained(fast) == _explained(slow)
    assert "2 node(s) cannot allocate the pod's claims" in fast.explanation.message()
