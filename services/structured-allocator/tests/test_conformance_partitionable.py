"""Conformance table: Partitionable devices: shared counters (DRAPartitionableDevices).

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from conformance_kit import DRIVER, Case, check_case, consumes, counters, exclusive_alloc, params
from sa_builders import alloc, claim, dev, req, res, rslice

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
}


@pytest.mark.parametrize("case", params(CASES))
def test_partitionable(case: Case) -> None:
    check_case(case)
