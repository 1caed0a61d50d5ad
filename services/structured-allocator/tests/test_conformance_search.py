"""Conformance table: the search itself — first fit in pool/slice/device order, backtracking over
requests and claims, combinations not permutations (bounded work), several drivers, the 32-results
limit.

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

import pytest
from conformance_kit import DRIVER_B, GPU_CLASS, MEM, NIC_CLASS, NODE2, Case, attr, check_case, params, pin
from sa_builders import alloc, claim, dev, first_available, req, res, rslice, sub

from structured_allocator.core import TooManyResultsError

BIG = f'{MEM}.compareTo(quantity("2Gi")) >= 0'
ANY = f'{MEM}.compareTo(quantity("1Gi")) >= 0'
SMALL_BIG = [dev("small", cap={"memory": "1Gi"}), dev("big", cap={"memory": "2Gi"})]
BIG_SMALL = [dev("big", cap={"memory": "2Gi"}), dev("small", cap={"memory": "1Gi"})]
KIND_X_Y_Y = [dev("gpu-0", {"type": "X"}), dev("gpu-1", {"type": "Y"}), dev("gpu-2", {"type": "Y"})]


def many(n: int) -> list[dict]:  # type: ignore[type-arg]
    return [dev(f"gpu-{i:02d}") for i in range(n)]


CASES: dict[str, Case] = {
    "nothing-to-allocate": Case([], [], [], upstream=("empty", "no-claims-to-allocate")),
    "one-device": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0")])],
        [alloc(res("gpu", "gpu-0"))],
        upstream=("simple",),
    ),
    "device-on-the-other-node": Case(
        [claim("c", req("gpu"))],
        [rslice("s1", [dev("gpu-0")], driver=DRIVER_B), rslice("s2", [dev("gpu-0")], node="node-2")],
        [alloc(res("gpu", "gpu-0", pool="node-2"), node_selector=pin("node-2"))],
        node=NODE2,
        upstream=("other-node",),
    ),
    "two-requests-small-then-big": Case(
        [claim("c", req("a", selectors=(ANY,)), req("b", selectors=(BIG,)))],
        [rslice("s", SMALL_BIG)],
        [alloc(res("a", "small"), res("b", "big"))],
        upstream=("small-and-large",),
    ),
    "two-requests-backtrack-when-first-takes-the-big-one": Case(
        [claim("c", req("a", selectors=(ANY,)), req("b", selectors=(BIG,)))],
        [rslice("s", BIG_SMALL)],
        [alloc(res("a", "small"), res("b", "big"))],
        upstream=("small-and-large-backtrack-requests",),
    ),
    "two-claims-backtrack-when-first-takes-the-big-one": Case(
        [claim("c1", req("a", selectors=(ANY,))), claim("c2", req("b", selectors=(BIG,)))],
        [rslice("s", BIG_SMALL)],
        [alloc(res("a", "small")), alloc(res("b", "big"))],
        upstream=("small-and-large-backtrack-claims",),
    ),
    "count-two-across-two-pools": Case(
        [claim("c", req("gpu", count=2))],
        [rslice("s1", [dev("gpu-0")], pool="p1"), rslice("s2", [dev("gpu-0")], pool="p2")],
        [alloc(res("gpu", "gpu-0", pool="p1"), res("gpu", "gpu-0", pool="p2"))],
        upstream=("devices-split-across-different-slices",),
    ),
    "no-slices": Case([claim("c", req("gpu"))], [], None, upstream=("no-slices",)),
    "two-claims-one-device": Case(
        [claim("c1", req("gpu")), claim("c2", req("gpu"))],
        [rslice("s", [dev("gpu-0")])],
        None,
        upstream=("not-enough-suitable-devices",),
    ),
    "only-device-already-allocated": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [dev("gpu-0")])],
        None,
        allocated_devices=("gpu-0", "gpu-1"),
        upstream=("already-allocated-devices",),
    ),
    "two-drivers-two-classes": Case(
        [claim("c1", req("gpu")), claim("c2", req("nic", cls="nic"))],
        [rslice("s", [dev("gpu-0"), dev("gpu-1")]), rslice("n", [dev("nic-0")], driver=DRIVER_B)],
        [alloc(res("gpu", "gpu-0")), alloc(res("nic", "nic-0", driver=DRIVER_B))],
        classes=[GPU_CLASS, NIC_CLASS],
        upstream=("several-different-drivers",),
    ),
    # Combinations, not permutations: 5 of 4 devices fails after a bounded number of states.
    "five-of-four-one-slice": Case(
        [claim("c", req("gpu", count=5))],
        [rslice("s", many(4))],
        None,
        max_steps=16,
        upstream=("check-combinations-within-single-request-single-pool-single-slice",),
    ),
    "five-of-four-two-slices": Case(
        [claim("c", req("gpu", count=5))],
        [rslice("s1", many(2), count=2), rslice("s2", [dev("gpu-x"), dev("gpu-y")], count=2)],
        None,
        max_steps=16,
        upstream=("check-combinations-within-single-request-single-pool-multiple-slices",),
    ),
    "five-of-four-two-pools": Case(
        [claim("c", req("gpu", count=5))],
        [
            rslice("s1", [dev("gpu-0")], pool="p1", count=2),
            rslice("s2", [dev("gpu-1")], pool="p1", count=2),
            rslice("s3", [dev("gpu-2"), dev("gpu-3")], pool="p2"),
        ],
        None,
        max_steps=16,
        upstream=("check-combinations-within-single-request-multiple-pools-multiple-slices",),
    ),
    "five-of-four-four-pools": Case(
        [claim("c", req("gpu", count=5))],
        [rslice(f"s{i}", [dev("gpu")], pool=f"p{i}") for i in range(4)],
        None,
        max_steps=16,
        upstream=("check-combinations-within-single-request-many-pools",),
    ),
    "backtrack-when-count-two-takes-the-only-x": Case(
        [claim("c", req("a", count=2), req("b", selectors=(f'{attr("type")} == "X"',)))],
        [rslice("s", KIND_X_Y_Y)],
        [alloc(res("a", "gpu-1"), res("a", "gpu-2"), res("b", "gpu-0"))],
        max_steps=12,
        upstream=("check-combinations-with-backtracking",),
    ),
    "backtrack-across-slices-and-pools": Case(
        [claim("c", req("a", count=2), req("b", selectors=(f'{attr("type")} == "X"',)))],
        [
            rslice("s1", [dev("gpu-0", {"type": "X"})], pool="p1", count=2),
            rslice("s2", [dev("gpu-1", {"type": "Y"})], pool="p1", count=2),
            rslice("s3", [dev("gpu-2", {"type": "Y"}, bindingConditions=["IsPrepared"])], pool="p2"),
        ],
        [
            alloc(
                res("a", "gpu-1", pool="p1"),
                res("a", "gpu-2", pool="p2", bindingConditions=["IsPrepared"]),
                res("b", "gpu-0", pool="p1"),
            )
        ],
        max_steps=12,
        upstream=("check-combinations-with-backtracking-across-slices-and-pools",),
    ),
    "backtrack-through-first-available": Case(
        [
            claim(
                "c",
                first_available(
                    "a", sub("three-y", count=3, selectors=(f'{attr("type")} == "Y"',)), sub("two", count=2)
                ),
                first_available("b", sub("two", count=2), sub("x", selectors=(f'{attr("type")} == "X"',))),
            )
        ],
        [rslice("s", KIND_X_Y_Y)],
        [alloc(res("a/two", "gpu-1"), res("a/two", "gpu-2"), res("b/x", "gpu-0"))],
        max_steps=26,
        upstream=("check-combinations-with-prioritized-list",),
    ),
    # --- at most 32 results per claim -----------------------------------------------------------------
    "thirty-two-devices-fit": Case(
        [claim("c", req("gpu", count=32))],
        [rslice("s", many(32))],
        [alloc(*[res("gpu", f"gpu-{i:02d}") for i in range(32)])],
        upstream=("max-number-devices",),
    ),
    "sixteen-plus-sixteen-fit": Case(
        [claim("c", req("a", count=16), req("b", count=16))],
        [rslice("s", many(32))],
        [alloc(*[res("a" if i < 16 else "b", f"gpu-{i:02d}") for i in range(32)])],
        upstream=("exact-count-sum-exactly-fills-claim-limit",),
    ),
    "thirty-two-without-devices-does-not-fit": Case(
        [claim("c", req("gpu", count=32))], [], None, upstream=("many-devices-okay",)
    ),
    "five-hundred-is-an-error": Case(
        [claim("c", req("gpu", count=500))],
        [],
        error=(TooManyResultsError, 'request "gpu": adding 500 devices exceeds the claim limit of 32'),
        upstream=("too-many-devices-single-request", "all-devices-invalid-CEL"),
    ),
    "thirty-two-plus-one-is-an-error": Case(
        [claim("c", req("a", count=32), req("b"))],
        [rslice("s", many(33))],
        error=(TooManyResultsError, 'request "b": adding 1 devices exceeds the claim limit of 32'),
        upstream=("too-many-devices-total",),
    ),
    "twenty-plus-twenty-names-the-second-request": Case(
        [claim("c", req("a", count=20), req("b", count=20))],
        [],
        error=(TooManyResultsError, 'request "b": adding 20 devices exceeds the claim limit of 32'),
        upstream=("exact-count-sum-exceeds-claim-limit",),
    ),
    "huge-counts-are-an-error": Case(
        [claim("c", req("a", count=2**62 + 1), req("b", count=2**62 + 1))],
        [],
        error=(TooManyResultsError, "exceeds the claim limit of 32"),
        upstream=("exact-count-total-overflows-claim-limit",),
    ),
    "four-huge-counts-are-an-error": Case(
        [claim("c", *[req(f"r{i}", count=2**62 + 1) for i in range(4)])],
        [],
        error=(TooManyResultsError, "exceeds the claim limit of 32"),
        upstream=("exact-count-total-would-wrap-to-zero",),
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_search(case: Case) -> None:
    check_case(case)
