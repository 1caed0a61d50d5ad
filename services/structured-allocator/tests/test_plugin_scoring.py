"""Which feasible node a pod with ``firstAvailable`` requests gets: kube-scheduler v1.37.1 DynamicResources
``Test_computesScore`` (the score, :func:`~structured_allocator.core.subrequest_score.subrequest_score`)
and the ``*-prioritized-list-scoring`` cases of ``TestPlugin`` (the decision picks the best-scored node;
node names are chosen so that the node found first is *not* the best one)."""

from __future__ import annotations

from typing import Any

import pytest
from sa_builders import DRIVER, claim, dev, first_available, req, sub
from test_decision_budget import decider
from test_plugin_decisions import PluginState, add, pod

from structured_allocator.core.subrequest_score import subrequest_score
from structured_allocator.decision import Placement


def subs(n: int, count: int = 1) -> list[dict[str, Any]]:
    return [sub(f"subreq-{i + 1}", count=count) for i in range(n)]


def prioritized(*requests: tuple[str, int]) -> dict[str, Any]:
    return claim("c", *(first_available(name, *subs(n)) for name, n in requests))


def allocation(*requests: str) -> dict[str, Any]:
    return {"devices": {"results": [{"request": r, "driver": DRIVER, "pool": "p", "device": "d"}
                                    for r in requests]}}


ALLOCATED = claim("a", req("req-1"), allocation=allocation("req-1"))


@pytest.mark.parametrize(("claims", "allocations", "score"), [
    pytest.param([ALLOCATED, claim("b", req("req-2"))], [allocation("req-2")], 0,
                 id="mix-of-allocated-and-unallocated-claims"),
    pytest.param([prioritized(("req-1", 1))], [allocation("req-1/subreq-1")], 8,
                 id="single-request-only-subrequest-allocated"),
    pytest.param([prioritized(("req-1", 8))], [allocation("req-1/subreq-8")], 1,
                 id="single-request-last-subrequest-allocated"),
    pytest.param([prioritized(("req-1", 4), ("req-2", 5))],
                 [allocation("req-1/subreq-4", "req-2/subreq-5")], 9,
                 id="multiple-requests-with-middle-subrequests-allocated"),
    pytest.param([prioritized(("req-1", 8), ("req-2", 1))],
                 [allocation("req-1/subreq-8", "req-2/subreq-1")], 9,
                 id="multiple-requests-with-top-subrequests-allocated"),
    pytest.param([prioritized(("req-1", 8)), prioritized(("req-2", 8))],
                 [allocation("req-1/subreq-8"), allocation("req-2/subreq-8")], 2,
                 id="multiple-claims-with-last-subrequests-allocated"),
    pytest.param([prioritized(("req-1", 1)), prioritized(("req-2", 1))],
                 [allocation("req-1/subreq-1"), allocation("req-2/subreq-1")], 16,
                 id="multiple-claims-with-top-subrequests-allocated"),
])
def test_computes_score(claims: list[dict[str, Any]], allocations: list[dict[str, Any]], score: int) -> None:
    assert subrequest_score(claims, allocations) == score


def test_computes_score_more_claims_than_allocations() -> None:
    with pytest.raises(ValueError, match="fewer allocations"):
        subrequest_score([prioritized(("req-1", 1)), prioritized(("req-2", 1))], [])


HEALTHY = f'device.attributes["{DRIVER}"].healthy'


async def test_single_claim_prioritized_list_scoring() -> None:
    """subreq-1 wants a healthy device: only "b-healthy" has one; "a-plain" serves only subreq-2."""
    state = PluginState({"a-plain": [dev("d0", {"healthy": False})],
                         "b-healthy": [dev("d0", {"healthy": True})]})
    add(state, claim("pc", first_available("req-1", sub("subreq-1", selectors=(HEALTHY,)), sub("subreq-2"))),
        owner=None)
    out = await decider(state).decide(pod("pc"))
    assert isinstance(out, Placement) and out.node == "b-healthy"
    assert out.claims[0].allocation is not None
    assert [r["request"] for r in out.claims[0].allocation["devices"]["results"]] == ["req-1/subreq-1"]


async def test_multiple_claims_prioritized_list_scoring() -> None:
    """Claim 1: one device; claim 2: 4, else 3, 2 or 1 devices. "c-four" (4 devices) gives claim 2 its
    second choice (score 8 + 7), "b-two" only its fourth (8 + 5), "a-one" cannot hold both."""
    state = PluginState({"a-one": [dev("d0")], "b-two": [dev(f"d{i}") for i in range(2)],
                         "c-four": [dev(f"d{i}") for i in range(4)]})
    add(state, claim("pc1", first_available("req-1", sub("subreq-1", count=1))), owner=None)
    choices = (sub(f"subreq-{i + 1}", count=4 - i) for i in range(4))
    add(state, claim("pc2", first_available("req-1", *choices)), owner=None)
    p = pod("pc1", "pc2")
    out = await decider(state).decide(p)
    assert isinstance(out, Placement) and out.node == "c-four"
    second = out.claims[1].allocation
    assert second is not None and {r["request"] for r in second["devices"]["results"]} == {"req-1/subreq-2"}


async def test_multiple_requests_prioritized_list_scoring() -> None:
    """Two requests, each 2 devices else 1: four devices serve both first choices (16), three one (15),
    two none (14)."""
    state = PluginState({"a-two": [dev(f"d{i}") for i in range(2)],
                         "b-three": [dev(f"d{i}") for i in range(3)],
                         "c-four": [dev(f"d{i}") for i in range(4)]})
    add(state, claim("pc", *(first_available(r, sub("subreq-1", count=2), sub("subreq-2", count=1))
                             for r in ("req-1", "req-2"))), owner=None)
    out = await decider(state).decide(pod("pc"))
    assert isinstance(out, Placement) and out.node == "c-four"
