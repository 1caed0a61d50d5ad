"""Differential check: draflow's allocator core against upstream's (k8s.io/dynamic-resource-allocation
v0.37.1 ``structured``, run by hack/go-alloc-diff) on a fixed set of random scenarios
(``diff_scenarios.py``; comparison and the named exclusion rules in ``diff_kit.py``; many more seeds by
hand: ``hack/alloc-diff.py``). Integration: it needs the Go binary (built on first use)."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Iterator

import pytest
from diff_kit import RULES, Upstream, compare, run_draflow
from diff_scenarios import scenario

from draflow_testenv.binaries import ensure_binary

pytestmark = pytest.mark.integration

SEEDS = range(400)


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    process = Upstream(asyncio.run(ensure_binary("go-alloc-diff")))
    try:
        yield process
    finally:
        process.close()


def test_draflow_agrees_with_upstream_allocator(upstream: Upstream) -> None:
    seen: collections.Counter[str] = collections.Counter()
    disagreements = []
    for seed in SEEDS:
        case = scenario(seed)
        agree, why = compare(case, upstream.run(case), run_draflow(case))
        seen[why if agree else "DISAGREE"] += 1
        if not agree:
            disagreements.append(f"seed {seed}: {why}")
    assert not disagreements, f"{len(disagreements)} of {len(SEEDS)}:\n" + "\n".join(disagreements[:10])
    # Not vacuous: every outcome occurs, and the rules only excuse a minority.
    for outcome in ("allocated", "unsatisfiable", "error"):
        assert seen[outcome] >= 20, seen
    assert sum(seen[r] for r in RULES) < len(SEEDS) // 4, seen


def test_a_different_device_is_a_disagreement(upstream: Upstream) -> None:
    """The comparison can fail: the same scenario with upstream's answer altered."""
    case = next(c for c in map(scenario, SEEDS) if c["features"].keys() > {"DeviceBindingAndStatus"}
                and compare(c, upstream.run(c), run_draflow(c)) == (True, "allocated"))
    answer = upstream.run(case)
    answer["results"][0]["devices"]["results"][0]["device"] = "no-such-device"
    assert compare(case, answer, run_draflow(case))[0] is False
    assert compare(case, {"id": case["id"], "outcome": "unsatisfiable"}, run_draflow(case))[0] is False


FOREIGN_COUNTER_SLICE_SEED = 107272  # pool-0's counter slice targets node-2; an All request on node-1


def test_a_counter_slice_of_another_node_counts_only_for_upstreams_stable_allocator(
    upstream: Upstream,
) -> None:
    """Upstream's "stable" implementation (selected when DRAConsumableCapacity and the binding-condition
    gates are off) gathers a ``sharedCounters`` slice whatever node it targets, so another node's
    incomplete pool fails an ``All`` request here; "incubating" (kube-scheduler's default gates) leaves
    that slice out, as draflow always does. The same scenario agrees under the default gates."""
    case = scenario(FOREIGN_COUNTER_SLICE_SEED)
    theirs, ours = upstream.run(case), run_draflow(case)
    assert theirs["outcome"] == "error" and "currently being updated" in theirs["error"], theirs
    assert ours["outcome"] == "unsatisfiable", ours
    assert compare(case, theirs, ours) == (True, "stable-foreign-counter-slices")
    incubating = case | {"features": case["features"] | {"ConsumableCapacity": True}}
    theirs = upstream.run(incubating)
    assert theirs["outcome"] == "unsatisfiable", theirs
    assert compare(incubating, theirs, run_draflow(incubating)) == (True, "unsatisfiable")


EXPONENTIAL_SEED = 87204  # both searches still running after 4 minutes: three claims of firstAvailable/All


def test_a_search_past_its_deadline_is_a_timeout_on_both_sides(upstream: Upstream) -> None:
    """With ``timeoutSeconds`` neither side hangs on an exponential case: each answers "timeout", and the
    comparison counts it under its own rule instead of comparing."""
    case = scenario(EXPONENTIAL_SEED) | {"timeoutSeconds": 0.5}
    theirs, ours = upstream.run(case), run_draflow(case)
    assert theirs["outcome"] == "timeout", theirs
    assert "context deadline exceeded" in theirs["error"], theirs
    assert ours["outcome"] == "timeout", ours
    assert "search budget exhausted" in ours["error"], ours
    assert compare(case, theirs, ours) == (True, "timeout")
    # A timeout on one side only is excused too (that side's answer is unknown), and named.
    assert compare(case, {"id": case["id"], "outcome": "unsatisfiable"}, ours) == (True, "timeout")


def test_a_deadline_does_not_change_an_answer_found_in_time(upstream: Upstream) -> None:
    for seed in range(40):
        case = scenario(seed)
        timed = case | {"timeoutSeconds": 30}
        assert upstream.run(timed)["outcome"] == upstream.run(case)["outcome"], seed
        assert run_draflow(timed) == run_draflow(case), seed
