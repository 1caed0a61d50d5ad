"""Conformance table: firstAvailable (DRAPrioritizedList).

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from conformance_kit import DRIVER, DRIVER_B, GPU_CLASS, MEM, NIC_CLASS, Case, attr, check_case, gpus, params
from sa_builders import alloc, claim, dclass, dev, first_available, req, res, rslice, sub

from structured_allocator.core import Features, InvalidRequestError, TooManyResultsError


def mem_at_least(q: str) -> tuple[str]:
    return (f'{MEM}.compareTo(quantity("{q}")) >= 0',)


def gen_is(g: str) -> tuple[str]:
    return (f'{attr("generation")} == "{g}"',)


def memdev(name: str, q: str, **attrs: Any) -> dict[str, Any]:
    return dev(name, attrs or None, {"memory": q})


def v(version: str) -> tuple[str, str]:
    return ("version", version)


def many(n: int, pool: str = "node-1", driver: str = DRIVER) -> dict[str, Any]:
    return rslice(f"s-{pool}", [dev(f"gpu-{i:02d}") for i in range(n)], pool=pool, driver=driver)


def results(request: str, first: int, n: int, **kw: Any) -> list[dict[str, Any]]:
    return [res(request, f"gpu-{i:02d}", **kw) for i in range(first, first + n)]


CASES: dict[str, Case] = {
    "first-available-falls-back": Case(
        [
            claim(
                "c",
                first_available(
                    "gpu",
                    sub("big", selectors=(f'{MEM}.compareTo(quantity("200Gi")) >= 0',)),
                    sub("small", count=2),
                ),
            )
        ],
        [rslice("s", [dev("gpu-0", cap={"memory": "80Gi"}), dev("gpu-1", cap={"memory": "80Gi"})])],
        [alloc(res("gpu/small", "gpu-0"), res("gpu/small", "gpu-1"))],
    ),
    "first-available-first-choice": Case(
        [
            claim(
                "c",
                first_available(
                    "gpu", sub("big", selectors=(f'{MEM}.compareTo(quantity("40Gi")) >= 0',)), sub("small")
                ),
            )
        ],
        [rslice("s", [dev("gpu-0", cap={"memory": "20Gi"}), dev("gpu-1", cap={"memory": "80Gi"})])],
        [alloc(res("gpu/big", "gpu-1"))],
    ),
    "first-available-backtracks-within-subrequest": Case(
        [
            claim(
                "c",
                first_available("a", sub("one"), sub("two", count=2)),
                req("b", selectors=(f'device.attributes["{DRIVER}"].numa == 0',)),
                constraints=[{"matchAttribute": f"{DRIVER}/numa"}],
            )
        ],
        [rslice("s", gpus(3, numa=[1, 0, 0]))],
        [alloc(res("a/one", "gpu-1"), res("b", "gpu-2"))],
    ),
    # --- upstream's firstAvailable cases ---------------------------------------------------------------
    "first-subrequest-class-has-no-devices": Case(
        [claim("c", first_available("r", sub("a", cls="nic"), sub("b")))],
        [rslice("s", [dev("gpu-0")])],
        [alloc(res("r/b", "gpu-0"))],
        classes=[GPU_CLASS, NIC_CLASS],
        upstream=("prioritized-list-first-unavailable",),
    ),
    "no-subrequest-fits": Case(
        [claim("c", first_available("r", sub("a", cls="nic", count=2), sub("b", count=2)))],
        [rslice("s1", [dev("gpu-0")]), rslice("s2", [dev("nic-0")], pool="p2", driver=DRIVER_B)],
        None,
        classes=[GPU_CLASS, NIC_CLASS],
        upstream=("prioritized-list-non-available",),
    ),
    "second-subrequest-with-selectors": Case(
        [
            claim(
                "c",
                req("a", selectors=mem_at_least("1Gi")),
                first_available(
                    "r",
                    sub("big", selectors=mem_at_least("4Gi")),
                    sub("two", count=2, selectors=mem_at_least("2Gi")),
                ),
            )
        ],
        [rslice("s", [memdev("gpu-0", "2Gi"), memdev("gpu-1", "2Gi"), memdev("gpu-2", "1Gi")])],
        [alloc(res("a", "gpu-2"), res("r/two", "gpu-0"), res("r/two", "gpu-1"))],
        upstream=("prioritized-list-subrequests-with-expressions",),
    ),
    "constraint-naming-parent-covers-subrequests": Case(
        [
            claim(
                "c",
                req("a", selectors=mem_at_least("8Gi")),
                first_available(
                    "r", sub("x", selectors=mem_at_least("2Gi")), sub("y", selectors=mem_at_least("1Gi"))
                ),
                constraints=[{"requests": ["a", "r"], "matchAttribute": f"{DRIVER}/driverVersion"}],
            )
        ],
        [
            rslice("s1", [memdev("gpu-0", "8Gi", driverVersion=v("1.0.0"))], pool="p1"),
            rslice(
                "s2",
                [
                    memdev("gpu-1", "2Gi", driverVersion=v("2.0.0")),
                    memdev("gpu-2", "1Gi", driverVersion=v("1.0.0")),
                ],
                pool="p2",
            ),
        ],
        [alloc(res("a", "gpu-0", pool="p1"), res("r/y", "gpu-2", pool="p2"))],
        upstream=("prioritized-list-subrequests-with-constraints-ref-parent-request",),
    ),
    "constraint-naming-one-subrequest": Case(
        [
            claim(
                "c",
                req("a", selectors=mem_at_least("8Gi")),
                first_available(
                    "r", sub("x", selectors=mem_at_least("2Gi")), sub("y", selectors=mem_at_least("1Gi"))
                ),
                constraints=[{"requests": ["a", "r/x"], "matchAttribute": f"{DRIVER}/driverVersion"}],
            )
        ],
        [
            rslice("s1", [memdev("gpu-0", "8Gi", driverVersion=v("1.0.0"))], pool="p1"),
            rslice("s2", [memdev("gpu-1", "2Gi", driverVersion=v("2.0.0"))], pool="p2"),
        ],
        [alloc(res("a", "gpu-0", pool="p1"), res("r/y", "gpu-1", pool="p2"))],
        upstream=("prioritized-list-subrequests-with-constraints-ref-sub-request",),
    ),
    "all-mode-subrequest-with-allocated-device-falls-back": Case(
        [claim("c", first_available("r", sub("all", mode="All"), sub("one")))],
        [rslice("s", [dev("gpu-0"), dev("gpu-1")])],
        [alloc(res("r/one", "gpu-1"))],
        allocated_devices=("gpu-0",),
        upstream=("prioritized-list-subrequests-with-allocation-mode-all",),
    ),
    "all-mode-subrequest-after-other-request-falls-back": Case(
        [claim("c", req("a"), first_available("r", sub("all", mode="All"), sub("one")))],
        [rslice("s", [dev("gpu-0"), dev("gpu-1")])],
        [alloc(res("a", "gpu-0"), res("r/one", "gpu-1"))],
        upstream=("prioritized-list-allocation-mode-all-multiple-requests",),
    ),
    "all-mode-subrequest-one-device-allocated": Case(
        [claim("c", first_available("r", sub("all", mode="All"), sub("one")))],
        [rslice("s", [dev("gpu-0"), dev("gpu-1")])],
        [alloc(res("r/one", "gpu-0"))],
        allocated_devices=("gpu-1",),
        upstream=("prioritized-list-allocation-mode-all",),
    ),
    "all-mode-subrequest-empty-slice-falls-back": Case(
        [claim("c", first_available("r", sub("all", mode="All"), sub("nic", cls="nic")))],
        [rslice("s1", [], pool="p1"), rslice("s2", [dev("nic-0")], pool="p2", driver=DRIVER_B)],
        [alloc(res("r/nic", "nic-0", pool="p2", driver=DRIVER_B))],
        classes=[GPU_CLASS, NIC_CLASS],
        upstream=("all-devices-slice-without-devices-prioritized-list",),
    ),
    "all-mode-subrequest-no-slices-falls-back": Case(
        [claim("c", first_available("r", sub("all", mode="All"), sub("nic", cls="nic")))],
        [rslice("s2", [dev("nic-0")], pool="p2", driver=DRIVER_B)],
        [alloc(res("r/nic", "nic-0", pool="p2", driver=DRIVER_B))],
        classes=[GPU_CLASS, NIC_CLASS],
        upstream=("all-devices-no-slices-prioritized-list",),
    ),
    "all-mode-subrequest-some-allocated-falls-back": Case(
        [claim("c", first_available("r", sub("all", mode="All"), sub("nic", cls="nic")))],
        [
            rslice("s1", [dev("gpu-0"), dev("gpu-1")], pool="p1"),
            rslice("s2", [dev("nic-0")], pool="p2", driver=DRIVER_B),
        ],
        [alloc(res("r/nic", "nic-0", pool="p2", driver=DRIVER_B))],
        classes=[GPU_CLASS, NIC_CLASS],
        allocated_devices=("p1/gpu-0",),
        upstream=("all-devices-some-allocated-prioritized-list",),
    ),
    "all-mode-subrequest-selector-matches-nothing": Case(
        [
            claim(
                "c",
                first_available(
                    "r",
                    sub("v6", mode="All", selectors=gen_is("v6")),
                    sub("v5", mode="All", selectors=gen_is("v5")),
                ),
            )
        ],
        [rslice("s", [dev("gpu-0", {"generation": "v5"})])],
        [alloc(res("r/v5", "gpu-0"))],
        upstream=("prioritized-list-allocation-mode-all-with-selectors",),
    ),
    "all-mode-subrequest-over-two-pools": Case(
        [
            claim(
                "c",
                first_available(
                    "r",
                    sub("v6", mode="All", selectors=gen_is("v6")),
                    sub("v5", mode="All", selectors=gen_is("v5")),
                ),
            )
        ],
        [
            rslice("s1", [dev("gpu-0", {"generation": "v5"})], pool="p1"),
            rslice("s2", [dev("gpu-0", {"generation": "v5"})], pool="p2"),
        ],
        [alloc(res("r/v5", "gpu-0", pool="p1"), res("r/v5", "gpu-0", pool="p2"))],
        upstream=("prioritized-list-allocation-mode-all-with-selectors-multiple-pools",),
    ),
    "all-mode-subrequest-ignores-other-nodes-pool": Case(
        [
            claim(
                "c",
                first_available(
                    "r",
                    sub("v6", mode="All", selectors=gen_is("v6")),
                    sub("v5", mode="All", selectors=gen_is("v5")),
                ),
            )
        ],
        [
            rslice("s1", [dev("gpu-0", {"generation": "v5"})], pool="p1"),
            rslice(
                "s2",
                [dev("gpu-0", {"generation": "v5"}), dev("gpu-1", {"generation": "v6"})],
                node="node-2",
                pool="p2",
            ),
        ],
        [alloc(res("r/v5", "gpu-0", pool="p1"))],
        upstream=("prioritized-list-allocation-mode-all-with-selectors-multiple-pools-across-nodes",),
    ),
    "all-mode-subrequest-within-class-subset": Case(
        [
            claim(
                "c",
                first_available(
                    "r",
                    sub("v6", mode="All", selectors=gen_is("v6")),
                    sub("v5", mode="All", selectors=gen_is("v5")),
                ),
            )
        ],
        [
            rslice(
                "s",
                [
                    dev("gpu-0", {"generation": "v6", "selected": False}),
                    dev("gpu-1", {"generation": "v5", "selected": False}),
                    dev("gpu-2", {"generation": "v5", "selected": True}),
                ],
            )
        ],
        [alloc(res("r/v5", "gpu-2"))],
        classes=[dclass("gpu", f'device.driver == "{DRIVER}" && {attr("selected")}')],
        upstream=("prioritized-list-allocation-mode-all-with-selectors-deviceclass-subset",),
    ),
    "subrequests-with-feature-off-is-an-error": Case(
        [claim("c", first_available("r", sub("a")))],
        [rslice("s", [dev("gpu-0")])],
        features=Features(prioritized_list=False),
        error=(
            InvalidRequestError,
            'request "r": has subrequests, but the DRAPrioritizedList feature is disabled',
        ),
        upstream=("prioritized-list-disabled",),
    ),
    "plain-request-then-first-available": Case(
        [
            claim(
                "c",
                req("a", selectors=mem_at_least("8Gi")),
                first_available(
                    "r", sub("x", selectors=mem_at_least("8Gi")), sub("y", selectors=mem_at_least("4Gi"))
                ),
            )
        ],
        [
            rslice("s1", [memdev("gpu-0", "8Gi")], pool="p1"),
            rslice("s2", [memdev("gpu-1", "4Gi")], pool="p2"),
        ],
        [alloc(res("a", "gpu-0", pool="p1"), res("r/y", "gpu-1", pool="p2"))],
        upstream=("prioritized-list-multi-request",),
    ),
    "first-available-backtracks-to-second-subrequest": Case(
        [
            claim(
                "c",
                first_available(
                    "r", sub("x", selectors=mem_at_least("8Gi")), sub("y", selectors=mem_at_least("4Gi"))
                ),
                req("a", selectors=mem_at_least("8Gi")),
            )
        ],
        [
            rslice("s1", [memdev("gpu-0", "8Gi")], pool="p1"),
            rslice("s2", [memdev("gpu-1", "4Gi")], pool="p2"),
        ],
        [alloc(res("r/y", "gpu-1", pool="p2"), res("a", "gpu-0", pool="p1"))],
        upstream=("prioritized-list-with-backtracking",),
    ),
    "first-subrequest-over-limit-second-fits": Case(
        [claim("c", first_available("r", sub("a", cls="nic", count=500), sub("b")))],
        [rslice("s", [dev("gpu-0")])],
        [alloc(res("r/b", "gpu-0"))],
        classes=[GPU_CLASS, NIC_CLASS],
        upstream=("prioritized-list-too-many-in-first-subrequest",),
    ),
    "smallest-subrequest-still-over-limit-is-an-error": Case(
        [claim("c", req("a", count=20), first_available("r", sub("x", count=20), sub("y", count=24)))],
        [],
        error=(TooManyResultsError, 'request "r": adding 20 devices exceeds the claim limit of 32'),
        upstream=("prioritized-list-minimum-sum-exceeds-claim-limit",),
    ),
    "huge-first-subrequest-pruned": Case(
        [claim("c", req("a"), first_available("r", sub("x", count=2**63 - 1), sub("y")))],
        [rslice("s", [dev("gpu-0"), dev("gpu-1")])],
        [alloc(res("a", "gpu-0"), res("r/y", "gpu-1"))],
        max_steps=8,
        upstream=("prioritized-list-overflowing-first-subrequest-is-pruned",),
    ),
    "two-first-available-at-half-the-limit": Case(
        [
            claim(
                "c",
                first_available("r0", sub("all", count=32), sub("half", count=16)),
                first_available("r1", sub("all", count=32), sub("half", count=16)),
            )
        ],
        [many(64)],
        [alloc(*results("r0/half", 0, 16), *results("r1/half", 16, 16))],
        max_steps=75,
        upstream=("prioritized-list-max-allocation-limit-request",),
    ),
    "all-mode-subrequest-over-limit-with-other-request": Case(
        [
            claim(
                "c",
                first_available("r", sub("all", mode="All"), sub("two", count=2)),
                req("n", cls="nic", count=2),
            )
        ],
        [many(31, pool="p1"), rslice("s-p2", [dev("gpu-00"), dev("gpu-01")], pool="p2", driver=DRIVER_B)],
        [alloc(*results("r/two", 0, 2, pool="p1"), *results("n", 0, 2, pool="p2", driver=DRIVER_B))],
        classes=[GPU_CLASS, NIC_CLASS],
        max_steps=42,
        upstream=("prioritized-list-max-allocation-allocation-mode-all",),
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_prioritized(case: Case) -> None:
    check_case(case)
