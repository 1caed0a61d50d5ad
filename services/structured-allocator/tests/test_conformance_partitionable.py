"""Conformance table: Partitionable devices: shared counters (DRAPartitionableDevices).

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
    NODE2,
    Case,
    attr,
    check_case,
    consumes,
    counters,
    exclusive_alloc,
    labels,
    params,
    pin,
)
from sa_builders import alloc, claim, dev, first_available, req, res, rslice, sub

from structured_allocator.core import Features, PoolUnavailableError


def partition(name: str, mem: str, kind: str) -> dict[str, Any]:
    return dev(
        name,
        {"kind": kind},
        consumesCounters=[{"counterSet": "gpu-0-mem", "counters": {"memory": {"value": mem}}}],
    )


PARTITIONS = rslice(
    "devices",
    [
        partition("full", "80Gi", "full"),
        partition("half-a", "40Gi", "half"),
        partition("half-b", "40Gi", "half"),
    ],
    count=2,
)
COUNTER_SLICE2 = rslice(
    "counters", [], count=2, sharedCounters=[{"name": "gpu-0-mem", "counters": {"memory": {"value": "80Gi"}}}]
)


def cpart(name: str, counter_set: str, mem: str, cap: bool = True, **extra: Any) -> dict[str, Any]:
    """A device consuming ``mem`` memory of ``counter_set`` (``cap``: capacity mirrors it)."""
    capacity = {"memory": mem} if cap else None
    return dev(name, cap=capacity, consumesCounters=[consumes(counter_set, memory=mem)], **extra)


def at_least(q: str) -> tuple[str]:
    return (f'{MEM}.compareTo(quantity("{q}")) >= 0',)


PER_DEVICE: dict[str, Any] = {"node": None, "pool": "p", "perDeviceNodeSelection": True}
PINNED_NODE2 = pin("node-2")


CASES: dict[str, Case] = {
    "counters-two-halves": Case(
        [claim("c", req("gpu", count=2, selectors=(f'device.attributes["{DRIVER}"].kind == "half"',)))],
        [COUNTER_SLICE2, PARTITIONS],
        [alloc(res("gpu", "half-a"), res("gpu", "half-b"))],
    ),
    "counters-full-exhausts-memory": Case(
        [
            claim(
                "c",
                req("a", selectors=(f'device.attributes["{DRIVER}"].kind == "full"',)),
                req("b", selectors=(f'device.attributes["{DRIVER}"].kind == "half"',)),
            )
        ],
        [COUNTER_SLICE2, PARTITIONS],
        None,
        summary='claims "c": every request has usable devices on its own, but not all together '
        "(constraints, or requests competing for the same devices)",
    ),
    "counters-consumed-by-allocated-device": Case(
        [claim("c", req("gpu", selectors=(f'device.attributes["{DRIVER}"].kind == "half"',)))],
        [COUNTER_SLICE2, PARTITIONS],
        None,
        allocated=[exclusive_alloc("full")],
        summary=f'claim "c" request "gpu": 3 devices of class gpu, 2 match selector '
        f'device.attributes["{DRIVER}"].kind == "half", 2 blocked by counters, 0 usable, 1 needed',
        explain={
            "gpu": {"class_devices": 3, "matching": 2, "free": 2, "blocked_by_counters": 2, "usable": 0}
        },
    ),
    "counters-one-half-left": Case(
        [claim("c", req("gpu", selectors=(f'device.attributes["{DRIVER}"].kind != "full"',)))],
        [COUNTER_SLICE2, PARTITIONS],
        [alloc(res("gpu", "half-b"))],
        allocated=[exclusive_alloc("half-a")],
    ),
    "counters-feature-off-skips-partitionable-slices": Case(
        [claim("c", req("gpu"))],
        [COUNTER_SLICE2, PARTITIONS],
        None,
        features=Features(partitionable_devices=False),
    ),
    # --- DRADeviceCompatibilityGroups off (issue 12 defect 3): slices using groups are ignored --------
    "compatibility-groups-off-grouped-slice-makes-pool-incomplete": Case(
        [claim("c", req("gpu"))],
        [
            rslice(
                "a-devices",
                [dev("grouped", consumesCounters=[consumes("set-a", ("mig",), mem="2")])],
                pool="a",
                count=2,
            ),
            counters("a-counters", pool="a", set_a={"mem": "4"}),
            rslice(
                "b-devices", [dev("plain", consumesCounters=[consumes("set-b", mem="2")])], pool="b", count=2
            ),
            counters("b-counters", pool="b", set_b={"mem": "4"}),
        ],
        [alloc(res("gpu", "plain", pool="b"))],
        upstream=("compatibility-groups-disabled-skips-grouped-pool",),
    ),
    "compatibility-groups-off-ungrouped-device-of-grouped-pool-unused": Case(
        [claim("c", req("gpu"))],
        [
            rslice("s1", [dev("grouped", consumesCounters=[consumes("set", ("mig",), mem="1")])], count=3),
            rslice("s2", [dev("plain", consumesCounters=[consumes("set", mem="1")])], count=3),
            counters("s3", count=3, set={"mem": "4"}),
        ],
        None,
        summary='claim "c" request "gpu": 0 devices of class gpu, 0 usable, 1 needed; '
        f"incomplete pools skipped: {DRIVER}/node-1",
        upstream=("compatibility-groups-disabled-skips-ungrouped-device-in-grouped-pool",),
    ),
    "compatibility-groups-off-all-mode-over-grouped-pool-is-an-error": Case(
        [claim("c", req("gpu", mode="All"))],
        [
            rslice("s1", [dev("grouped", consumesCounters=[consumes("set", ("mig",), mem="1")])], count=3),
            rslice("s2", [dev("plain", consumesCounters=[consumes("set", mem="1")])], count=3),
            counters("s3", count=3, set={"mem": "4"}),
        ],
        error=(PoolUnavailableError, f"resource pool {DRIVER}/node-1 is currently being updated"),
    ),
    # --- upstream: feature off, per-device node selection, validation, pools over nodes -------------------
    "feature-off-partition-not-used": Case(
        [claim("c", req("gpu"))],
        [
            rslice("s1", [cpart("gpu-0", "set", "4Gi", cap=False)]),
            counters("s2", count=1, set={"memory": "18Gi"}),
        ],
        None,
        features=Features(partitionable_devices=False),
        upstream=("partitionable-devices-disabled-device-consumes-counters",),
    ),
    "feature-off-plain-device-of-same-pool-used": Case(
        [claim("c", req("gpu"))],
        [
            rslice("s1", [cpart("gpu-0", "set", "4Gi", cap=False), dev("gpu-1")], count=2),
            counters("s2", set={"memory": "18Gi"}),
        ],
        [alloc(res("gpu", "gpu-1"))],
        features=Features(partitionable_devices=False),
        upstream=("partitionable-devices-disabled-other-device-do-not-consume-counters",),
    ),
    "feature-off-per-device-node-selection-ignored": Case(
        [claim("c", req("gpu"))],
        [rslice("s1", [dev("gpu-0", nodeName="node-1")], **PER_DEVICE)],
        None,
        features=Features(partitionable_devices=False),
        upstream=("partitionable-devices-disabled-per-device-node-selection",),
    ),
    "per-device-node-name": Case(
        [
            claim(
                "c",
                first_available(
                    "r", sub("x", selectors=at_least("6Gi")), sub("y", selectors=at_least("4Gi"))
                ),
            )
        ],
        [
            rslice(
                "s1",
                [
                    cpart("gpu-0", "set", "4Gi", nodeName="node-1"),
                    cpart("gpu-1", "set", "6Gi", nodeName="node-2"),
                ],
                count=2,
                **PER_DEVICE,
            ),
            rslice(
                "s2",
                [],
                count=2,
                sharedCounters=[{"name": "set", "counters": {"memory": {"value": "18Gi"}}}],
                **PER_DEVICE,
            ),
        ],
        [alloc(res("r/y", "gpu-0", pool="p"))],
        upstream=("partitionable-devices-per-device-node-selection-nodename",),
    ),
    "per-device-node-selector": Case(
        [claim("c", req("gpu"))],
        [
            rslice(
                "s1", [cpart("gpu-0", "set", "4Gi", nodeSelector=labels(zone="a"))], count=2, **PER_DEVICE
            ),
            rslice(
                "s2",
                [],
                count=2,
                sharedCounters=[{"name": "set", "counters": {"memory": {"value": "18Gi"}}}],
                **PER_DEVICE,
            ),
        ],
        [alloc(res("gpu", "gpu-0", pool="p"), node_selector=labels(zone="a"))],
        upstream=("partitionable-devices-per-device-node-selection-node-selector",),
    ),
    "per-device-selector-name-and-all-nodes-merged": Case(
        [claim("c", req("a", count=3), req("b", cls="nic", count=3))],
        [
            rslice(
                "s1",
                [
                    cpart("gpu-0", "set", "4Gi", nodeSelector=labels(zone="a")),
                    cpart("gpu-1", "set", "4Gi", nodeName="node-1"),
                    cpart("gpu-2", "set", "4Gi", allNodes=True),
                ],
                count=2,
                **PER_DEVICE,
            ),
            rslice(
                "s2",
                [],
                count=2,
                sharedCounters=[{"name": "set", "counters": {"memory": {"value": "18Gi"}}}],
                **PER_DEVICE,
            ),
            rslice(
                "s3",
                [cpart(f"nic-{i}", "set-2", "4Gi") for i in range(3)],
                pool="p2",
                count=2,
                driver=DRIVER_B,
            ),
            rslice(
                "s4",
                [],
                pool="p2",
                count=2,
                driver=DRIVER_B,
                sharedCounters=[{"name": "set-2", "counters": {"memory": {"value": "12Gi"}}}],
            ),
        ],
        [
            alloc(
                *[res("a", f"gpu-{i}", pool="p") for i in range(3)],
                *[res("b", f"nic-{i}", pool="p2", driver=DRIVER_B) for i in range(3)],
            )
        ],
        classes=[GPU_CLASS, NIC_CLASS],
        upstream=("partitionable-devices-per-device-node-selection-node-selector-multiple-devices",),
    ),
    "partitions-with-attribute-selector": Case(
        [claim("c", req("a", count=2), req("b", selectors=(attr("special"),)))],
        [
            rslice(
                "s1",
                [
                    dev(
                        f"gpu-{i}",
                        {"special": i == 0},
                        consumesCounters=[consumes("cpu", **{f"cpu{i}": "1"}), consumes("mem", mem="10Gi")],
                    )
                    for i in range(3)
                ],
                count=2,
            ),
            counters("s2", cpu={"cpu0": "1", "cpu1": "1", "cpu2": "1"}, mem={"mem": "30Gi"}),
        ],
        [alloc(res("a", "gpu-1"), res("a", "gpu-2"), res("b", "gpu-0"))],
        upstream=("partitionable-devices-with-attribute-selector",),
    ),
    "counter-set-name-twice-in-pool": Case(
        [claim("c", req("gpu"))],
        [
            rslice("s1", [dev("gpu-0")], count=4),
            counters("s2", count=4, set={}),
            rslice("s3", [dev("gpu-1")], count=4),
            counters("s4", count=4, set={}),
        ],
        None,
        summary='claim "c" request "gpu": 0 devices of class gpu, 0 usable, 1 needed; '
        f"invalid pools: {DRIVER}/node-1 (duplicate counter set name set)",
        upstream=("partitionable-devices-same-counter-set-name-in-different-resource-slices",),
    ),
    "consumes-unknown-counter-set": Case(
        [claim("c", req("gpu"))],
        [
            rslice("s1", [dev("gpu-0", consumesCounters=[consumes("set-2")])], count=2),
            counters("s2", set_1={}),
        ],
        None,
        summary='claim "c" request "gpu": 0 devices of class gpu, 0 usable, 1 needed; '
        f"invalid pools: {DRIVER}/node-1 (counter set set-2 not found)",
        upstream=("partitionable-devices-device-counter-consumption-references-unknown-counter-set",),
    ),
    "consumes-unknown-counter": Case(
        [claim("c", req("gpu"))],
        [
            rslice("s1", [cpart("gpu-0", "set", "8Gi", cap=False)], count=2),
            counters("s2", set={"other-memory": "8Gi"}),
        ],
        None,
        summary='claim "c" request "gpu": 0 devices of class gpu, 0 usable, 1 needed; '
        f"invalid pools: {DRIVER}/node-1 (counter memory not found in counter set set)",
        upstream=(
            "partitionable-devices-device-counter-consumption-references-unknown-counter-in-counter-set",
        ),
    ),
    "consumes-counter-set-of-other-pool": Case(
        [claim("c", req("gpu"))],
        [
            rslice("s1", [cpart("gpu-0", "set", "8Gi", cap=False)], pool="p1"),
            counters("s2", pool="p2", count=1, set={"memory": "8Gi"}),
        ],
        None,
        summary='claim "c" request "gpu": 0 devices of class gpu, 0 usable, 1 needed; '
        f"invalid pools: {DRIVER}/p1 (counter set set not found)",
        upstream=("partitionable-devices-device-counter-consumption-references-counter-set-in-other-pool",),
    ),
    "counters-used-by-device-of-other-node": Case(
        [
            claim(
                "c",
                first_available(
                    "r", sub("x", selectors=at_least("6Gi")), sub("y", selectors=at_least("2Gi"))
                ),
            )
        ],
        [
            counters("s1", count=3, set={"memory": "8Gi"}),
            rslice("s2", [cpart("gpu-0", "set", "6Gi"), cpart("gpu-1", "set", "2Gi")], count=3),
            rslice("s3", [cpart("gpu-2", "set", "6Gi", cap=False)], node="node-2", pool="node-1", count=3),
        ],
        [alloc(res("r/y", "gpu-1"))],
        allocated_devices=("gpu-2",),
        upstream=("partitionable-devices-devices-on-different-nodes-consume-same-counter-set",),
    ),
    "counters-used-by-device-of-this-node-seen-from-other-node": Case(
        [claim("c", req("gpu"))],
        [
            counters("s1", count=3, set={"memory": "8Gi"}),
            rslice("s2", [cpart("gpu-0", "set", "6Gi")], count=3),
            rslice(
                "s3",
                [cpart("gpu-1", "set", "6Gi"), cpart("gpu-2", "set", "2Gi")],
                node="node-2",
                pool="node-1",
                count=3,
            ),
        ],
        [alloc(res("gpu", "gpu-2"), node_selector=PINNED_NODE2)],
        node=NODE2,
        allocated_devices=("gpu-0",),
        upstream=("partitionable-devices-devices-consume-counter-set-in-different-nodes",),
    ),
    "invalid-counter-reference-in-slice-of-other-node": Case(
        [claim("c", req("gpu"))],
        [
            counters("s1", count=3, set={"memory": "8Gi"}),
            rslice("s2", [cpart("gpu-0", "set", "6Gi")], count=3),
            rslice("s3", [cpart("gpu-2", "set-2", "6Gi", cap=False)], node="node-2", pool="node-1", count=3),
        ],
        None,
        summary='claim "c" request "gpu": 0 devices of class gpu, 0 usable, 1 needed; '
        f"invalid pools: {DRIVER}/node-1 (counter set set-2 not found)",
        upstream=("partitionable-devices-validation-error-on-non-targeting-slice",),
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_partitionable(case: Case) -> None:
    check_case(case)
