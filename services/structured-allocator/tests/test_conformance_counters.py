"""Conformance table: partitionable devices (DRAPartitionableDevices) — devices consuming shared
counters: what existing and in-flight allocations use up, rolling counters back when a device is
rejected later (taint, constraint), several counter sets and pools, per-device node selection, invalid
counter references, and the feature turned off.

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from conformance_kit import (
    DRIVER,
    DRIVER_B,
    GPU_CLASS,
    MEM,
    NIC_CLASS,
    Case,
    attr,
    check_case,
    consumes,
    counters,
    multi_dev,
    params,
    shared,
)
from sa_builders import alloc, claim, dev, first_available, req, res, rslice, share, sub


def part(
    name: str,
    *uses: tuple[str, dict[str, str]],
    attrs: dict[str, Any] | None = None,
    cap: bool = True,
    **extra: Any,
) -> Any:
    """A device consuming ``uses`` = (counter set, {counter: value}); ``cap``: its capacity mirrors the
    counters it consumes (upstream's "fromCounters")."""
    capacity: dict[str, str] = {}
    if cap:
        for _, values in uses:
            capacity.update(values)
    return dev(name, attrs, capacity or None, consumesCounters=[consumes(s, **v) for s, v in uses], **extra)


def at_least(q: str) -> tuple[str]:
    return (f'{MEM}.compareTo(quantity("{q}")) >= 0',)


def kind(k: str) -> tuple[str]:
    return (f'{attr("kind")} == "{k}"',)


MEM8 = counters("s2", set={"memory": "8Gi"})
FOUR_SIX_FOUR = [
    part("gpu-0", ("set", {"memory": "4Gi"})),
    part("gpu-1", ("set", {"memory": "6Gi"})),
    part("gpu-2", ("set", {"memory": "4Gi"})),
]

CASES: dict[str, Case] = {
    "one-partition": Case(
        [claim("c", req("gpu"))],
        [rslice("s1", [part("gpu-0", ("set", {"memory": "4Gi"}), cap=False)], count=2), MEM8],
        [alloc(res("gpu", "gpu-0"))],
        upstream=("partitionable-devices-single-device",),
    ),
    "huge-counters-exact": Case(
        [claim("c", req("gpu"))],
        [
            rslice(
                "s1",
                [
                    part("gpu-0", ("set", {"c": "9000000000000000000"}), cap=False),
                    part("gpu-1", ("set", {"c": "1"}), cap=False),
                ],
                count=2,
            ),
            counters("s2", set={"c": "10000000000000000000"}),
        ],
        [alloc(res("gpu", "gpu-1"))],
        allocated_devices=("gpu-0",),
        upstream=("partitionable-devices-counter-quantities-are-not-modified",),
    ),
    "same-pool-name-two-drivers-own-counters": Case(
        [claim("c1", req("gpu")), claim("c2", req("nic", cls="nic"))],
        [
            rslice("s1", [part("gpu-0", ("set", {"c": "1"}), cap=False)], count=2),
            counters("s2", set={"c": "1"}),
            rslice("s3", [part("nic-0", ("set", {"c": "2"}), cap=False)], count=2, driver=DRIVER_B),
            rslice(
                "s4",
                [],
                count=2,
                driver=DRIVER_B,
                sharedCounters=[{"name": "set", "counters": {"c": {"value": "2"}}}],
            ),
        ],
        [alloc(res("gpu", "gpu-0")), alloc(res("nic", "nic-0", driver=DRIVER_B))],
        classes=[GPU_CLASS, NIC_CLASS],
        upstream=("partitionable-devices-counter-cache-scoped-by-pool-ID",),
    ),
    "same-pool-name-two-drivers-other-counter-too-small": Case(
        [claim("c1", req("gpu")), claim("c2", req("nic", cls="nic"))],
        [
            rslice("s1", [part("gpu-0", ("set-1", {"c": "1"}), cap=False)], count=2),
            counters("s2", set_1={"c": "1"}),
            rslice("s3", [part("nic-0", ("set-2", {"d": "2"}), cap=False)], count=2, driver=DRIVER_B),
            rslice(
                "s4",
                [],
                count=2,
                driver=DRIVER_B,
                sharedCounters=[{"name": "set-2", "counters": {"d": {"value": "1"}}}],
            ),
        ],
        None,
        classes=[GPU_CLASS, NIC_CLASS],
        upstream=("partitionable-devices-counter-cache-not-crossed-between-driver-schemas",),
    ),
    "tainted-partition-gives-its-counters-back": Case(
        [claim("c", req("gpu"))],
        [
            rslice(
                "s1",
                [
                    part(
                        "gpu-0",
                        ("set", {"c": "1"}),
                        cap=False,
                        taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
                    ),
                    part("gpu-1", ("set", {"c": "1"}), cap=False),
                ],
                count=2,
            ),
            counters("s2", set={"c": "1"}),
        ],
        [alloc(res("gpu", "gpu-1"))],
        upstream=("partitionable-devices-taint-releases-counter",),
    ),
    "constraint-rejected-partition-gives-its-counters-back": Case(
        [claim("c", req("gpu", count=2), constraints=[{"matchAttribute": f"{DRIVER}/color"}])],
        [
            rslice(
                "s1",
                [
                    part("gpu-0", ("set", {"c": "1"}), attrs={"color": "red"}, cap=False),
                    part("gpu-1", ("set", {"c": "1"}), attrs={"color": "blue"}, cap=False),
                    part("gpu-2", ("set", {"c": "1"}), attrs={"color": "blue"}, cap=False),
                ],
                count=2,
            ),
            counters("s2", set={"c": "2"}),
        ],
        [alloc(res("gpu", "gpu-1"), res("gpu", "gpu-2"))],
        upstream=("partitionable-devices-constraint-releases-counter",),
    ),
    "backtracked-shared-partition-gives-its-counters-back": Case(
        [claim("c", req("a", selectors=kind("shared")), req("b", selectors=kind("counteronly")))],
        [
            rslice(
                "s1",
                [
                    part(
                        "gpu-0",
                        ("set", {"c": "1"}),
                        attrs={"kind": "shared"},
                        cap=False,
                        allowMultipleAllocations=True,
                    ),
                    dev("gpu-1", {"kind": "shared"}),
                    part("gpu-2", ("set", {"c": "1"}), attrs={"kind": "counteronly"}, cap=False),
                ],
                count=2,
            ),
            counters("s2", set={"c": "1"}),
        ],
        [alloc(res("a", "gpu-1"), res("b", "gpu-2"))],
        upstream=("partitionable-consumable-capacity-backtrack-releases-counter",),
    ),
    "capacity-rejection-rolls-back-constraint": Case(
        [
            claim("c1", req("gpu", capacity={"memory": "2"}, selectors=(f'{attr("str")} == "cap"',))),
            claim(
                "c2",
                first_available(
                    "r",
                    sub("all", mode="All", capacity={"memory": "2"}, selectors=(f'{attr("str")} == "cap"',)),
                    sub("fb", selectors=(f'{attr("str")} == "fb"',)),
                ),
                constraints=[{"matchAttribute": f"{DRIVER}/str"}],
            ),
        ],
        [rslice("s", [multi_dev("gpu-0", {"memory": "2"}, {"str": "cap"}), dev("gpu-1", {"str": "fb"})])],
        [alloc(shared("gpu", "gpu-0", 1, memory="2")), alloc(res("r/fb", "gpu-1"))],
        upstream=("consumable-capacity-rejection-rolls-back-constraints",),
    ),
    "second-share-of-partition-after-backtracking": Case(
        [
            claim("c1", req("a", selectors=kind("shared"))),
            claim(
                "c2",
                req("b", selectors=(f'{attr("kind")} == "shared" || {attr("kind")} == "fallback"',)),
                req("d", selectors=kind("gate")),
                req("e", selectors=kind("shared")),
                constraints=[{"matchAttribute": f"{DRIVER}/color", "requests": ["b", "d"]}],
            ),
        ],
        [
            rslice(
                "s1",
                [
                    part(
                        "gpu-0",
                        ("set", {"c": "1"}),
                        attrs={"kind": "shared", "color": "red"},
                        cap=False,
                        allowMultipleAllocations=True,
                    ),
                    dev("gpu-1", {"kind": "fallback", "color": "blue"}),
                    dev("gpu-2", {"kind": "gate", "color": "blue"}),
                ],
                count=2,
            ),
            counters("s2", set={"c": "1"}),
        ],
        [
            alloc(res("a", "gpu-0", shareID=share(1))),
            alloc(res("b", "gpu-1"), res("d", "gpu-2"), res("e", "gpu-0", shareID=share(3))),
        ],
        upstream=("partitionable-empty-capacity-multiple-share-backtrack-keeps-counter-ownership",),
    ),
    "partitions-first-available-smaller-one": Case(
        [
            claim(
                "c",
                req("a"),
                first_available(
                    "r", sub("x", selectors=at_least("6Gi")), sub("y", selectors=at_least("4Gi"))
                ),
            )
        ],
        [rslice("s1", FOUR_SIX_FOUR, count=2), MEM8],
        [alloc(res("a", "gpu-0"), res("r/y", "gpu-2"))],
        upstream=("partitionable-devices-prioritized-list",),
    ),
    "partitions-two-requests-skip-the-big-one": Case(
        [claim("c", req("a"), req("b"))],
        [rslice("s1", FOUR_SIX_FOUR, count=2), MEM8],
        [alloc(res("a", "gpu-0"), res("b", "gpu-2"))],
        upstream=("partitionable-devices-multiple-devices",),
    ),
    "partitions-two-counter-sets": Case(
        [
            claim(
                "c",
                req("a"),
                first_available(
                    "r", sub("x", selectors=at_least("6Gi")), sub("y", selectors=at_least("4Gi"))
                ),
            )
        ],
        [
            rslice(
                "s1",
                [
                    part(f"gpu-{i}", ("set-1", {"memory": m}), ("set-2", {"cpus": c}))
                    for i, (m, c) in enumerate([("4Gi", "4"), ("6Gi", "6"), ("4Gi", "4")])
                ],
                count=2,
            ),
            counters("s2", set_1={"memory": "18Gi"}, set_2={"cpus": "8"}),
        ],
        [alloc(res("a", "gpu-0"), res("r/y", "gpu-2"))],
        upstream=("partitionable-devices-multiple-capacity-pools",),
    ),
    "partitions-two-counters-in-two-sets": Case(
        [claim("c", req("a"), req("b"))],
        [
            rslice(
                "s1",
                [
                    part(
                        "gpu-0",
                        ("set-1", {"memory": "4Gi", "cpus": "6"}),
                        ("set-2", {"cpus": "4", "memory": "2Gi"}),
                    ),
                    part(
                        "gpu-1",
                        ("set-1", {"memory": "6Gi", "cpus": "4"}),
                        ("set-2", {"cpus": "6", "memory": "6Gi"}),
                    ),
                    part(
                        "gpu-2",
                        ("set-1", {"memory": "4Gi", "cpus": "4"}),
                        ("set-2", {"cpus": "4", "memory": "4Gi"}),
                    ),
                ],
                count=2,
            ),
            counters("s2", set_1={"cpus": "8", "memory": "18Gi"}, set_2={"cpus": "12", "memory": "18Gi"}),
        ],
        [alloc(res("a", "gpu-1"), res("b", "gpu-2"))],
        upstream=("partitionable-devices-multiple-counters",),
    ),
    "partitions-in-two-pools": Case(
        [claim("c", req("a"), req("b"))],
        [
            rslice(
                "s1",
                [
                    part("gpu-0", ("set", {"cpus": "6", "memory": "4Gi"})),
                    part("gpu-1", ("set", {"cpus": "4", "memory": "6Gi"})),
                    part("gpu-2", ("set", {"cpus": "4", "memory": "4Gi"})),
                ],
                pool="p1",
                count=2,
            ),
            counters("s2", pool="p1", set={"cpus": "8", "memory": "18Gi"}),
            rslice(
                "s3",
                [
                    part("gpu-0", ("set", {"cpus": "6", "memory": "4Gi"})),
                    part("gpu-1", ("set", {"cpus": "1", "memory": "7Gi"})),
                    part("gpu-2", ("set", {"cpus": "1", "memory": "7Gi"})),
                ],
                pool="p2",
                count=2,
            ),
            counters("s4", pool="p2", set={"cpus": "8", "memory": "18Gi"}),
        ],
        [alloc(res("a", "gpu-1", pool="p2"), res("b", "gpu-2", pool="p2"))],
        allocated_devices=("p1/gpu-1", "p1/gpu-2", "p2/gpu-0"),
        upstream=("partitionable-devices-multiple-pools",),
    ),
    "counter-nobody-consumes": Case(
        [claim("c", req("gpu", count=2))],
        [
            rslice(
                "s1",
                [part("gpu-0", ("set", {"memory": "5Gi"}), cap=False)]
                + [part(f"gpu-{i}", ("set", {"memory": "4Gi"}), cap=False) for i in (1, 2)],
                count=2,
            ),
            counters("s2", set={"memory": "8Gi", "unused": "1Gi"}),
        ],
        [alloc(res("gpu", "gpu-1"), res("gpu", "gpu-2"))],
        upstream=("partitionable-devices-unused-counters-in-counter-set",),
    ),
    "counters-used-up-by-allocated-partition": Case(
        [claim("c", req("gpu"))],
        [
            rslice(
                "s1",
                [part("gpu-0", ("set", {"memory": "4Gi"})), part("gpu-1", ("set", {"memory": "16Gi"}))],
                count=2,
            ),
            counters("s2", set={"memory": "18Gi"}),
        ],
        None,
        allocated_devices=("gpu-1",),
        upstream=("partitionable-devices-no-capacity-available",),
    ),
    "counters-overdrawn-by-allocated-partition": Case(
        [claim("c", req("gpu"))],
        [
            rslice(
                "s1",
                [part("gpu-0", ("set", {"memory": "4Gi"})), part("gpu-1", ("set", {"memory": "20Gi"}))],
                count=2,
            ),
            counters("s2", set={"memory": "18Gi"}),
        ],
        None,
        allocated_devices=("gpu-1",),
        upstream=("partitionable-devices-overallocated-capacity-pool",),
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_counters(case: Case) -> None:
    check_case(case)
